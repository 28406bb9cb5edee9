//! Corrupt or foreign `store` rows: typed errors naming the namespace and key, never a panic
//! and never a silently missing item; rows in the formats Python writes are read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use stategraph_sqlite::{SqliteStore, SqliteStoreConfig};
use stategraph_store::{SearchOptions, Store, StoreError, Timestamp};

struct Db {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    store: SqliteStore,
}

/// Items `users.u1/good` and `users.u1/bad` (the one the tests corrupt).
async fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let store = SqliteStoreConfig::file(&path).connect().await.unwrap();
    store
        .put(&["users", "u1"], "good", json!({"kind": "fine"}))
        .await
        .unwrap();
    store
        .put(&["users", "u1"], "bad", json!({"kind": "fine"}))
        .await
        .unwrap();
    Db {
        _dir: dir,
        path,
        store,
    }
}

fn exec(db: &Db, sql: &str) {
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn assert_corrupt(err: StoreError, mentions: &str) {
    match &err {
        StoreError::Corrupt {
            namespace,
            key,
            reason,
        } => {
            assert_eq!(namespace, &["users", "u1"]);
            assert_eq!(key, "bad");
            assert!(reason.contains(mentions), "{err}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_json_in_value_is_corrupt() {
    let db = db().await;
    exec(
        &db,
        "UPDATE store SET value = '{\"kind\": ' WHERE key = 'bad'",
    );
    let s = &db.store;
    assert_corrupt(
        s.get(&["users", "u1"], "bad").await.unwrap_err(),
        "not JSON",
    );
    assert_corrupt(
        s.search(&["users"], SearchOptions::new())
            .await
            .unwrap_err(),
        "not JSON",
    );
    // A filter does not hide a corrupt row either.
    let filtered = SearchOptions::new().filter(json!({"kind": "fine"}));
    assert_corrupt(
        s.search(&["users"], filtered).await.unwrap_err(),
        "not JSON",
    );
    // The healthy item is still readable, and a put repairs the broken one.
    assert!(s.get(&["users", "u1"], "good").await.unwrap().is_some());
    s.put(&["users", "u1"], "bad", json!({"kind": "fixed"}))
        .await
        .unwrap();
    let fixed = s.get(&["users", "u1"], "bad").await.unwrap().unwrap();
    assert_eq!(fixed.value, json!({"kind": "fixed"}));
}

#[tokio::test]
async fn non_object_value_is_corrupt() {
    let db = db().await;
    exec(&db, "UPDATE store SET value = '[1, 2]' WHERE key = 'bad'");
    assert_corrupt(
        db.store.get(&["users", "u1"], "bad").await.unwrap_err(),
        "not a JSON object",
    );
}

#[tokio::test]
async fn bad_timestamp_is_corrupt() {
    let db = db().await;
    exec(
        &db,
        "UPDATE store SET updated_at = 'yesterday' WHERE key = 'bad'",
    );
    assert_corrupt(
        db.store.get(&["users", "u1"], "bad").await.unwrap_err(),
        "updated_at",
    );
    exec(&db, "UPDATE store SET created_at = NULL WHERE key = 'bad'");
    assert_corrupt(
        db.store
            .search(&["users", "u1"], SearchOptions::new())
            .await
            .unwrap_err(),
        "created_at",
    );
}

#[tokio::test]
async fn python_formats_are_read() {
    let db = db().await;
    // What Python's SqliteStore writes: orjson bytes (a BLOB) and CURRENT_TIMESTAMP text.
    exec(
        &db,
        "UPDATE store SET value = CAST('{\"kind\":\"py\",\"n\":5}' AS BLOB), \
         created_at = '2024-02-29 23:59:59', updated_at = '2024-03-01 00:00:01' \
         WHERE key = 'bad'",
    );
    let item = db
        .store
        .get(&["users", "u1"], "bad")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.value, json!({"kind": "py", "n": 5}));
    assert_eq!(
        item.created_at,
        Timestamp::parse("2024-02-29T23:59:59+00:00").unwrap()
    );
    assert_eq!(item.updated_at.to_iso(), "2024-03-01T00:00:01+00:00");
    let hits = db
        .store
        .search(
            &["users"],
            SearchOptions::new().filter(json!({"n": {"$gt": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].key, "bad");
    // A put keeps the created_at Python wrote.
    db.store
        .put(&["users", "u1"], "bad", json!({"kind": "rust"}))
        .await
        .unwrap();
    let item = db
        .store
        .get(&["users", "u1"], "bad")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.created_at.to_iso(), "2024-02-29T23:59:59+00:00");
    assert!(item.updated_at > item.created_at);
}
