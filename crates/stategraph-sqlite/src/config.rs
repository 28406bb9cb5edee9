//! Opening a SQLite saver: path or URL, durability and connection settings.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer};

use crate::database::SqliteDatabase;
use crate::saver::SqliteSaver;

/// SQLite's `synchronous` setting: how often the database waits for the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Never wait: fastest, may lose recent commits (never corrupts) on power loss or OS crash.
    Off,
    /// With WAL, wait only at WAL checkpoints: a process crash loses nothing; a power loss
    /// may lose the last commits.
    Normal,
    /// Wait on every commit (SQLite's and Python's default): nothing committed is ever lost.
    #[default]
    Full,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Off => "OFF",
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// How many bytes of the database file read connections map into memory by default
/// ([`SqliteConfig::mmap_size`]): 256 MiB.
pub const DEFAULT_MMAP_SIZE: u64 = 256 * 1024 * 1024;

/// Where the database lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    File(PathBuf),
    Memory,
}

/// Builds a [`SqliteSaver`]: where the database is, durability and connection settings, the
/// serializer; [`connect`](Self::connect) opens it.
///
/// ```
/// use std::time::Duration;
/// use stategraph_sqlite::{SqliteConfig, Synchronous};
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite:{}", dir.path().join("threads.sqlite").display());
/// let saver = SqliteConfig::from_url(&url)? // e.g. "sqlite:threads.sqlite"
///     .synchronous(Synchronous::Normal)
///     .busy_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # let _ = saver;
/// # Ok::<(), stategraph_checkpoint::Error>(()) }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct SqliteConfig {
    pub(crate) location: Location,
    pub(crate) synchronous: Synchronous,
    pub(crate) max_readers: usize,
    pub(crate) busy_timeout: std::time::Duration,
    /// `PRAGMA mmap_size` of read connections.
    pub(crate) mmap_size: u64,
    pub(crate) serializer: Arc<dyn Serializer>,
    /// Whether opening may create the file and tables and switch the file to WAL.
    pub(crate) run_setup: bool,
    /// The database handle this configuration was made from ([`SqliteDatabase::saver`]):
    /// its writer and connection settings are used instead of opening a database of its own.
    pub(crate) database: Option<SqliteDatabase>,
}

