//! The shared conformance suite against `SqliteSaver`, on a fresh database file per case
//! (and once more on an in-memory database).

use stategraph_testkit::sqlite::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);

mod in_memory {
    use stategraph_testkit::sqlite::in_memory_fixture;

    stategraph_conformance::checkpointer_conformance!(in_memory_fixture);
}
