//! Runs as records: the columns of a [`RunRow`] and their decoding (shared by every
//! statement that returns runs), listing, reading, counting and deleting them.

use rusqlite::types::{Type, Value as Sql};
use rusqlite::{OptionalExtension, Row, params};
use serde_json::Value as Json;
use stategraph_runs::{CancelAction, Multitask, Object, QueueStats, RunQuery, RunRow, RunStatus};

use super::*;
use crate::error::db;

/// The columns of a [`RunRow`], in the order [`run_row`] reads them.
pub(super) const COLUMNS: &str = "run_id, thread_id, assistant_id, status, metadata, kwargs, \
    multitask, temporary, created_at, updated_at, seq, attempt, max_attempts, worker, \
    lease_until, cancel, cancel_reason, events, error, output";

/// A stored value that does not decode: a conversion error of column `idx`.
fn corrupt(idx: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, what.into())
}

/// Column `idx`, a name `parse` knows.
fn named<T>(r: &Row<'_>, idx: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let name: String = r.get(idx)?;
    parse(&name).ok_or_else(|| corrupt(idx, format!("unknown name `{name}`")))
}

/// Column `idx`, JSON text.
pub(super) fn json(r: &Row<'_>, idx: usize) -> rusqlite::Result<Json> {
    let text: String = r.get(idx)?;
    serde_json::from_str(&text).map_err(|e| corrupt(idx, format!("invalid JSON: {e}")))
}

/// Column `idx`, JSON text or NULL.
fn optional_json(r: &Row<'_>, idx: usize) -> rusqlite::Result<Option<Json>> {
    match r.get_ref(idx)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => json(r, idx).map(Some),
    }
}

/// Column `idx`, a JSON object.
fn object(r: &Row<'_>, idx: usize) -> rusqlite::Result<Object> {
    match json(r, idx)? {
        Json::Object(map) => Ok(map),
        other => Err(corrupt(idx, format!("not a JSON object: {other}"))),
    }
}

/// A run from a row of [`COLUMNS`].
pub(super) fn run_row(r: &Row<'_>) -> rusqlite::Result<RunRow> {
    let mut run = RunRow::new(r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(10)?);
    run.assistant_id = r.get(2)?;
    run.status = named(r, 3, RunStatus::parse)?;
    run.metadata = object(r, 4)?;
    run.kwargs = object(r, 5)?;
    run.multitask = named(r, 6, Multitask::parse)?;
    run.temporary = r.get(7)?;
    run.created_at = time(r.get(8)?);
    run.updated_at = time(r.get(9)?);
    run.attempt = r.get(11)?;
    run.max_attempts = r.get(12)?;
    run.worker = r.get(13)?;
    run.lease_until = r.get::<_, Option<i64>>(14)?.map(time);
    run.cancel = match r.get_ref(15)? {
        rusqlite::types::ValueRef::Null => None,
        _ => Some(named(r, 15, CancelAction::parse)?),
    };
    run.cancel_reason = r.get(16)?;
    run.events = r.get(17)?;
    run.error = optional_json(r, 18)?;
    run.output = optional_json(r, 19)?;
    Ok(run)
}

/// The runs `query` asks for, filtered, ordered and paged in SQL.
pub(super) fn list(conn: &Connection, query: &RunQuery) -> Result<Vec<RunRow>> {
    let mut sql = format!("SELECT {COLUMNS} FROM stategraph_runs WHERE TRUE");
    let mut args: Vec<Sql> = Vec::new();
    if let Some(thread) = &query.thread_id {
        sql.push_str(" AND thread_id = ?");
        args.push(Sql::Text(thread.clone()));
    }
    if let Some(ids) = &query.run_ids {
        sql.push_str(" AND run_id IN (SELECT value FROM json_each(?))");
        args.push(Sql::Text(Json::from(ids.clone()).to_string()));
    }
    if !query.statuses.is_empty() {
        sql.push_str(" AND status IN (SELECT value FROM json_each(?))");
        let names: Vec<&str> = query.statuses.iter().map(|s| s.as_str()).collect();
        args.push(Sql::Text(Json::from(names).to_string()));
    }
    sql.push_str(match query.oldest_first {
        true => " ORDER BY created_at, seq LIMIT ? OFFSET ?",
        false => " ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?",
    });
    let limit = query
        .limit
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    args.push(Sql::Integer(limit));
    args.push(Sql::Integer(
        i64::try_from(query.offset).unwrap_or(i64::MAX),
    ));
    let listing = db("listing runs");
    let mut stmt = conn.prepare_cached(&sql).map_err(&listing)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), run_row)
        .map_err(&listing)?;
    rows.collect::<rusqlite::Result<_>>().map_err(listing)
}

/// Run `run_id`, if any.
pub(super) fn get(conn: &Connection, run_id: &str) -> Result<Option<RunRow>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM stategraph_runs WHERE run_id = ?1"
    ))
    .and_then(|mut s| s.query_row([run_id], run_row).optional())
    .map_err(db("reading a run"))
}

/// How many runs are pending and running, and the oldest pending one's `created_at`.
pub(super) fn stats(conn: &Connection) -> Result<QueueStats> {
    let (pending, running, oldest): (i64, i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT (SELECT count(*) FROM stategraph_runs INDEXED BY stategraph_runs_pending \
                 WHERE status = 'pending'), \
               (SELECT count(*) FROM stategraph_runs INDEXED BY stategraph_runs_running \
                 WHERE status = 'running'), \
               (SELECT min(created_at) FROM stategraph_runs INDEXED BY stategraph_runs_pending \
                 WHERE status = 'pending')",
        )
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .map_err(db("counting runs"))?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(QueueStats::new(
        count(pending),
        count(running),
        oldest.map(time),
    ))
}

impl Change<'_> {
    /// Deletes run `run_id` (with its events) unless it is running: how many it deleted.
    pub(super) fn delete_run(&mut self, run_id: &str) -> Result<u64> {
        let deleted = self
            .conn
            .prepare_cached("DELETE FROM stategraph_runs WHERE run_id = ?1 AND status <> 'running'")
            .and_then(|mut s| s.execute(params![run_id]))
            .map_err(db("deleting a run"))?;
        Ok(deleted as u64)
    }
}
