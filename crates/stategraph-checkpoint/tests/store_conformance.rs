//! The shared store conformance suite on [`InMemoryStore`].

use stategraph_checkpoint::conformance::store::{StoreFixture, StoreOptions};
use stategraph_checkpoint::store::InMemoryStore;

async fn make(options: StoreOptions) -> StoreFixture {
    StoreFixture::new(InMemoryStore::from_options(options))
}

stategraph_checkpoint::store_conformance!(make);
