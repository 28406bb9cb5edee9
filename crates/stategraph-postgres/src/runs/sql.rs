//! The queue's SQL that several operations share: a run's columns, the notifications'
//! payloads, the claim, and the statements that stop runs.

use super::*;

/// Seed of the transaction advisory-lock key of a thread (hashed with the schema and the
/// thread id), held while enqueueing a run of that thread.
pub(super) const THREAD_LOCK_SEED: i64 = 0x5354_4752_5448_5244; // "STGRTHRD"

/// The columns of a [`RunRow`], in the order [`run_row`](super::rows::run_row) reads them.
pub(super) const ROW_COLUMNS: &str = "run_id, thread_id, assistant_id, status, metadata, kwargs, \
    multitask, temporary, created_at, updated_at, seq, attempt, max_attempts, worker, \
    lease_until, cancel, cancel_reason, events, error, output";

/// How many columns [`ROW_COLUMNS`] has: the index of the first column after them.
pub(super) const ROW_WIDTH: usize = 20;

/// [`ROW_COLUMNS`], each qualified by `alias`.
pub(super) fn columns_of(alias: &str) -> String {
    ROW_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The payload of a `finished` notification of the row in scope, its status `status` (an
/// SQL expression: `status`, or `NULL` for a deleted run).
pub(super) fn finished(status: &str) -> String {
    format!(
        "json_build_object('kind', 'finished', 'run_id', run_id, 'thread_id', thread_id, \
         'status', {status})::text"
    )
}

/// The payload of a `requeued` notification of the row in scope.
pub(super) const REQUEUED: &str =
    "json_build_object('kind', 'requeued', 'run_id', run_id, 'thread_id', thread_id)::text";

/// The payload of an `event` notification of the row in scope: its last event, number
/// `events`.
pub(super) const EVENT: &str =
    "json_build_object('kind', 'event', 'run_id', run_id, 'seq', events)::text";

/// The statement that ends the pending runs whose `column` (`thread_id`, `run_id`) is `$1`
/// as a stop request with `action` ends them — `interrupted`, or deleted for a rollback —
/// announcing each on channel `$2`; it returns their ids. Enqueueing with the `interrupt` /
/// `rollback` strategies and cancelling a run both use it.
pub(super) fn end_pending_sql(column: &str, action: CancelAction) -> String {
    match action {
        CancelAction::Interrupt => format!(
            "UPDATE stategraph_runs SET status = 'interrupted', updated_at = now() \
             WHERE {column} = $1 AND status = 'pending' \
             RETURNING run_id, pg_notify($2, {})",
            finished("status")
        ),
        CancelAction::Rollback => format!(
            "DELETE FROM stategraph_runs WHERE {column} = $1 AND status = 'pending' \
             RETURNING run_id, pg_notify($2, {})",
            finished("NULL")
        ),
    }
}

/// The statement that asks the running runs whose `column` is `$1` to stop with action `$3`
/// for reason `$4` (their workers see it at their next heartbeat, or at once by the
/// notification on channel `$2`); it returns their ids.
pub(super) fn signal_running_sql(column: &str) -> String {
    format!(
        "UPDATE stategraph_runs SET cancel = $3, cancel_reason = $4, updated_at = now() \
         WHERE {column} = $1 AND status = 'running' \
         RETURNING run_id, pg_notify($2, json_build_object('kind', 'cancel', \
         'run_id', run_id, 'action', $3::text, 'reason', $4::text)::text)"
    )
}

/// The parameters of a claim, as placeholders of the statement it is part of.
pub(super) struct ClaimParams<'a> {
    /// The worker (`text`).
    pub(super) worker: &'a str,
    /// The lease in milliseconds (`bigint`).
    pub(super) lease_ms: &'a str,
    /// The one run to claim, if only that one (`text`).
    pub(super) only: Option<&'a str>,
    /// A common table expression of the same statement whose `run_id`s are runs it ends:
    /// running in the statement's snapshot, they hold up their threads no more.
    pub(super) ending: Option<&'a str>,
}

/// The common table expressions `next` and `claimed` of a claim: the oldest pending run that
/// is due (its `created_at` reached) and whose thread has no running run and no older due
/// pending run, skipping runs other claims are taking, made `running` with the worker's
/// lease; `claimed` returns its [`ROW_COLUMNS`].
pub(super) fn claim_ctes(p: &ClaimParams<'_>) -> String {
    let only = p
        .only
        .map(|id| format!("AND r.run_id = {id}"))
        .unwrap_or_default();
    let ending = p
        .ending
        .map(|cte| format!("AND o.run_id NOT IN (SELECT run_id FROM {cte})"))
        .unwrap_or_default();
    format!(
        "next AS ( \
           SELECT r.run_id FROM stategraph_runs r \
           WHERE r.status = 'pending' AND r.created_at <= now() {only} AND NOT EXISTS ( \
             SELECT 1 FROM stategraph_runs o WHERE o.thread_id = r.thread_id \
             AND ((o.status = 'running' {ending}) \
               OR (o.status = 'pending' AND o.seq < r.seq AND o.created_at <= now()))) \
           ORDER BY r.seq LIMIT 1 \
           FOR UPDATE OF r SKIP LOCKED), \
         claimed AS ( \
           UPDATE stategraph_runs c SET status = 'running', worker = {worker}, \
             lease_until = now() + {lease}::bigint * interval '1 millisecond', \
             attempt = c.attempt + 1, cancel = NULL, cancel_reason = NULL, updated_at = now() \
           FROM next WHERE c.run_id = next.run_id AND c.status = 'pending' \
           RETURNING {columns})",
        worker = p.worker,
        lease = p.lease_ms,
        columns = columns_of("c"),
    )
}

/// Whether `e` is the database refusing a second running run on a thread (the unique index
/// `stategraph_runs_one_running`): another claim made the thread's run running first.
pub(super) fn second_running(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && e.as_db_error()
            .and_then(|db| db.constraint())
            .is_none_or(|c| c == "stategraph_runs_one_running")
}

/// The longest stop reason kept, in bytes (a notification's payload is at most 8000 bytes).
const MAX_REASON: usize = 2000;

/// `reason` cut to [`MAX_REASON`] bytes, at a character boundary.
pub(super) fn stop_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason.get(..end).unwrap_or_default()
}
