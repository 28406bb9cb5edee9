//! Store conformance: search without an index: prefixes, order, paging, filters.

use super::*;

pub async fn search_prefix_is_label_wise(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let s = f.store();
    s.put(&[&r, "a"], "1", json!({})).await.unwrap();
    s.put(&[&r, "a", "deep"], "2", json!({})).await.unwrap();
    s.put(&[&r, "ab"], "3", json!({})).await.unwrap();
    s.put(&[&r, "a_"], "4", json!({})).await.unwrap();
    let mut got = keys(&search(s.as_ref(), &[&r, "a"], SearchOptions::new()).await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["1", "2"], "(a) matches a and a.deep, not ab or a_");
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        4
    );
}

pub async fn search_orders_newest_first(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    for k in ["a", "b", "c"] {
        s.put(&[&r], k, json!({"k": k})).await.unwrap();
        clock.advance(Duration::from_millis(2));
    }
    s.put(&[&r], "a", json!({"k": "a2"})).await.unwrap();
    let got = search(s.as_ref(), &[&r], SearchOptions::new()).await;
    assert_eq!(keys(&got), ["a", "c", "b"]);
    assert!(got.iter().all(|i| i.score.is_none()));
}

pub async fn search_limit_offset(make: MakeStore<'_>) {
    let (f, clock) = clocked(make).await;
    let r = root();
    let s = f.store();
    for i in 0..7 {
        s.put(&[&r], &format!("k{i}"), json!({"i": i}))
            .await
            .unwrap();
        clock.advance(Duration::from_millis(2));
    }
    let page = search(s.as_ref(), &[&r], SearchOptions::new().limit(3).offset(2)).await;
    assert_eq!(keys(&page), ["k4", "k3", "k2"]);
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new().offset(6))
            .await
            .len(),
        1
    );
    assert!(
        search(s.as_ref(), &[&r], SearchOptions::new().limit(0))
            .await
            .is_empty()
    );
    assert_eq!(
        search(s.as_ref(), &[&r], SearchOptions::new()).await.len(),
        7
    );
}

pub(super) async fn filter_keys(s: &dyn Store, r: &str, filter: Json) -> Vec<String> {
    let mut got: Vec<String> = search(s, &[r], SearchOptions::new().filter(filter))
        .await
        .iter()
        .map(|i| i.key.clone())
        .collect();
    got.sort();
    got
}

pub(super) async fn filter_fixture(make: MakeStore<'_>) -> (StoreFixture, String) {
    let f = plain(make).await;
    let r = root();
    let docs = [
        (
            "a",
            json!({"n": 10, "s": "apple", "kind": "fruit", "o": {"x": 1, "l": [1, 2]}}),
        ),
        (
            "b",
            json!({"n": 6, "s": "banana", "kind": "fruit", "o": {"x": 2}}),
        ),
        (
            "c",
            json!({"n": 2.5, "s": "carrot", "kind": "veg", "tags": ["x", "y"]}),
        ),
        ("d", json!({"s": "date", "kind": null})),
    ];
    for (k, v) in docs {
        f.store().put(&[&r, "docs"], k, v).await.unwrap();
    }
    (f, r)
}

pub async fn search_filter_equality(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"kind": "fruit"})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"kind": {"$eq": "veg"}})).await,
        ["c"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": 10.0})).await,
        ["a"],
        "numbers by value"
    );
    assert_eq!(
        filter_keys(s, &r, json!({"kind": "fruit", "n": 6})).await,
        ["b"]
    );
    assert_eq!(filter_keys(s, &r, json!({"tags": ["x", "y"]})).await, ["c"]);
    assert!(
        filter_keys(s, &r, json!({"tags": ["x"]})).await.is_empty(),
        "arrays exactly"
    );
    assert_eq!(filter_keys(s, &r, json!({"kind": null})).await, ["d"]);
    assert!(filter_keys(s, &r, json!({"kind": "meat"})).await.is_empty());
}

pub async fn search_filter_numeric(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    // LangGraph's Postgres store compares these as text; stategraph compares numbers.
    assert_eq!(filter_keys(s, &r, json!({"n": {"$gt": 6}})).await, ["a"]);
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$gte": 6}})).await,
        ["a", "b"]
    );
    assert_eq!(filter_keys(s, &r, json!({"n": {"$lt": 6}})).await, ["c"]);
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$lte": 10, "$gt": 2.5}})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$gt": 5}})).await,
        Vec::<String>::new()
    );
}

pub async fn search_filter_strings(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$gt": "b"}})).await,
        ["b", "c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"s": {"$lte": "banana"}})).await,
        ["a", "b"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$gt": "1"}})).await,
        Vec::<String>::new()
    );
}

pub async fn search_filter_ne_and_missing(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(
        filter_keys(s, &r, json!({"kind": {"$ne": "fruit"}})).await,
        ["c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"n": {"$ne": 10}})).await,
        ["b", "c", "d"]
    );
    assert_eq!(
        filter_keys(s, &r, json!({"missing": {"$ne": 1}}))
            .await
            .len(),
        4
    );
}

pub async fn search_filter_containment(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    let s = f.store().as_ref();
    assert_eq!(filter_keys(s, &r, json!({"o": {"x": 1}})).await, ["a"]);
    assert_eq!(filter_keys(s, &r, json!({"o": {"l": [2]}})).await, ["a"]);
    assert!(filter_keys(s, &r, json!({"o": {"x": 3}})).await.is_empty());
    assert_eq!(
        filter_keys(s, &r, json!({"o": {"$eq": {"x": 2}}})).await,
        ["b"]
    );
}

pub async fn search_filter_rejects_bad_operators(make: MakeStore<'_>) {
    let (f, r) = filter_fixture(make).await;
    for bad in [
        json!({"n": {"$in": [1]}}),
        json!({"n": {"$gt": true}}),
        json!("n"),
    ] {
        let err = f
            .store()
            .search(&[&r], SearchOptions::new().filter(bad.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidFilter { .. }),
            "{bad}: {err}"
        );
    }
}
