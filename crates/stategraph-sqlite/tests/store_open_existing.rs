//! `SqliteStoreConfig::without_setup`: opening changes nothing. A missing file or a database
//! without the store's tables is a typed error naming the tables, and reads leave the file
//! byte for byte as it was (no tables created, no switch to WAL mode).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use stategraph_sqlite::SqliteStoreConfig;
use stategraph_store::{
    HashingEmbeddings, IndexConfig, ListNamespacesOptions, SearchOptions, Store, StoreError,
};

fn missing(err: StoreError) -> (String, Vec<String>) {
    match err {
        StoreError::MissingTables { database, tables } => (database, tables),
        other => panic!("expected MissingTables, got {other}"),
    }
}

/// The file's journal mode, read without changing it.
fn journal_mode(path: &Path) -> String {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(path, flags).unwrap();
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

/// Connects as `config` says, without setup.
async fn existing(config: SqliteStoreConfig) -> Result<stategraph_sqlite::SqliteStore, StoreError> {
    config.without_setup().connect().await
}

#[tokio::test]
async fn a_missing_file_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.sqlite");
    let err = existing(SqliteStoreConfig::file(&path)).await.unwrap_err();
    let message = err.to_string();
    let (database, tables) = missing(err);
    assert!(database.contains("does not exist"), "{database}");
    assert_eq!(tables, ["store", "store_migrations"]);
    assert!(message.contains("store, store_migrations"), "{message}");
    assert!(!path.exists());
}

#[tokio::test]
async fn a_database_without_the_tables_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hi')")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = existing(SqliteStoreConfig::file(&path)).await.unwrap_err();
    let (database, tables) = missing(err);
    assert!(database.contains("other.sqlite"), "{database}");
    assert_eq!(tables, ["store", "store_migrations"]);
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
    assert_eq!(journal_mode(&path), "delete");

    let err = existing(SqliteStoreConfig::memory()).await.unwrap_err();
    assert_eq!(missing(err).1, ["store", "store_migrations"]);

    // With an index, the vector tables are named too.
    let index = IndexConfig::new(8, Arc::new(HashingEmbeddings::new(8)));
    let err = existing(SqliteStoreConfig::file(&path).index(index))
        .await
        .unwrap_err();
    assert_eq!(
        missing(err).1,
        [
            "store",
            "store_migrations",
            "store_vectors",
            "vector_migrations"
        ]
    );
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_change_nothing_and_writes_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    {
        let store = SqliteStoreConfig::file(&path).connect().await.unwrap();
        store.put(&["a", "b"], "k", json!({"v": 1})).await.unwrap();
    }
    // Back to a rollback journal, as a file written by another program may be.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
    }
    let before = std::fs::read(&path).unwrap();

    let store = existing(SqliteStoreConfig::file(&path)).await.unwrap();
    let item = store.get(&["a", "b"], "k").await.unwrap().unwrap();
    assert_eq!(item.value, json!({"v": 1}));
    let hits = store.search(&["a"], SearchOptions::new()).await.unwrap();
    assert_eq!(hits.len(), 1);
    let namespaces = store
        .list_namespaces(ListNamespacesOptions::new())
        .await
        .unwrap();
    assert_eq!(namespaces, [["a", "b"]]);
    assert!(
        std::fs::read(&path).unwrap() == before,
        "a read changed the file"
    );
    assert_eq!(journal_mode(&path), "delete");

    // An index needs its vector table, which only a set-up creates.
    let index = IndexConfig::new(8, Arc::new(HashingEmbeddings::new(8)));
    let err = existing(SqliteStoreConfig::file(&path).index(index.clone()))
        .await
        .unwrap_err();
    assert_eq!(missing(err).1, ["store_vectors", "vector_migrations"]);
    assert!(std::fs::read(&path).unwrap() == before);

    // Writing is writing: it works, in WAL mode as the store always writes.
    store.put(&["a", "b"], "k2", json!({"v": 2})).await.unwrap();
    assert_eq!(journal_mode(&path), "wal");
    // Once a set-up store with an index has created the vector table, it opens with one.
    SqliteStoreConfig::file(&path)
        .index(index.clone())
        .connect()
        .await
        .unwrap();
    let reopened = existing(SqliteStoreConfig::file(&path).index(index))
        .await
        .unwrap();
    assert!(reopened.get(&["a", "b"], "k2").await.unwrap().is_some());
}
