//! Store conformance: listing namespaces.

use super::*;

pub(super) async fn namespaces_fixture(make: MakeStore<'_>) -> (StoreFixture, String) {
    let f = plain(make).await;
    let r = root();
    for n in [
        vec!["users", "u2", "memories"],
        vec!["users", "u1", "memories"],
        vec!["users", "u1", "prefs"],
        vec!["docs", "x"],
        vec!["docs"],
        vec!["users-archive", "u9", "memories"],
    ] {
        let mut full = vec![r.as_str()];
        full.extend(n);
        f.store().put(&full, "k", json!({})).await.unwrap();
    }
    (f, r)
}

pub(super) fn strip(r: &str, got: Vec<Namespace>) -> Vec<String> {
    got.into_iter()
        .map(|mut n| {
            assert_eq!(n[0], r);
            n.remove(0);
            n.join("/")
        })
        .collect()
}

pub async fn list_namespaces_sorted(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let got = f
        .store()
        .list_namespaces(ListNamespacesOptions::new().prefix(&[&r]))
        .await
        .unwrap();
    assert_eq!(
        strip(&r, got),
        [
            "docs",
            "docs/x",
            "users/u1/memories",
            "users/u1/prefs",
            "users/u2/memories",
            "users-archive/u9/memories"
        ],
        "sorted label by label"
    );
}

pub async fn list_namespaces_max_depth(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let opts = ListNamespacesOptions::new().prefix(&[&r]).max_depth(3);
    let got = f.store().list_namespaces(opts).await.unwrap();
    assert_eq!(
        strip(&r, got),
        ["docs", "docs/x", "users/u1", "users/u2", "users-archive/u9"]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r]).max_depth(2);
    let got = f.store().list_namespaces(opts).await.unwrap();
    assert_eq!(strip(&r, got), ["docs", "users", "users-archive"]);
}

pub async fn list_namespaces_suffix_and_wildcard(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let s = f.store();
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r])
        .suffix(&["memories"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        [
            "users/u1/memories",
            "users/u2/memories",
            "users-archive/u9/memories"
        ]
    );
    let opts = ListNamespacesOptions::new().prefix(&[&r, "users", "*", "memories"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        ["users/u1/memories", "users/u2/memories"]
    );
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r, "*", "u1"])
        .suffix(&["prefs"]);
    assert_eq!(
        strip(&r, s.list_namespaces(opts).await.unwrap()),
        ["users/u1/prefs"]
    );
}

pub async fn list_namespaces_limit_offset(make: MakeStore<'_>) {
    let (f, r) = namespaces_fixture(make).await;
    let opts = ListNamespacesOptions::new()
        .prefix(&[&r])
        .limit(2)
        .offset(1);
    assert_eq!(
        strip(&r, f.store().list_namespaces(opts).await.unwrap()),
        ["docs/x", "users/u1/memories"]
    );
}
