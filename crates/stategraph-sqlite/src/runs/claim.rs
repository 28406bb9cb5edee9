//! Claims and leases: the next run of a free thread, heartbeats, the runs whose lease ran
//! out; and keys taken once.

use std::sync::LazyLock;

use rusqlite::{OptionalExtension, params};
use stategraph_runs::{Expired, Lease, RunStatus, lease_expired_error};

use super::records::{COLUMNS, run_row};
use super::*;
use crate::error::db;

/// Whether pending run `r` may be claimed at `?1`: due, and next on its thread (no running
/// run, no older due pending run). Both look at the thread's runs of one status through
/// `stategraph_runs_by_thread` (`+` keeps the planner from walking the thread's whole history
/// by `created_at` instead).
const CLAIMABLE: &str = "r.status = 'pending' AND r.created_at <= ?1 \
    AND NOT EXISTS (SELECT 1 FROM stategraph_runs o \
        WHERE o.thread_id = r.thread_id AND o.status = 'running') \
    AND NOT EXISTS (SELECT 1 FROM stategraph_runs o \
        WHERE o.thread_id = r.thread_id AND o.status = 'pending' AND o.seq < r.seq \
        AND +o.created_at <= ?1)";

/// Makes the oldest claimable run (`?4`: of that id only, in [`CLAIM_ONE`]) running for
/// worker `?2` until `?3`, at `?1`; the claimed row.
static CLAIM_NEXT: LazyLock<String> = LazyLock::new(|| claim_sql(""));
static CLAIM_ONE: LazyLock<String> = LazyLock::new(|| claim_sql("r.run_id = ?4 AND"));

fn claim_sql(only: &str) -> String {
    format!(
        "UPDATE stategraph_runs SET status = 'running', worker = ?2, lease_until = ?3, \
           attempt = attempt + 1, cancel = NULL, cancel_reason = '', updated_at = ?1 \
         WHERE seq = (SELECT r.seq FROM stategraph_runs r WHERE {only} {CLAIMABLE} \
           ORDER BY r.seq LIMIT 1) \
         RETURNING {COLUMNS}"
    )
}

/// Whether a run (`only`: that run) may be claimed now: what an idle worker looks at before
/// it takes the write lock.
pub(super) fn any_claimable(conn: &Connection, only: Option<&str>) -> Result<bool> {
    claimable_at(conn, micros(SystemTime::now()), only)
}

/// Whether a run (`only`: that run) may be claimed at `now`.
fn claimable_at(conn: &Connection, now: i64, only: Option<&str>) -> Result<bool> {
    static ANY: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT EXISTS (SELECT 1 FROM stategraph_runs r WHERE {CLAIMABLE})")
    });
    static ONE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT EXISTS (SELECT 1 FROM stategraph_runs r WHERE r.run_id = ?2 AND {CLAIMABLE})"
        )
    });
    let found = match only {
        None => conn
            .prepare_cached(&ANY)
            .and_then(|mut s| s.query_row([now], |r| r.get(0))),
        Some(id) => conn
            .prepare_cached(&ONE)
            .and_then(|mut s| s.query_row(params![now, id], |r| r.get(0))),
    };
    found.map_err(db("looking for a run to claim"))
}

/// Whether a running run's lease ran out: what upkeep looks at before it takes the write
/// lock.
pub(super) fn any_expired(conn: &Connection) -> Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM stategraph_runs \
         WHERE status = 'running' AND lease_until < ?1)",
    )
    .and_then(|mut s| s.query_row([micros(SystemTime::now())], |r| r.get(0)))
    .map_err(db("looking for expired leases"))
}

