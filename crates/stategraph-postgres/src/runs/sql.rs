//! The queue's SQL that several operations share, and its row shapes.

use super::*;

/// Seed of the transaction advisory-lock key of a thread (hashed with the schema and the
/// thread id), held while enqueueing a run of that thread.
pub(super) const THREAD_LOCK_SEED: i64 = 0x5354_4752_5448_5244; // "STGRTHRD"

/// The columns of a [`RunRow`], in order.
pub(super) const ROW_COLUMNS: &str = "run_id, thread_id, status, payload, seq, attempt, max_attempts, \
    worker, lease_until, cancel, events, error, created_at, updated_at, cancel_reason";

/// `json_build_object` arguments of a `finished` notification for the row in scope.
pub(super) const FINISHED: &str =
    "json_build_object('kind', 'finished', 'run_id', run_id, 'status', status)";

/// The statement that ends the pending runs whose `column` (`thread_id`, `run_id`) is `$1`
/// as a stop request with `action` ends them — `interrupted`, or deleted for a rollback —
/// announcing each on channel `$2`; it returns their ids. Enqueueing with the `interrupt` /
/// `rollback` strategies and cancelling a run both use it.
pub(super) fn end_pending_sql(column: &str, action: CancelAction) -> String {
    match action {
        CancelAction::Interrupt => format!(
            "UPDATE stategraph_runs SET status = 'interrupted', updated_at = now() \
             WHERE {column} = $1 AND status = 'pending' \
             RETURNING run_id, pg_notify($2, {FINISHED}::text)"
        ),
        CancelAction::Rollback => format!(
            "DELETE FROM stategraph_runs WHERE {column} = $1 AND status = 'pending' \
             RETURNING run_id, pg_notify($2, json_build_object('kind', 'finished', \
             'run_id', run_id, 'status', NULL)::text)"
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
