//! The store's connections: one writer, opened on first use, and a pool of readers, each
//! with the store's SQL functions registered.

use std::fmt;

use rusqlite::Connection;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use serde_json::{Map, Value as Json};
use stategraph_checkpoint::BoxError;
use stategraph_store::{StoreError, filter};

use super::vec::register_sqlite_vec;
use crate::config::SqliteConfig;
use crate::error::BACKEND;
use crate::pool::{OpenError, Pool};

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

impl From<OpenError> for StoreError {
    fn from(e: OpenError) -> Self {
        StoreError::backend(BACKEND, e)
    }
}

/// The store's connections: the SQLite crate's shared [`Pool`], each connection prepared with
/// the store's SQL functions.
pub(super) fn pool(config: SqliteConfig) -> Pool {
    Pool::new(config, prepare)
}

/// Registers what the store's SQL uses: foreign keys, sqlite-vec, the namespace collation and
/// the filter function.
fn prepare(conn: &Connection) -> Result<(), OpenError> {
    let at = OpenError::at;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(at("enabling foreign keys"))?;
    register_sqlite_vec(conn).map_err(|e| OpenError {
        doing: "loading sqlite-vec",
        source: e.into(),
    })?;
    conn.create_collation(NAMESPACE_COLLATION, |a: &str, b: &str| {
        a.split('.').cmp(b.split('.'))
    })
    .map_err(at("registering the namespace collation"))?;
    conn.create_scalar_function(
        FILTER_FN,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        filter_fn,
    )
    .map_err(at("registering the filter function"))?;
    Ok(())
}

/// One connection prepared as the store's are (for tests of the SQL functions).
#[cfg(test)]
pub(super) fn open_connection(
    config: &SqliteConfig,
    read_only: bool,
) -> Result<Connection, StoreError> {
    let conn = crate::config::open_connection(config, read_only)
        .map_err(|(doing, source)| OpenError::at(doing)(source))?;
    prepare(&conn)?;
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