impl Change<'_> {
    /// Claims the oldest claimable run (or `only`, if it is claimable) for `worker`.
    pub(super) fn claim(&mut self, worker: &str, only: Option<&str>) -> Result<Option<RunRow>> {
        let until = self.now.saturating_add(self.lease);
        let claimed = match only {
            None => self
                .conn
                .prepare_cached(&CLAIM_NEXT)
                .and_then(|mut s| s.query_row(params![self.now, worker, until], run_row)),
            Some(id) => self
                .conn
                .prepare_cached(&CLAIM_ONE)
                .and_then(|mut s| s.query_row(params![self.now, worker, until, id], run_row)),
        };
        claimed.optional().map_err(db("claiming a run"))
    }

    /// Whether run `run_id` may be claimed now.
    pub(super) fn claimable(&self, run_id: &str) -> Result<bool> {
        claimable_at(self.conn, self.now, Some(run_id))
    }

    /// Extends `worker`'s lease on running run `run_id` if it holds it, with its stop request.
    pub(super) fn heartbeat(&mut self, run_id: &str, worker: &str) -> Result<Lease> {
        let held: Option<(Option<String>, String)> = self
            .conn
            .prepare_cached(
                "UPDATE stategraph_runs SET lease_until = ?3, updated_at = ?4 \
                 WHERE run_id = ?1 AND worker = ?2 AND status = 'running' \
                 RETURNING cancel, cancel_reason",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        run_id,
                        worker,
                        self.now.saturating_add(self.lease),
                        self.now
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
            })
            .map_err(db("renewing a run's lease"))?;
        Ok(match held {
            None => Lease::lost(),
            Some((cancel, reason)) => {
                Lease::held(cancel.as_deref().and_then(CancelAction::parse)).with_reason(reason)
            }
        })
    }

    /// Takes back the running runs whose lease ran out: each goes back to pending, to `error`
    /// on its last attempt (its thread failing with it), or to `interrupted` if it had been
    /// asked to stop.
    pub(super) fn requeue_expired(&mut self) -> Result<Vec<Expired>> {
        let reading = db("reading expired leases");
        let expired: Vec<(String, String, u32, u32, bool)> = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT run_id, thread_id, attempt, max_attempts, cancel IS NOT NULL \
                     FROM stategraph_runs WHERE status = 'running' AND lease_until < ?1 \
                     ORDER BY seq",
                )
                .map_err(&reading)?;
            let rows = stmt
                .query_map([self.now], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .map_err(&reading)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&reading)?
        };
        let mut out = Vec::with_capacity(expired.len());
        for (run_id, thread_id, attempt, max_attempts, cancelled) in expired {
            let status = if cancelled {
                RunStatus::Interrupted
            } else if attempt >= max_attempts {
                RunStatus::Error
            } else {
                RunStatus::Pending
            };
            match status {
                RunStatus::Pending => {
                    self.requeue(&run_id, None)?;
                }
                RunStatus::Error => {
                    let error = lease_expired_error(attempt, max_attempts);
                    self.end(&run_id, &thread_id, status, Some(&error))?;
                    self.fail_thread(&thread_id, &error)?;
                }
                _ => self.end(&run_id, &thread_id, status, None)?,
            }
            out.push(Expired::new(run_id, thread_id, status));
        }
        Ok(out)
    }

    /// Takes `key` if nobody did (sweeping keys older than the retention first, if `sweep`).
    pub(super) fn claim_once(&mut self, key: &str, sweep: bool) -> Result<bool> {
        if sweep {
            let retention = micros_of(stategraph_runs::CLAIM_RETENTION);
            self.conn
                .prepare_cached("DELETE FROM stategraph_run_claims WHERE claimed_at < ?1")
                .and_then(|mut s| s.execute([self.now.saturating_sub(retention)]))
                .map_err(db("forgetting old claimed keys"))?;
        }
        let taken = self
            .conn
            .prepare_cached(
                "INSERT OR IGNORE INTO stategraph_run_claims (key, claimed_at) VALUES (?1, ?2)",
            )
            .and_then(|mut s| s.execute(params![key, self.now]))
            .map_err(db("claiming a key"))?;
        Ok(taken == 1)
    }
}
