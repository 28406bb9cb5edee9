//! The shared conformance suite against `InMemorySaver`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use stategraph_checkpoint::InMemorySaver;
use stategraph_conformance::Fixture;

async fn fixture() -> Fixture {
    Fixture::new(InMemorySaver::new())
}

stategraph_conformance::checkpointer_conformance!(fixture);
