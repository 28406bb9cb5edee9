//! The shared conformance suite against `SqliteSaver`, on a fresh database file per case
//! (and once more on an in-memory database).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use stategraph_checkpoint::conformance::Fixture;
use stategraph_sqlite::SqliteSaver;

async fn file_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let saver = SqliteSaver::open(dir.path().join("checkpoints.sqlite")).expect("open sqlite");
    Fixture::new(saver).with_guard(dir)
}

stategraph_checkpoint::checkpointer_conformance!(file_fixture);

mod in_memory {
    use super::*;

    async fn memory_fixture() -> Fixture {
        Fixture::new(SqliteSaver::in_memory().expect("open sqlite"))
    }

    stategraph_checkpoint::checkpointer_conformance!(memory_fixture);
}
