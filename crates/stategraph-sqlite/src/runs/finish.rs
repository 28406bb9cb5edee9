//! How runs end: a worker's end of its run (with its last events, its output, its thread's
//! state and its next claim, in one transaction), a run given back, a lease that ran out.

use rusqlite::{OptionalExtension, params};
use stategraph_runs::{RunStatus, ThreadEnd};

use super::threads::Encoded as EncodedState;
use super::*;
use crate::error::db;

/// A [`RunEnd`], owned and encoded for the blocking pool.
pub(super) struct Ending {
    run_id: String,
    worker: String,
    status: RunStatus,
    error: Option<String>,
    output: Option<String>,
    kwargs: Option<String>,
    events: Vec<(String, String)>,
    thread: Thread,
    delete: bool,
    claim_next: bool,
}

/// What becomes of the run's thread's state ([`ThreadEnd`], encoded).
enum Thread {
    Keep,
    Settle(EncodedState),
    Delete,
}

impl Ending {
    /// `end`, checked by the caller.
    pub(super) fn new(end: &RunEnd<'_>) -> Result<Self> {
        let kwargs = end
            .kwargs
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| Error::invalid("run kwargs", e.to_string()))?;
        Ok(Self {
            run_id: end.run_id.to_owned(),
            worker: end.worker.to_owned(),
            status: end.status,
            error: end.error.map(Json::to_string),
            output: end.output.map(Json::to_string),
            kwargs,
            events: events::encode(end.events),
            thread: match end.thread {
                ThreadEnd::Settle(state) => Thread::Settle(EncodedState::new(state)),
                ThreadEnd::Delete => Thread::Delete,
                _ => Thread::Keep,
            },
            delete: end.delete,
            claim_next: end.claim_next,
        })
    }
}

impl Change<'_> {
    /// Ends (or gives back) a run its worker holds, as `end` says, then claims the worker's
    /// next run if asked.
    pub(super) fn finish(&mut self, end: &Ending) -> Result<Finished> {
        let held = if end.status == RunStatus::Pending {
            // Given back: the attempt does not count.
            self.requeue(&end.run_id, Some(&end.worker))?
        } else {
            self.end_held(end)?
        };
        let next = match end.claim_next {
            true => self.claim(&end.worker, None)?,
            false => None,
        };
        Ok(Finished::new(held, next))
    }

    /// Ends run `end.run_id` if `end.worker` holds it: its status, error, output, arguments
    /// and last events, then its thread's state, and its deletion if asked. Whether it held
    /// it.
    fn end_held(&mut self, end: &Ending) -> Result<bool> {
        let n = i64::try_from(end.events.len()).unwrap_or(i64::MAX);
        let ended: Option<(String, i64)> = self
            .conn
            .prepare_cached(
                "UPDATE stategraph_runs SET status = ?3, error = coalesce(?4, error), \
                 output = ?5, kwargs = coalesce(?8, kwargs), events = events + ?6, \
                 lease_until = NULL, updated_at = ?7, ended_at = ?7 \
                 WHERE run_id = ?1 AND worker = ?2 AND status = 'running' \
                 RETURNING thread_id, events",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        end.run_id,
                        end.worker,
                        end.status.as_str(),
                        end.error,
                        end.output,
                        n,
                        self.now,
                        end.kwargs
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
            })
            .map_err(db("ending a run"))?;
        let Some((thread_id, last)) = ended else {
            return Ok(false);
        };
        self.insert_events(&end.run_id, last, &end.events)?;
        self.note(Notification::Finished {
            run_id: end.run_id.clone(),
            thread_id: thread_id.clone(),
            status: Some(end.status),
        });
        match &end.thread {
            Thread::Keep => {}
            Thread::Settle(state) => self.settle(&thread_id, state)?,
            Thread::Delete => self.forget_thread(&thread_id)?,
        }
        if end.delete {
            self.delete_run(&end.run_id)?;
        }
        Ok(true)
    }

    /// Ends running run `run_id` of `thread_id` with `status` (its lease ran out), keeping its
    /// output, announcing it.
    pub(super) fn end(
        &mut self,
        run_id: &str,
        thread_id: &str,
        status: RunStatus,
        error: Option<&Json>,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE stategraph_runs SET status = ?2, error = coalesce(?3, error), \
                 lease_until = NULL, updated_at = ?4, ended_at = ?4 WHERE run_id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    run_id,
                    status.as_str(),
                    error.map(Json::to_string),
                    self.now
                ])
            })
            .map_err(db("ending a run"))?;
        self.note(Notification::Finished {
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            status: Some(status),
        });
        Ok(())
    }

    /// Puts running run `run_id` back to pending, in its place in its thread's queue: its
    /// lease ran out (`worker` `None`), or `worker` gives it back (if it holds it; the
    /// attempt does not count then). Whether it did.
    pub(super) fn requeue(&mut self, run_id: &str, worker: Option<&str>) -> Result<bool> {
        let thread_id: Option<String> = self
            .conn
            .prepare_cached(
                "UPDATE stategraph_runs SET status = 'pending', lease_until = NULL, \
                 updated_at = ?3, max_attempts = max_attempts + (?2 IS NOT NULL) \
                 WHERE run_id = ?1 AND status = 'running' AND (?2 IS NULL OR worker = ?2) \
                 RETURNING thread_id",
            )
            .and_then(|mut s| {
                s.query_row(params![run_id, worker, self.now], |r| r.get(0))
                    .optional()
            })
            .map_err(db("requeueing a run"))?;
        let Some(thread_id) = thread_id else {
            return Ok(false);
        };
        self.note(Notification::Requeued {
            run_id: run_id.to_owned(),
            thread_id,
        });
        Ok(true)
    }
}