impl SqliteConfig {
    /// A database file at `path` (created if missing, unless
    /// [`without_setup`](Self::without_setup)); for paths a URL cannot spell.
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self::with_location(Location::File(path.as_ref().to_path_buf()))
    }

    /// A private in-memory database.
    pub fn memory() -> Self {
        Self::with_location(Location::Memory)
    }

    fn with_location(location: Location) -> Self {
        Self {
            location,
            synchronous: Synchronous::default(),
            max_readers: 4,
            busy_timeout: std::time::Duration::from_secs(5),
            mmap_size: DEFAULT_MMAP_SIZE,
            serializer: Arc::new(JsonPlusSerializer::new()),
            run_setup: true,
            database: None,
        }
    }

    /// Opens without creating or changing anything: the file and the checkpoint tables must
    /// exist (a missing file or missing tables are an `Error::NotFound` naming them), no
    /// table is created or upgraded, and the file's journal mode is left as it is (for tools
    /// that only read).
    pub fn without_setup(mut self) -> Self {
        self.run_setup = false;
        self
    }

    /// Parses a database URL: `sqlite:PATH`, `sqlite://PATH` (`sqlite:///abs/path` for an
    /// absolute path) or `sqlite::memory:`. Optional query parameters:
    /// `synchronous=off|normal|full` sets [`Synchronous`], `mmap_size=BYTES`
    /// [`mmap_size`](Self::mmap_size) (`0` turns memory-mapped reads off).
    pub fn from_url(url: &str) -> Result<Self> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| {
                Error::invalid(
                    "database URL",
                    format!("`{url}` is not a sqlite URL (expected sqlite:PATH or sqlite://PATH)"),
                )
            })?;
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        if path.is_empty() {
            return Err(Error::invalid(
                "database URL",
                format!("`{url}` has no path"),
            ));
        }
        let mut config = if path == ":memory:" {
            Self::memory()
        } else {
            Self::file(path)
        };
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("synchronous", v)) => {
                    config.synchronous = match v.to_ascii_lowercase().as_str() {
                        "off" => Synchronous::Off,
                        "normal" => Synchronous::Normal,
                        "full" => Synchronous::Full,
                        other => {
                            return Err(Error::invalid(
                                "database URL",
                                format!("synchronous={other} (expected off, normal or full)"),
                            ));
                        }
                    };
                }
                Some(("mmap_size", v)) => {
                    config.mmap_size = v.parse().map_err(|_| {
                        Error::invalid(
                            "database URL",
                            format!("mmap_size={v} (expected a number of bytes, 0 for none)"),
                        )
                    })?;
                }
                _ => {
                    return Err(Error::invalid(
                        "database URL",
                        format!(
                            "unknown parameter `{pair}` in `{url}` (known: synchronous, mmap_size)"
                        ),
                    ));
                }
            }
        }
        Ok(config)
    }

    /// The database file; `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        match &self.location {
            Location::File(p) => Some(p),
            Location::Memory => None,
        }
    }

    /// Sets the `synchronous` level (default [`Synchronous::Full`]).
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.synchronous = level;
        self
    }

    /// How many read connections may be kept open (default 4; at least 1).
    pub fn max_readers(mut self, n: usize) -> Self {
        self.max_readers = n.max(1);
        self
    }

    /// How many bytes of the database file each read connection maps into memory (SQLite's
    /// `PRAGMA mmap_size`; default [`DEFAULT_MMAP_SIZE`], 256 MiB; `0`: none). Mapped pages
    /// are read where the operating system caches them, without a system call and a copy
    /// per page: a listing of a long thread reads tens of megabytes. Past the size, and on
    /// the writer, pages are read as usual. The cost SQLite documents: an I/O error while
    /// reading a mapped page (a failing disk, the file truncated under the process) stops
    /// the process with a signal instead of failing the read; where the storage can fail
    /// that way, set `0`. The file itself is the same either way.
    pub fn mmap_size(mut self, bytes: u64) -> Self {
        self.mmap_size = bytes;
        self
    }

    /// How long to wait for another process's lock before failing (default 5 s).
    pub fn busy_timeout(mut self, wait: std::time::Duration) -> Self {
        self.busy_timeout = wait;
        self
    }

    /// The serializer for checkpoints and writes (default [`JsonPlusSerializer`]).
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// The database of these connection settings, opened once, to build the saver, the
    /// store and the run queue of one database from ([`SqliteDatabase`]); nothing is read or
    /// created until the first of them connects. A configuration already made from a
    /// database ([`SqliteDatabase::saver`]) opens that one.
    pub fn open(self) -> SqliteDatabase {
        match self.database {
            Some(db) => db,
            None => SqliteDatabase::new(self),
        }
    }

    /// Opens the database (on tokio's blocking pool, as every database call of the saver
    /// runs) and, unless [`without_setup`](Self::without_setup), creates the file and
    /// LangGraph's tables if they are missing and upgrades files written by older versions.
    pub async fn connect(self) -> Result<SqliteSaver> {
        tokio::task::spawn_blocking(move || SqliteSaver::open_with(self))
            .await
            .map_err(crate::error::join)?
    }
}

/// Opens a connection as `config` says (WAL for file writers, busy timeout, `synchronous`),
/// shared by the saver and the store. On failure, says what it was doing.
pub(crate) fn open_connection(
    config: &SqliteConfig,
    read_only: bool,
) -> std::result::Result<rusqlite::Connection, (&'static str, rusqlite::Error)> {
    use rusqlite::{Connection, OpenFlags};
    let conn = match &config.location {
        Location::Memory => Connection::open_in_memory(),
        Location::File(path) => {
            let flags = if read_only {
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
            } else if config.run_setup {
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
            } else {
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
            };
            Connection::open_with_flags(path, flags)
        }
    }
    .map_err(|e| ("opening the database", e))?;
    conn.busy_timeout(config.busy_timeout)
        .map_err(|e| ("setting busy_timeout", e))?;
    // The bundled SQLite is built with STAT4, whose planner looks at the values bound to a
    // statement: a cached statement whose plan could depend on them (the newest checkpoint of
    // a thread, `ORDER BY … LIMIT 1` / `max()` over the primary key) was compiled again on
    // every run with a new thread id — a tenth of the server's CPU under load. The query
    // planner stability guarantee keeps each statement's plan as first compiled.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| ("keeping query plans stable", e))?;
    if !read_only && config.run_setup && config.location != Location::Memory {
        // Switching a file to WAL takes its lock without SQLite's busy handler: processes
        // opening one new file at once take turns here. A switch that could not happen
        // reports the mode left, which is tried again too.
        retry_busy(config.busy_timeout, || {
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            if mode.eq_ignore_ascii_case("wal") {
                Ok(())
            } else {
                Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some(format!("the journal mode stayed `{mode}`")),
                ))
            }
        })
        .map_err(|e| ("enabling WAL", e))?;
    }
    conn.pragma_update(None, "synchronous", config.synchronous.pragma())
        .map_err(|e| ("setting synchronous", e))?;
    if read_only && config.location != Location::Memory {
        let bytes = i64::try_from(config.mmap_size).unwrap_or(i64::MAX);
        conn.pragma_update(None, "mmap_size", bytes)
            .map_err(|e| ("setting mmap_size", e))?;
    }
    Ok(conn)
}

