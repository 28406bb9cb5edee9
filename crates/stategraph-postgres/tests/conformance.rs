//! The shared conformance suite against `PostgresSaver`, each case in a fresh schema of the
//! database `STATEGRAPH_TEST_POSTGRES_URL` names (default: the local test server). A server
//! that cannot be reached fails the tests, naming the URL.

use stategraph_testkit::postgres::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);

/// The same suite with every statement sent with its text (what runs behind a pooler that
/// cannot carry prepared statements).
mod unprepared {
    use stategraph_conformance::Fixture;

    async fn fixture() -> Fixture {
        stategraph_testkit::postgres::fixture_with(|config| config.prepared_statements(false)).await
    }

    stategraph_conformance::checkpointer_conformance!(fixture);
}
