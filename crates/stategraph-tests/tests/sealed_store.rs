//! Store values encrypted at rest (`SealedStore`) on the in-memory, SQLite and Postgres
//! stores: what the inner store holds, reads through the wrapper, filters on sealed and clear
//! fields with paging, semantic search on a clear field, refused indexes, the wrong key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use stategraph::AesEaxCipher;
use stategraph::store::{
    HashingEmbeddings, IndexConfig, IndexFields, PutOptions, SEALED_KEY, SealedStore,
    SearchOptions, Store, StoreError, StoreOptions,
};

fn cipher(key: &[u8]) -> Arc<AesEaxCipher> {
    Arc::new(AesEaxCipher::new(key).unwrap())
}

fn options() -> StoreOptions {
    let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))).with_fields(["note"]);
    StoreOptions::new().index(index)
}

async fn sealed_store(inner: Arc<dyn Store>) -> SealedStore {
    // The index embeds `note`: sealing it is refused, keeping it clear is accepted.
    let err = SealedStore::new(inner.clone(), cipher(b"0123456789abcdef")).unwrap_err();
    assert!(matches!(err, StoreError::InvalidConfig(_)), "{err}");
    SealedStore::with_clear(inner, cipher(b"0123456789abcdef"), ["note", "kind"]).unwrap()
}

async fn check(inner: Arc<dyn Store>) {
    let store = sealed_store(inner.clone()).await;
    let people = [
        ("p1", "alice", 34, "likes pizza and chess"),
        ("p2", "bob", 51, "allergic to peanuts"),
        ("p3", "carol", 29, "plays the piano"),
        ("p4", "dan", 45, "likes pizza with mushrooms"),
    ];
    for (key, name, age, note) in people {
        store
            .put(
                &["crm", "people"],
                key,
                json!({"name": name, "age": age, "note": note, "kind": "person"}),
            )
            .await
            .unwrap();
    }

    // At rest: clear fields readable, the rest only inside the sealed entry.
    let raw = inner.get(&["crm", "people"], "p1").await.unwrap().unwrap();
    assert_eq!(raw.value["note"], json!("likes pizza and chess"));
    assert!(raw.value.get("name").is_none() && raw.value.get("age").is_none());
    let sealed = raw.value[SEALED_KEY].as_str().unwrap();
    assert!(
        sealed.starts_with("aes:") && !sealed.contains("alice"),
        "{sealed}"
    );

    // Through the wrapper: the whole value.
    let item = store.get(&["crm", "people"], "p1").await.unwrap().unwrap();
    assert_eq!(
        item.value,
        json!({"note": "likes pizza and chess", "kind": "person", "name": "alice", "age": 34})
    );

    // Filters on sealed fields (applied after decryption), with paging; clear ones too.
    let search = |filter: serde_json::Value, offset: usize, limit: usize| {
        let store = &store;
        async move {
            let mut keys: Vec<String> = store
                .search(
                    &["crm"],
                    SearchOptions::new()
                        .filter(filter)
                        .offset(offset)
                        .limit(limit),
                )
                .await
                .unwrap()
                .into_iter()
                .map(|h| h.key.clone())
                .collect();
            keys.sort();
            keys
        }
    };
    assert_eq!(
        search(json!({"age": {"$gte": 40}}), 0, 10).await,
        ["p2", "p4"]
    );
    assert_eq!(search(json!({"age": {"$gte": 30}}), 0, 10).await.len(), 3);
    assert_eq!(search(json!({"age": {"$gte": 30}}), 1, 1).await.len(), 1);
    assert_eq!(search(json!({"age": {"$gte": 30}}), 3, 10).await.len(), 0);
    assert_eq!(
        search(json!({"kind": "person", "name": "carol"}), 0, 10).await,
        ["p3"]
    );

    // Semantic search on the clear field.
    let hits = store
        .search(&["crm"], SearchOptions::new().query("pizza").limit(2))
        .await
        .unwrap();
    let mut keys: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["p1", "p4"]);
    assert_eq!(
        hits[0].value["name"].as_str().map(|n| n.len() > 2),
        Some(true)
    );

    // A per-put index over a sealed field is refused, and nothing is written.
    let err = store
        .put_with(
            &["crm", "people"],
            "p5",
            json!({"name": "eve", "note": "x"}),
            PutOptions {
                index: IndexFields::Fields(vec!["name".into()]),
                ..PutOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidConfig(_)), "{err}");
    assert!(inner.get(&["crm", "people"], "p5").await.unwrap().is_none());

    // The wrong key: a typed error naming the item.
    let wrong =
        SealedStore::with_clear(inner, cipher(b"fedcba9876543210"), ["note", "kind"]).unwrap();
    let err = wrong.get(&["crm", "people"], "p2").await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("p2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory() {
    check(stategraph::open_store("memory:", options()).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("sealed.sqlite").display());
    check(stategraph::open_store(&url, options()).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let schema = stategraph_testkit::postgres::ScratchSchema::new("sg_sealed");
    let StoreOptions { index, ttl } = options();
    let store =
        stategraph_postgres::PostgresStoreConfig::from_url(&stategraph_testkit::postgres::url())
            .unwrap()
            .schema(schema.name())
            .pool_size(2)
            .index(index.unwrap())
            .ttl(ttl)
            .connect()
            .await
            .unwrap();
    check(Arc::new(store)).await;
}
