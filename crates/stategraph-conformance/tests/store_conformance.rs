//! The shared store conformance suite on [`InMemoryStore`].

use stategraph_conformance::store::{StoreFixture, StoreOptions};
use stategraph_store::InMemoryStore;

async fn make(options: StoreOptions) -> StoreFixture {
    StoreFixture::new(InMemoryStore::from_options(options))
}

stategraph_conformance::store_conformance!(make);
