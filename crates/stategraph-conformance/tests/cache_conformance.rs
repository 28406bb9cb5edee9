//! The in-memory node cache against the shared cache conformance suite.

use stategraph_checkpoint::cache::InMemoryCache;
use stategraph_conformance::cache::CacheFixture;

async fn make() -> CacheFixture {
    CacheFixture::new(InMemoryCache::new())
}

stategraph_conformance::cache_conformance!(make);
