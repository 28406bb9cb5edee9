//! Enqueueing runs with their multitask strategies, and stop requests.

use std::sync::LazyLock;

use rusqlite::{OptionalExtension, params};
use stategraph_runs::{Multitask, RunStatus, duplicate, rejected};

use super::records::{COLUMNS, run_row};
use super::*;
use crate::error::db;

/// What a new run stores as text: its metadata and arguments.
pub(super) struct Encoded {
    metadata: String,
    kwargs: String,
}

impl Encoded {
    pub(super) fn new(run: &NewRun) -> Result<Self> {
        let text = |what: &str, map| {
            serde_json::to_string(map).map_err(|e| Error::invalid(what, e.to_string()))
        };
        Ok(Self {
            metadata: text("run metadata", &run.metadata)?,
            kwargs: text("run kwargs", &run.kwargs)?,
        })
    }
}

/// The column that picks the runs a stop request is about.
#[derive(Clone, Copy)]
pub(super) enum Of {
    /// Every run of a thread.
    Thread,
    /// One run.
    Run,
}

impl Of {
    fn column(self) -> &'static str {
        match self {
            Self::Thread => "thread_id",
            Self::Run => "run_id",
        }
    }
}

impl Change<'_> {
    /// Enqueues `run`, applying its strategy to its thread's runs first.
    pub(super) fn enqueue(
        &mut self,
        run: &NewRun,
        encoded: &Encoded,
        max_attempts: u32,
    ) -> Result<Enqueued> {
        let exists = self
            .conn
            .prepare_cached("SELECT 1 FROM stategraph_runs WHERE run_id = ?1")
            .and_then(|mut s| s.exists([&run.run_id]))
            .map_err(db("looking for a run"))?;
        if exists {
            return Err(duplicate(&run.run_id));
        }
        let mut done = Enqueued::default();
        match run.multitask {
            Multitask::Reject => {
                if let Some((busy, status)) = self.busy_run(&run.thread_id)? {
                    return Err(rejected(&run.thread_id, &run.run_id, &busy, status));
                }
            }
            Multitask::Interrupt | Multitask::Rollback => {
                let action = run.multitask.cancel_action().unwrap_or_default();
                done.ended = self.end_pending(Of::Thread, &run.thread_id, action)?;
                done.signalled = self.signal(Of::Thread, &run.thread_id, action, "")?;
            }
            Multitask::Enqueue => {}
        }
        done.first = self.busy_run(&run.thread_id)?.is_none();
        let created_at = self.now.saturating_add(micros_of(run.delay));
        // A run claimed as it is enqueued, due now on a free thread, is stored running.
        let claimed_now = run
            .claim_for
            .as_deref()
            .filter(|_| done.first && created_at <= self.now);
        static INSERT: LazyLock<String> = LazyLock::new(|| {
            format!(
                "INSERT INTO stategraph_runs (run_id, thread_id, assistant_id, status, metadata, \
                 kwargs, multitask, temporary, created_at, updated_at, max_attempts, worker, \
                 lease_until, attempt) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
                 RETURNING {COLUMNS}"
            )
        });
        let status = match claimed_now {
            Some(_) => RunStatus::Running,
            None => RunStatus::Pending,
        };
        let row = self
            .conn
            .prepare_cached(&INSERT)
            .and_then(|mut s| {
                s.query_row(
                    params![
                        run.run_id,
                        run.thread_id,
                        run.assistant_id,
                        status.as_str(),
                        encoded.metadata,
                        encoded.kwargs,
                        run.multitask.as_str(),
                        run.temporary,
                        created_at,
                        self.now,
                        max_attempts,
                        claimed_now,
                        claimed_now.map(|_| self.now.saturating_add(self.lease)),
                        i64::from(claimed_now.is_some()),
                    ],
                    run_row,
                )
            })
            .map_err(db("enqueueing a run"))?;
        done.claimed = match (&run.claim_for, claimed_now) {
            (_, Some(_)) => Some(row),
            (Some(worker), None) => self.claim(worker, Some(&run.run_id))?,
            (None, None) => None,
        };
        let claimable = run.claim_for.is_none() && self.claimable(&run.run_id)?;
        self.note(Notification::Enqueued {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            claimable,
        });
        Ok(done)
    }

    /// Asks run `run_id` to stop: a pending one ends at once, a running one is signalled.
    pub(super) fn request_cancel(
        &mut self,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<CancelOutcome> {
        let status: Option<String> = self
            .conn
            .prepare_cached("SELECT status FROM stategraph_runs WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get(0)).optional())
            .map_err(db("reading a run"))?;
        let Some(status) = status else {
            return Ok(CancelOutcome::NotFound);
        };
        Ok(match RunStatus::parse(&status) {
            Some(RunStatus::Pending) => {
                self.end_pending(Of::Run, run_id, action)?;
                CancelOutcome::Ended
            }
            Some(RunStatus::Running) => {
                self.signal(Of::Run, run_id, action, reason)?;
                CancelOutcome::Signalled
            }
            Some(done) => CancelOutcome::AlreadyFinished(done),
            None => {
                return Err(Error::backend(
                    crate::error::BACKEND,
                    format!("reading run `{run_id}`"),
                    format!("unknown status `{status}`"),
                ));
            }
        })
    }

    /// Ends the pending runs `of` picks (`interrupted`, or deleted for a rollback), announcing
    /// each: their ids, in queue order.
    pub(super) fn end_pending(
        &mut self,
        of: Of,
        key: &str,
        action: CancelAction,
    ) -> Result<Vec<String>> {
        let column = of.column();
        let sql = match action {
            CancelAction::Interrupt => format!(
                "UPDATE stategraph_runs SET status = 'interrupted', lease_until = NULL, \
                 updated_at = ?2, ended_at = ?2 WHERE {column} = ?1 AND status = 'pending' \
                 RETURNING seq, run_id, thread_id"
            ),
            CancelAction::Rollback => format!(
                "DELETE FROM stategraph_runs WHERE {column} = ?1 AND status = 'pending' \
                 RETURNING seq, run_id, thread_id"
            ),
        };
        let ending = db("ending pending runs");
        let mut ended: Vec<(i64, String, String)> = {
            let mut stmt = self.conn.prepare_cached(&sql).map_err(&ending)?;
            let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
            let rows = match action {
                CancelAction::Interrupt => stmt.query_map(params![key, self.now], row),
                CancelAction::Rollback => stmt.query_map([key], row),
            }
            .map_err(&ending)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&ending)?
        };
        ended.sort_unstable();
        let status = match action {
            CancelAction::Interrupt => Some(RunStatus::Interrupted),
            CancelAction::Rollback => None,
        };
        Ok(ended
            .into_iter()
            .map(|(_, run_id, thread_id)| {
                self.note(Notification::Finished {
                    run_id: run_id.clone(),
                    thread_id,
                    status,
                });
                run_id
            })
            .collect())
    }

    /// Asks the running runs `of` picks to stop with `action` for `reason`, announcing each:
    /// their ids.
    pub(super) fn signal(
        &mut self,
        of: Of,
        key: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<Vec<String>> {
        let signalling = db("asking runs to stop");
        let signalled: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare_cached(&format!(
                    "UPDATE stategraph_runs SET cancel = ?2, cancel_reason = ?3, updated_at = ?4 \
                     WHERE {} = ?1 AND status = 'running' RETURNING run_id",
                    of.column()
                ))
                .map_err(&signalling)?;
            let rows = stmt
                .query_map(params![key, action.as_str(), reason, self.now], |r| {
                    r.get(0)
                })
                .map_err(&signalling)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&signalling)?
        };
        for run_id in &signalled {
            self.note(Notification::Cancel {
                run_id: run_id.clone(),
                action,
                reason: reason.to_owned(),
            });
        }
        Ok(signalled)
    }
}
