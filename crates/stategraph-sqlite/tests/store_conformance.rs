//! The shared store conformance suite against `SqliteStore`, on a fresh database file per case
//! (and once more on an in-memory database).

#![allow(clippy::expect_used)]

use stategraph_checkpoint::conformance::store::{StoreFixture, StoreOptions};
use stategraph_sqlite::SqliteStore;

fn configure(store: SqliteStore, options: StoreOptions) -> SqliteStore {
    let store = store.with_ttl(options.ttl);
    match options.index {
        Some(index) => store.with_index(index).expect("index config"),
        None => store,
    }
}

async fn make(options: StoreOptions) -> StoreFixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = SqliteStore::open(dir.path().join("store.sqlite")).expect("open sqlite");
    StoreFixture::new(configure(store, options)).with_guard(dir)
}

stategraph_checkpoint::store_conformance!(make);

mod in_memory {
    use super::*;

    async fn make_memory(options: StoreOptions) -> StoreFixture {
        let store = SqliteStore::in_memory().expect("open sqlite");
        StoreFixture::new(configure(store, options))
    }

    stategraph_checkpoint::store_conformance!(make_memory);
}
