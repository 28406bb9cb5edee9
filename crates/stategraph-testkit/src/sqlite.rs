//! SQLite (feature `sqlite`): database files in a temporary directory removed with their
//! guard, savers on them, and the conformance fixtures with the [`Rows`] corruptor.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed set-up or edit fails the test"
)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use stategraph_conformance::{Corruptor, Fixture, RawPart};
use stategraph_sqlite::{SqliteConfig, SqliteSaver};

/// A database file (not created) in a temporary directory of its own, removed with the
/// guard.
#[derive(Debug)]
pub struct ScratchFile {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl ScratchFile {
    /// `file_name` in a fresh temporary directory.
    pub fn new(file_name: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join(file_name);
        Self { dir, path }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary directory holding it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The file as a `sqlite:` URL.
    pub fn url(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
}

/// A saver on a fresh [`ScratchFile`].
pub async fn saver() -> (SqliteSaver, ScratchFile) {
    let file = ScratchFile::new("checkpoints.sqlite");
    let saver = SqliteConfig::file(file.path())
        .connect()
        .await
        .expect("open sqlite");
    (saver, file)
}

/// The conformance suite's fixture: a saver on a fresh file, [`Rows`] of it, and the file's
/// guard.
pub async fn fixture() -> Fixture {
    let (saver, file) = saver().await;
    let rows = Rows::open(file.path());
    Fixture::new(saver).with_corruptor(rows).with_guard(file)
}

/// The conformance suite's fixture on a private in-memory database, which no corruptor can
/// reach ([`fixture`] runs the same code with its rows damaged).
pub async fn in_memory_fixture() -> Fixture {
    let saver = SqliteConfig::memory().connect().await.expect("open sqlite");
    Fixture::new(saver).without_corruptor(
        "a private in-memory database cannot be opened twice; the file fixture runs the \
         same code with its rows damaged",
    )
}

/// Edits the checkpoint rows of a database file through a connection of its own (the
/// conformance suite's [`Corruptor`]).
#[derive(Debug)]
pub struct Rows(Mutex<rusqlite::Connection>);

impl Rows {
    /// Rows of the database at `path`.
    pub fn open(path: &Path) -> Self {
        let conn = rusqlite::Connection::open(path).expect("a second connection");
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        Self(Mutex::new(conn))
    }
}

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
