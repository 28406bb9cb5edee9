//! Store conformance: batches of operations.

use super::*;

pub(super) fn put_op(ns_: &[&str], key: &str, value: Json) -> Op {
    Op::Put(PutOp {
        namespace: ns(ns_),
        key: key.into(),
        value: Some(value),
        index: IndexFields::Default,
        ttl: None,
    })
}

pub(super) fn get_op(ns_: &[&str], key: &str) -> Op {
    Op::Get(GetOp {
        namespace: ns(ns_),
        key: key.into(),
        refresh_ttl: false,
    })
}

pub async fn batch_results_in_order(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    let results = f
        .store()
        .batch(vec![
            get_op(&[&r], "a"),
            put_op(&[&r], "a", json!({"v": 1})),
            get_op(&[&r], "a"),
            Op::ListNamespaces(ListNamespacesOp {
                match_conditions: vec![MatchCondition {
                    match_type: MatchType::Prefix,
                    path: vec![r.clone()],
                }],
                max_depth: None,
                limit: 10,
                offset: 0,
            }),
            Op::Search(SearchOp {
                namespace_prefix: ns(&[&r]),
                filter: None,
                limit: 10,
                offset: 0,
                query: None,
                refresh_ttl: false,
            }),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], OpResult::Get(None), "ops run in order");
    assert!(matches!(&results[1], OpResult::Put));
    assert!(matches!(&results[2], OpResult::Get(Some(i)) if i.value == json!({"v": 1})));
    assert_eq!(results[3], OpResult::ListNamespaces(vec![vec![r.clone()]]));
    assert!(matches!(&results[4], OpResult::Search(v) if v.len() == 1));
}

pub async fn batch_last_put_wins(make: MakeStore<'_>) {
    let f = plain(make).await;
    let r = root();
    f.store()
        .batch(vec![
            put_op(&[&r], "k", json!({"v": 1})),
            put_op(&[&r], "k", json!({"v": 2})),
            put_op(&[&r], "j", json!({"v": 3})),
        ])
        .await
        .unwrap();
    assert_eq!(
        f.store().get(&[&r], "k").await.unwrap().unwrap().value["v"],
        2
    );
    assert_eq!(
        f.store().get(&[&r], "j").await.unwrap().unwrap().value["v"],
        3
    );
}
