//! What the queue keeps of threads: `busy` while a run of the thread is pending or running,
//! else the state its last run (or state update) left.

use rusqlite::{OptionalExtension, params};
use stategraph_runs::{RunStatus, ThreadStatus};

use super::records::json;
use super::*;
use crate::error::db;

/// A [`ThreadState`] as stored: its status's name and its JSON as text.
pub(super) struct Encoded {
    status: &'static str,
    values: String,
    interrupts: String,
    error: String,
}

impl Encoded {
    pub(super) fn new(state: &ThreadState) -> Self {
        Self {
            status: state.status.as_str(),
            values: state.values.to_string(),
            interrupts: state.interrupts.to_string(),
            error: state.error.to_string(),
        }
    }
}

/// The threads of `ids` (a JSON array) the queue knows, in that order, with their live status.
pub(super) fn read(conn: &Connection, ids: &str) -> Result<Vec<ThreadRow>> {
    let reading = db("reading threads");
    let mut stmt = conn
        .prepare_cached(
            "SELECT t.value, s.status, s.state_values, s.interrupts, s.error, s.updated_at, \
               EXISTS (SELECT 1 FROM stategraph_runs r WHERE r.thread_id = t.value \
                 AND r.status IN ('pending', 'running')), \
               EXISTS (SELECT 1 FROM stategraph_runs r WHERE r.thread_id = t.value) \
             FROM json_each(?1) t LEFT JOIN stategraph_run_threads s ON s.thread_id = t.value \
             ORDER BY t.key",
        )
        .map_err(&reading)?;
    let rows = stmt
        .query_map([ids], |r| {
            let thread_id: String = r.get(0)?;
            let state = match r.get::<_, Option<String>>(1)? {
                None => None,
                Some(status) => {
                    let status = ThreadStatus::parse(&status).ok_or_else(|| {
                        rusqlite::Error::FromSqlConversionFailure(
                            1,
                            rusqlite::types::Type::Text,
                            format!("unknown thread status `{status}`").into(),
                        )
                    })?;
                    let state =
                        ThreadState::new(status, json(r, 2)?, json(r, 3)?).error(json(r, 4)?);
                    Some((state, time(r.get(5)?)))
                }
            };
            let (busy, known): (bool, bool) = (r.get(6)?, r.get(7)?);
            Ok((known || state.is_some()).then(|| ThreadRow::new(thread_id, busy, state)))
        })
        .map_err(&reading)?;
    let rows: Vec<Option<ThreadRow>> = rows.collect::<rusqlite::Result<_>>().map_err(reading)?;
    Ok(rows.into_iter().flatten().collect())
}

impl Change<'_> {
    /// The run that makes `thread_id` busy: its running run, else its oldest pending one.
    pub(super) fn busy_run(&self, thread_id: &str) -> Result<Option<(String, RunStatus)>> {
        let busy: Option<(String, String)> = self
            .conn
            .prepare_cached(
                "SELECT run_id, status FROM stategraph_runs \
                 WHERE thread_id = ?1 AND status IN ('running', 'pending') \
                 ORDER BY status = 'running' DESC, seq LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([thread_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(db("reading a thread's runs"))?;
        Ok(busy.map(|(run_id, status)| {
            let status = match status.as_str() {
                "running" => RunStatus::Running,
                _ => RunStatus::Pending,
            };
            (run_id, status)
        }))
    }

    /// Sets `thread_id`'s state to `state`.
    pub(super) fn settle(&mut self, thread_id: &str, state: &Encoded) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO stategraph_run_threads \
                 (thread_id, status, state_values, interrupts, error, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    thread_id,
                    state.status,
                    state.values,
                    state.interrupts,
                    state.error,
                    self.now
                ])
            })
            .map_err(db("storing a thread's state"))?;
        Ok(())
    }

    /// Sets `thread_id`'s state to `error` with `error`, keeping its values and interrupts.
    pub(super) fn fail_thread(&mut self, thread_id: &str, error: &Json) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO stategraph_run_threads \
                 (thread_id, status, state_values, interrupts, error, updated_at) \
                 VALUES (?1, 'error', 'null', '{}', ?2, ?3) \
                 ON CONFLICT (thread_id) DO UPDATE SET status = 'error', \
                 error = excluded.error, updated_at = excluded.updated_at",
            )
            .and_then(|mut s| s.execute(params![thread_id, error.to_string(), self.now]))
            .map_err(db("storing a thread's state"))?;
        Ok(())
    }

    /// Deletes `thread_id`'s state.
    pub(super) fn forget_thread(&mut self, thread_id: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM stategraph_run_threads WHERE thread_id = ?1")
            .and_then(|mut s| s.execute([thread_id]))
            .map_err(db("deleting a thread's state"))?;
        Ok(())
    }

    /// Sets `thread_id`'s state, unless `if_idle` and a run of it is pending or running.
    pub(super) fn set_thread(
        &mut self,
        thread_id: &str,
        state: &Encoded,
        if_idle: bool,
    ) -> Result<bool> {
        if if_idle && self.busy_run(thread_id)?.is_some() {
            return Ok(false);
        }
        self.settle(thread_id, state)?;
        Ok(true)
    }

    /// Deletes `thread_id`'s runs that are not running (with their events) and its state:
    /// how many runs it deleted.
    pub(super) fn delete_thread(&mut self, thread_id: &str) -> Result<u64> {
        let deleted = self
            .conn
            .prepare_cached(
                "DELETE FROM stategraph_runs WHERE thread_id = ?1 AND status <> 'running'",
            )
            .and_then(|mut s| s.execute([thread_id]))
            .map_err(db("deleting a thread's runs"))?;
        self.forget_thread(thread_id)?;
        Ok(deleted as u64)
    }
}
