//! The shared node cache conformance suite against `SqliteCache`, each case in a database file
//! of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
use stategraph_conformance::cache::CacheFixture;
use stategraph_sqlite::SqliteCache;

async fn make() -> CacheFixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("cache.sqlite").display());
    CacheFixture::new(SqliteCache::connect(&url).await.unwrap()).with_guard(dir)
}

stategraph_conformance::cache_conformance!(make);

/// The table is Python's: namespace labels joined by `,`, Unix-seconds expiry, the
/// serializer's tag and bytes; and it shares a file (and its writer) with the saver.
#[tokio::test]
async fn rows_use_langgraphs_table_next_to_the_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let db =
        stategraph_sqlite::SqliteDatabase::from_url(&format!("sqlite:{}", path.display())).unwrap();
    let _saver = db.saver().connect().await.unwrap();
    let cache = db.cache().await.unwrap();
    let key = CacheKey::new(["__pregel_ns_writes", "app.node", "node"], "abc");
    cache
        .set(vec![CacheEntry::new(
            key,
            stategraph_checkpoint::value!([["x", 1]]),
            Some(std::time::Duration::from_secs(30)),
        )])
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (ns, key, expiry, encoding): (String, String, f64, String) = conn
        .query_row("SELECT ns, key, expiry, encoding FROM cache", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    assert_eq!(ns, "__pregel_ns_writes,app.node,node");
    assert_eq!(key, "abc");
    assert_eq!(encoding, "msgpack");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now && expiry <= now + 30.5, "{expiry} vs {now}");
}
