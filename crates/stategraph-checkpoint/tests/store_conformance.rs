//! The shared store conformance suite on [`InMemoryStore`].

use stategraph_checkpoint::conformance::store::{StoreFixture, StoreOptions};
use stategraph_checkpoint::store::InMemoryStore;

async fn make(options: StoreOptions) -> StoreFixture {
    let mut store = InMemoryStore::new().with_ttl(options.ttl);
    if let Some(index) = options.index {
        store = store.with_index(index);
    }
    StoreFixture::new(store)
}

stategraph_checkpoint::store_conformance!(make);
