//! The shared store conformance suite against `SqliteStore`, on a fresh database file per case
//! (and once more on an in-memory database).

#![allow(clippy::expect_used)]

use stategraph_conformance::store::{StoreFixture, StoreOptions};
use stategraph_sqlite::{SqliteStore, SqliteStoreConfig};

async fn connect(config: SqliteStoreConfig, options: StoreOptions) -> SqliteStore {
    let mut config = config.ttl(options.ttl);
    if let Some(index) = options.index {
        config = config.index(index);
    }
    config.connect().await.expect("open sqlite")
}

async fn make(options: StoreOptions) -> StoreFixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = SqliteStoreConfig::file(dir.path().join("store.sqlite"));
    StoreFixture::new(connect(config, options).await).with_guard(dir)
}

stategraph_conformance::store_conformance!(make);

mod in_memory {
    use super::*;

    async fn make_memory(options: StoreOptions) -> StoreFixture {
        StoreFixture::new(connect(SqliteStoreConfig::memory(), options).await)
    }

    stategraph_conformance::store_conformance!(make_memory);
}
