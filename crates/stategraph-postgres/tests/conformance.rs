//! The shared conformance suite against `PostgresSaver`, each case in a fresh schema of the
//! database `STATEGRAPH_TEST_POSTGRES_URL` names (default: the local test server). A server
//! that cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::conformance::Fixture;
use stategraph_postgres::{PostgresConfig, PostgresSaver};

mod common;

use common::*;

async fn fresh(prepared: bool) -> (PostgresSaver, String) {
    let schema = scratch_name("sg_test");
    let saver = PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.clone())
        .pool_size(4)
        .prepared_statements(prepared)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    (saver, schema)
}

async fn fixture() -> Fixture {
    let (saver, schema) = fresh(true).await;
    Fixture::new(saver).with_guard(drop_schema(schema))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);

/// The same suite with every statement sent with its text (what runs behind a pooler that
/// cannot carry prepared statements).
mod unprepared {
    use super::*;

    async fn fixture() -> Fixture {
        let (saver, schema) = fresh(false).await;
        Fixture::new(saver).with_guard(drop_schema(schema))
    }

    stategraph_checkpoint::checkpointer_conformance!(fixture);
}