/// Runs `f` until it does not fail with `SQLITE_BUSY` / `SQLITE_LOCKED` or `timeout` has
/// passed, pausing 1, 2, 4… up to 50 ms between tries: for the steps SQLite's busy handler
/// does not wait through (switching a file to WAL, a transaction whose snapshot another
/// process's schema change made stale), which processes opening one file at once meet.
/// `f` must be safe to run again (setup steps re-check what is done).
pub(crate) fn retry_busy<T>(
    timeout: Duration,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(e)
                if matches!(e.sqlite_error_code(), Some(DatabaseBusy | DatabaseLocked))
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

impl stategraph_checkpoint::backend::SaverConfig for SqliteConfig {
    type Saver = SqliteSaver;

    fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        SqliteConfig::from_url(url)
    }

    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self {
        SqliteConfig::serializer(self, serializer)
    }

    fn without_setup(self) -> Self {
        SqliteConfig::without_setup(self)
    }

    async fn connect(self) -> stategraph_checkpoint::Result<SqliteSaver> {
        SqliteConfig::connect(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let c = SqliteConfig::from_url("sqlite:data/x.db").unwrap();
        assert_eq!(c.location, Location::File("data/x.db".into()));
        let c = SqliteConfig::from_url("sqlite:///tmp/x.db?synchronous=normal").unwrap();
        assert_eq!(c.location, Location::File("/tmp/x.db".into()));
        assert_eq!(c.synchronous, Synchronous::Normal);
        let c = SqliteConfig::from_url("sqlite::memory:").unwrap();
        assert_eq!(c.location, Location::Memory);
        assert!(matches!(
            SqliteConfig::from_url("postgres://x").unwrap_err(),
            Error::InvalidInput { .. }
        ));
        assert!(SqliteConfig::from_url("sqlite:x.db?cache=shared").is_err());
        let c = SqliteConfig::from_url("sqlite:x.db?mmap_size=0&synchronous=full").unwrap();
        assert_eq!(c.mmap_size, 0);
        assert_eq!(
            SqliteConfig::from_url("sqlite:x.db").unwrap().mmap_size,
            DEFAULT_MMAP_SIZE
        );
        let e = SqliteConfig::from_url("sqlite:x.db?mmap_size=lots").unwrap_err();
        assert!(e.to_string().contains("mmap_size=lots"), "{e}");
    }

    /// `PRAGMA mmap_size` of a connection `config` opens.
    fn mapped(config: &SqliteConfig, read_only: bool) -> i64 {
        open_connection(config, read_only)
            .unwrap()
            .query_row("PRAGMA mmap_size", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn read_connections_map_the_file_unless_told_not_to() {
        let dir = tempfile::tempdir().unwrap();
        let config = SqliteConfig::file(dir.path().join("m.sqlite"));
        // The writer creates the file; it reads as usual.
        assert_eq!(mapped(&config, false), 0);
        assert_eq!(mapped(&config, true), 256 * 1024 * 1024);
        assert_eq!(mapped(&config.clone().mmap_size(1 << 20), true), 1 << 20);
        assert_eq!(mapped(&config.mmap_size(0), true), 0);
    }

    proptest::proptest! {
        #[test]
        fn from_url_never_panics(url in proptest::arbitrary::any::<String>()) {
            let _ = SqliteConfig::from_url(&url);
        }

        #[test]
        fn from_url_near_the_format_never_panics(
            url in "sqlite:(//)?/?[a-z./:é€]{0,12}(\\?([a-zé=&]|synchronous=|off|normal|FULL){0,6})?",
        ) {
            let _ = SqliteConfig::from_url(&url);
        }
    }
}
