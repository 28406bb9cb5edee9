//! Store conformance: TTLs, sweeping, and the store's clock.

use super::*;

/// TTL options with a manual clock (starting at [`manual_start`]) that the case moves past
/// expiry times instead of sleeping.
pub(super) fn ttl_options(
    default_ttl: Option<Duration>,
    refresh_on_read: bool,
) -> (StoreOptions, ManualClock) {
    let clock = ManualClock::new(manual_start());
    let ttl = TtlConfig {
        default_ttl,
        refresh_on_read,
        sweep_interval: None,
        clock: clock.clock(),
    };
    (StoreOptions::new().ttl(ttl), clock)
}

/// A short TTL: half a minute (a fraction of LangGraph's unit, whose Postgres column holds
/// whole minutes).
const SHORT: Duration = Duration::from_secs(30);

pub async fn ttl_expires_items(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let short = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::After(SHORT),
    };
    s.put_with(&[&r], "short", json!({"v": 1}), short)
        .await
        .unwrap();
    s.put(&[&r], "forever", json!({"v": 2})).await.unwrap();
    clock.advance(SHORT.mul_f64(0.9));
    assert!(
        s.get(&[&r], "short").await.unwrap().is_some(),
        "live until its TTL is over"
    );
    clock.advance(SHORT.mul_f64(0.2));
    assert_eq!(
        s.get(&[&r], "short").await.unwrap(),
        None,
        "expired items are not read"
    );
    assert_eq!(
        keys(&search(s.as_ref(), &[&r], SearchOptions::new()).await),
        ["forever"]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r]);
    assert_eq!(s.list_namespaces(opts).await.unwrap().len(), 1);
    clock.advance(Duration::from_secs(365 * 24 * 60 * 60));
    assert!(
        s.get(&[&r], "forever").await.unwrap().is_some(),
        "no TTL, no expiry"
    );
}

pub async fn ttl_refresh_on_read(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, true);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let opts = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::After(SHORT * 2),
    };
    s.put_with(&[&r], "k", json!({"v": 1}), opts.clone())
        .await
        .unwrap();
    s.put_with(&[&r], "idle", json!({"v": 1}), opts)
        .await
        .unwrap();
    for _ in 0..4 {
        clock.advance(SHORT * 2 / 3);
        assert!(
            s.get(&[&r], "k").await.unwrap().is_some(),
            "each read extends the TTL"
        );
    }
    assert_eq!(
        s.get(&[&r], "idle").await.unwrap(),
        None,
        "an unread item expired"
    );
    // A search refreshes what it returns, unless told not to.
    let hits = search(s.as_ref(), &[&r], SearchOptions::new()).await;
    assert_eq!(keys(&hits), ["k"]);
    clock.advance(SHORT.mul_f64(1.5));
    let quiet = SearchOptions::new().refresh_ttl(false);
    assert_eq!(keys(&search(s.as_ref(), &[&r], quiet.clone()).await), ["k"]);
    clock.advance(SHORT);
    assert!(search(s.as_ref(), &[&r], quiet).await.is_empty());
}

pub async fn ttl_sweep_deletes_expired(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(None, false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    let short = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::After(SHORT),
    };
    s.put_with(&[&r], "a", json!({}), short.clone())
        .await
        .unwrap();
    s.put_with(&[&r], "b", json!({}), short).await.unwrap();
    s.put(&[&r], "c", json!({})).await.unwrap();
    assert_eq!(s.sweep_ttl().await.unwrap(), 0, "nothing has expired yet");
    clock.advance(SHORT.mul_f64(1.1));
    assert_eq!(s.sweep_ttl().await.unwrap(), 2);
    assert_eq!(
        keys(&search(s.as_ref(), &[&r], SearchOptions::new()).await),
        ["c"]
    );
}

pub async fn ttl_default_from_config(make: MakeStore<'_>) {
    let (options, clock) = ttl_options(Some(SHORT), false);
    let f = make(options).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "default", json!({})).await.unwrap();
    let never = PutOptions {
        index: IndexFields::Default,
        ttl: Ttl::Never,
    };
    s.put_with(&[&r], "never", json!({}), never).await.unwrap();
    clock.advance(SHORT.mul_f64(1.1));
    assert_eq!(s.get(&[&r], "default").await.unwrap(), None);
    assert!(s.get(&[&r], "never").await.unwrap().is_some());
}

/// Items are stamped by the store's clock, not the database server's.
pub async fn clock_stamps_items(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    let before = clock.time();
    s.put(&[&r], "k", json!({"v": 1})).await.unwrap();
    let first = s.get(&[&r], "k").await.unwrap().unwrap();
    assert!(first.created_at >= before && first.created_at < clock.time());
    clock.advance(Duration::from_secs(90 * 60));
    s.put(&[&r], "k", json!({"v": 2})).await.unwrap();
    let second = s.get(&[&r], "k").await.unwrap().unwrap();
    assert_eq!(second.created_at, first.created_at);
    let moved = second.updated_at.unix_micros() - first.updated_at.unix_micros();
    assert!(
        (90 * 60_000_000..91 * 60_000_000).contains(&moved),
        "updated_at moved by {moved} µs"
    );
}

pub async fn unicode_and_nested_values(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({"text": "我喜欢披萨 🍕", "deep": {"a": [1, {"b": [true, null, 1.5]}]},
                   "big": 9007199254740993u64, "neg": -3, "quote": "it's \"q\""});
    f.store().put(&[&r, "ü"], "键", v.clone()).await.unwrap();
    let got = f.store().get(&[&r, "ü"], "键").await.unwrap().unwrap();
    assert_eq!(got.value, v);
}
