//! Store conformance: put, get, delete, and what stores refuse.

use super::*;

pub async fn put_get_roundtrip(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({"food": "pizza", "n": 3, "tags": ["a", "b"], "nested": {"x": null}});
    f.store().put(&[&r, "m"], "k1", v.clone()).await.unwrap();
    let item = f.store().get(&[&r, "m"], "k1").await.unwrap().unwrap();
    assert_eq!(item.value, v);
    assert_eq!(item.key, "k1");
    assert_eq!(item.namespace, vec![r.clone(), "m".to_owned()]);
}

pub async fn get_missing_is_none(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    assert_eq!(f.store().get(&[&r], "nope").await.unwrap(), None);
}

pub async fn item_fields(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let before = Timestamp::now();
    f.store()
        .put(&[&r, "a"], "k", json!({"x": 1}))
        .await
        .unwrap();
    let item = f.store().get(&[&r, "a"], "k").await.unwrap().unwrap();
    // Database clocks may differ from ours by a little; allow a minute either way.
    let slack = 60_000_000;
    assert!(item.created_at.unix_micros() > before.unix_micros() - slack);
    assert!(item.created_at.unix_micros() < Timestamp::now().unix_micros() + slack);
    assert_eq!(item.created_at, item.updated_at);
    let j = item.to_json();
    assert_eq!(j["namespace"], json!([r, "a"]));
    assert_eq!(j["key"], "k");
    assert!(j["created_at"].as_str().unwrap().ends_with("+00:00"));
}

pub async fn put_updates_in_place(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r], "k", json!({"v": 1})).await.unwrap();
    let first = s.get(&[&r], "k").await.unwrap().unwrap();
    clock.advance(Duration::from_millis(5));
    s.put(&[&r], "k", json!({"v": 2})).await.unwrap();
    let second = s.get(&[&r], "k").await.unwrap().unwrap();
    assert_eq!(second.value, json!({"v": 2}));
    assert_eq!(
        second.created_at, first.created_at,
        "created_at is kept on update"
    );
    assert!(second.updated_at > first.updated_at);
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        1
    );
}

pub async fn delete_removes(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store().put(&[&r], "k", json!({"v": 1})).await.unwrap();
    f.store().delete(&[&r], "k").await.unwrap();
    assert_eq!(f.store().get(&[&r], "k").await.unwrap(), None);
    assert!(
        search(f.store().as_ref(), &[&r], SearchOptions::new())
            .await
            .is_empty()
    );
}

pub async fn delete_missing_is_noop(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store().delete(&[&r], "never").await.unwrap();
}

pub async fn namespaces_isolate_keys(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r, "u1"], "k", json!({"who": 1})).await.unwrap();
    s.put(&[&r, "u2"], "k", json!({"who": 2})).await.unwrap();
    assert_eq!(
        s.get(&[&r, "u1"], "k").await.unwrap().unwrap().value["who"],
        1
    );
    assert_eq!(
        s.get(&[&r, "u2"], "k").await.unwrap().unwrap().value["who"],
        2
    );
    assert_eq!(s.get(&[&r], "k").await.unwrap(), None);
}

pub async fn rejects_bad_namespaces(make: MakeStore<'_>) {
    let f = plain(make).await;
    let s = f.store();
    let v = json!({"v": 1});
    for bad in [
        &[][..],
        &["langgraph", "x"][..],
        &["a", ""][..],
        &["a.b"][..],
    ] {
        let err = s.put(bad, "k", v.clone()).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidNamespace { .. }),
            "{bad:?}: {err}"
        );
    }
    let err = s.get(&["a", "b.c"], "k").await.unwrap_err();
    assert!(err.to_string().contains("contains `.`"), "{err}");
    let err = s
        .search(&["", "x"], SearchOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidNamespace { .. }), "{err}");
}

pub async fn rejects_non_object_values(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    for bad in [json!("text"), json!([1]), json!(3), json!(null)] {
        let err = f.store().put(&[&r], "k", bad).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidValue { ref key, .. } if key == "k"),
            "{err}"
        );
    }
    // A failed batch changes nothing, even its valid ops.
    let ops = vec![
        Op::Put(PutOp {
            namespace: ns(&[&r]),
            key: "good".into(),
            value: Some(json!({"v": 1})),
            index: IndexFields::Default,
            ttl: None,
        }),
        Op::Put(PutOp {
            namespace: ns(&[&r]),
            key: "bad".into(),
            value: Some(json!(1)),
            index: IndexFields::Default,
            ttl: None,
        }),
    ];
    assert!(f.store().batch(ops).await.is_err());
    assert_eq!(f.store().get(&[&r], "good").await.unwrap(), None);
}

/// The largest, smallest and least finite numbers read back exactly as they were put
/// (a database that keeps numbers as exact decimals returns f64::MAX as 309 digits).
pub async fn extreme_numbers_read_back(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({
        "max": f64::MAX, "min": f64::MIN, "least": 5e-324, "small": -4.351414455614859e-176,
        "big_int": i64::MAX, "neg_int": i64::MIN, "u64": u64::MAX, "nested": [[f64::MAX]],
    });
    f.store().put(&[&r], "k", v.clone()).await.unwrap();
    let item = f.store().get(&[&r], "k").await.unwrap().unwrap();
    assert_eq!(item.value, v);
    let found = f
        .store()
        .search(&[&r], SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].item.value, v);
}

/// A value, key or filter holding U+0000 either reads back exactly or is refused with a
/// typed error naming it (`InvalidValue`, `InvalidFilter`): never a backend failure, and a
/// get by such a key finds nothing or the item.
pub async fn nul_characters_read_back_or_are_refused(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let v = json!({"text": "a\u{0}b", "k\u{0}": 1});
    match f.store().put(&[&r], "k", v.clone()).await {
        Ok(()) => {
            let item = f.store().get(&[&r], "k").await.unwrap().unwrap();
            assert_eq!(item.value, v);
        }
        Err(err) => assert!(
            matches!(err, StoreError::InvalidValue { ref key, ref reason, .. }
                if key == "k" && reason.contains("U+0000")),
            "{err}"
        ),
    }
    match f.store().put(&[&r], "n\u{0}", json!({"x": 1})).await {
        Ok(()) => {
            let item = f.store().get(&[&r], "n\u{0}").await.unwrap().unwrap();
            assert_eq!(item.value, json!({"x": 1}));
        }
        Err(err) => {
            assert!(
                matches!(err, StoreError::InvalidValue { ref key, .. } if key == "n\u{0}"),
                "{err}"
            );
            assert_eq!(f.store().get(&[&r], "n\u{0}").await.unwrap(), None);
        }
    }
    let search = SearchOptions {
        filter: Some(json!({"text": "a\u{0}b"})),
        ..SearchOptions::default()
    };
    match f.store().search(&[&r], search).await {
        Ok(found) => assert!(found.len() <= 1),
        Err(err) => assert!(
            matches!(err, StoreError::InvalidFilter { ref key, .. } if key == "text"),
            "{err}"
        ),
    }
}
