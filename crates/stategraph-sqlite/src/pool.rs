//! The connections of one SQLite database, shared by the saver and the store: one writer
//! (SQLite allows one at a time), opened when first needed, and a small pool of readers (WAL
//! lets them read while the writer writes). An in-memory database has only the writer.

use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;
use stategraph_checkpoint::BoxError;

use crate::config::{Location, SqliteConfig};
use crate::error::BACKEND;

/// Opening or preparing a connection failed: what was being done, and the cause.
#[derive(Debug)]
pub(crate) struct OpenError {
    pub(crate) doing: &'static str,
    pub(crate) source: BoxError,
}

impl OpenError {
    /// `doing` failed with a driver error.
    pub(crate) fn at(doing: &'static str) -> impl Fn(rusqlite::Error) -> Self {
        move |source| Self {
            doing,
            source: source.into(),
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.doing, self.source)
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl From<OpenError> for stategraph_checkpoint::Error {
    fn from(e: OpenError) -> Self {
        stategraph_checkpoint::Error::Backend {
            backend: BACKEND,
            message: e.doing.to_owned(),
            source: Some(e.source),
        }
    }
}

/// What a user of the pool sets up on every connection it opens (SQL functions, pragmas).
pub(crate) type Prepare = fn(&Connection) -> Result<(), OpenError>;

/// The connections.
pub(crate) struct Pool {
    /// The writer, opened on first use (opening it puts a database file in WAL mode, unless
    /// the configuration opens without setup).
    writer: Mutex<Option<Connection>>,
    /// Idle reader connections; empty and unused for in-memory databases.
    readers: Mutex<Vec<Connection>>,
    config: SqliteConfig,
    prepare: Prepare,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A connection stays consistent even if a panic happened while it was held: SQLite rolls
    // back any open transaction when its handle is next used.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// No connection yet; every connection opened gets `prepare` run on it.
    pub(crate) fn new(config: SqliteConfig, prepare: Prepare) -> Self {
        Self {
            writer: Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            config,
            prepare,
        }
    }

    /// The configuration the connections are opened with.
    pub(crate) fn config(&self) -> &SqliteConfig {
        &self.config
    }

    fn open(&self, read_only: bool) -> Result<Connection, OpenError> {
        let conn = crate::config::open_connection(&self.config, read_only)
            .map_err(|(doing, source)| OpenError::at(doing)(source))?;
        (self.prepare)(&conn)?;
        Ok(conn)
    }

    /// Runs `f` on the writer connection, opening it first if needed.
    pub(crate) fn write<T, E: From<OpenError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut writer = lock(&self.writer);
        let conn = match &mut *writer {
            Some(conn) => conn,
            slot @ None => slot.insert(self.open(false)?),
        };
        f(conn)
    }

    /// Runs `f` on a reader connection (the writer for in-memory databases).
    pub(crate) fn read<T, E: From<OpenError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        if self.config.location == Location::Memory {
            return self.write(f);
        }
        let pooled = lock(&self.readers).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.open(true)?,
        };
        let out = f(&mut conn);
        let mut idle = lock(&self.readers);
        if idle.len() < self.config.max_readers {
            idle.push(conn);
        }
        out
    }
}
