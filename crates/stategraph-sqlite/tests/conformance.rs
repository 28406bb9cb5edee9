//! The shared conformance suite against `SqliteSaver`, on a fresh database file per case
//! (and once more on an in-memory database).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use stategraph_checkpoint::conformance::{Corruptor, Fixture, RawPart};
use stategraph_sqlite::SqliteSaver;

/// Edits rows of the database file through a connection of its own.
struct Rows(std::sync::Mutex<rusqlite::Connection>);

fn column(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

const ROW: &str = "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3";

#[async_trait::async_trait]
impl Corruptor for Rows {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let sql = format!(
            "SELECT CAST({} AS BLOB) FROM checkpoints {ROW}",
            column(part)
        );
        let conn = self.0.lock().unwrap();
        conn.query_row(&sql, [thread, ns, id], |r| r.get(0))
            .unwrap()
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let sql = format!("UPDATE checkpoints SET {} = ?4 {ROW}", column(part));
        let conn = self.0.lock().unwrap();
        let n = conn
            .execute(&sql, rusqlite::params![thread, ns, id, bytes])
            .unwrap();
        assert_eq!(n, 1, "one row rewritten");
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let sql = format!("UPDATE checkpoints SET parent_checkpoint_id = ?4 {ROW}");
        let conn = self.0.lock().unwrap();
        let n = conn.execute(&sql, [thread, ns, id, parent]).unwrap();
        assert_eq!(n, 1, "one row rewritten");
    }
}

async fn file_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("checkpoints.sqlite");
    let saver = SqliteSaver::open(&path).expect("open sqlite");
    let conn = rusqlite::Connection::open(&path).expect("a second connection");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    Fixture::new(saver)
        .with_corruptor(Rows(std::sync::Mutex::new(conn)))
        .with_guard(dir)
}

stategraph_checkpoint::checkpointer_conformance!(file_fixture);

mod in_memory {
    use super::*;

    async fn memory_fixture() -> Fixture {
        Fixture::new(SqliteSaver::in_memory().expect("open sqlite")).without_corruptor(
            "a private in-memory database cannot be opened twice; the file fixture runs the \
             same code with its rows damaged",
        )
    }

    stategraph_checkpoint::checkpointer_conformance!(memory_fixture);
}
