//! The store's connections: one writer, opened on first use, and a pool of readers, each
//! with the store's SQL functions registered.

use std::fmt;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use serde_json::{Map, Value as Json};
use stategraph_checkpoint::BoxError;
use stategraph_checkpoint::store::{StoreError, filter};

use super::vec::register_sqlite_vec;
use crate::config::{Location, SqliteConfig};
use crate::error::BACKEND;

/// The SQL function `sg_store_filter(value, filter_json)`: whether a stored value matches.
pub(super) const FILTER_FN: &str = "sg_store_filter";

/// The collation that orders `prefix` label by label, as namespaces (`Vec<String>`) order.
pub(super) const NAMESPACE_COLLATION: &str = "sg_namespace";

/// A rusqlite error and what we were doing.
#[derive(Debug)]
struct DbError {
    doing: &'static str,
    source: rusqlite::Error,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.doing, self.source)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Wraps a rusqlite error with what we were doing.
pub(super) fn db(doing: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |source| StoreError::backend(BACKEND, DbError { doing, source })
}

/// The connections.
pub(super) struct Db {
    /// The writer, opened on first use (opening it puts a database file in WAL mode).
    writer: Mutex<Option<Connection>>,
    /// Idle reader connections; empty and unused for in-memory databases.
    readers: Mutex<Vec<Connection>>,
    pub(super) config: SqliteConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A connection stays consistent even if a panic happened while it was held: SQLite rolls
    // back any open transaction when its handle is next used.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    /// No connection yet.
    pub(super) fn new(config: SqliteConfig) -> Self {
        Self {
            writer: Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            config,
        }
    }

    /// Runs `f` on the writer connection, opening it first if needed.
    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut writer = lock(&self.writer);
        let conn = match &mut *writer {
            Some(conn) => conn,
            slot @ None => slot.insert(open_connection(&self.config, false)?),
        };
        f(conn)
    }

    /// Runs `f` on a reader connection (the writer for in-memory databases).
    pub(super) fn read<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.config.location == Location::Memory {
            return self.write(f);
        }
        let pooled = lock(&self.readers).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.config, true)?,
        };
        let out = f(&mut conn);
        let mut idle = lock(&self.readers);
        if idle.len() < self.config.max_readers {
            idle.push(conn);
        }
        out
    }
}

pub(super) fn open_connection(
    config: &SqliteConfig,
    read_only: bool,
) -> Result<Connection, StoreError> {
    let conn =
        crate::config::open_connection(config, read_only).map_err(|(doing, e)| db(doing)(e))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(db("enabling foreign keys"))?;
    register_sqlite_vec(&conn)?;
    conn.create_collation(NAMESPACE_COLLATION, |a: &str, b: &str| {
        a.split('.').cmp(b.split('.'))
    })
    .map_err(db("registering the namespace collation"))?;
    conn.create_scalar_function(
        FILTER_FN,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        filter_fn,
    )
    .map_err(db("registering the filter function"))?;
    Ok(conn)
}

/// `sg_store_filter(value, filter_json)`: the shared filter semantics, as an SQL function.
/// The filter is parsed once per statement (SQLite keeps it as the argument's auxiliary data).
/// A value that is not a JSON object is let through, so that reading the row reports it as
/// corrupt instead of a filter silently hiding it.
fn filter_fn(ctx: &Context<'_>) -> rusqlite::Result<bool> {
    let conditions = ctx.get_or_create_aux(1, |v: ValueRef<'_>| -> Result<_, BoxError> {
        let map: Map<String, Json> = serde_json::from_str(v.as_str()?)?;
        Ok(filter::parse_filter(&map)?)
    })?;
    let value = match ctx.get_raw(0) {
        ValueRef::Text(b) | ValueRef::Blob(b) => serde_json::from_slice::<Json>(b).ok(),
        _ => None,
    };
    Ok(match value {
        Some(v) if v.is_object() => filter::matches(&v, &conditions),
        _ => true,
    })
}
