//! The shared node cache conformance suite against `RedisCache`, each case under a key prefix
//! of its own on the server `STATEGRAPH_TEST_REDIS_URL` names (default: the local Redis). A
//! server that cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::cache::{Cache, CacheEntry, CacheKey};
use stategraph_conformance::cache::CacheFixture;
use stategraph_redis::RedisCache;
use stategraph_testkit::redis::{ScratchPrefix, url};

async fn make() -> CacheFixture {
    let prefix = ScratchPrefix::new("sg_cache");
    let cache = RedisCache::connect(&url())
        .await
        .unwrap_or_else(|e| panic!("Redis at {} is required for these tests: {e}", url()))
        .prefix(format!("{}:", prefix.name()));
    CacheFixture::new(cache).with_guard(prefix)
}

stategraph_conformance::cache_conformance!(make);

/// Entries are where LangGraph's `RedisCache` puts them: `{prefix}{ns}:{key}` holding
/// `msgpack:{bytes}`, with Redis's own expiry.
#[tokio::test]
async fn entries_use_langgraphs_keys_and_values() {
    let prefix = ScratchPrefix::new("sg_cache_layout");
    let cache = RedisCache::connect(&url())
        .await
        .unwrap()
        .prefix(format!("{}:", prefix.name()));
    let key = CacheKey::new(["__pregel_ns_writes", "app.node", "node"], "abc");
    cache
        .set(vec![CacheEntry::new(
            key,
            stategraph_checkpoint::value!([["x", 1]]),
            Some(std::time::Duration::from_secs(30)),
        )])
        .await
        .unwrap();
    let client = redis::Client::open(url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let redis_key = format!("{}:__pregel_ns_writes:app.node:node:abc", prefix.name());
    let raw: Vec<u8> = redis::cmd("GET")
        .arg(&redis_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(raw.starts_with(b"msgpack:"), "{raw:?}");
    let ttl: i64 = redis::cmd("TTL")
        .arg(&redis_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=30).contains(&ttl), "{ttl}");
}
