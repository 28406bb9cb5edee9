//! Reading the queue's rows: columns, ids, counts, statuses, whole runs, thread states.

use super::*;

/// Column `i` of a row.
pub(super) fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    i: usize,
    context: &'static str,
) -> Result<T> {
    row.try_get(i).map_err(db(context))
}

/// The first column of each row, as ids.
pub(super) fn ids(rows: &[Row], context: &'static str) -> Result<Vec<String>> {
    rows.iter().map(|r| get(r, 0, context)).collect()
}

/// A non-negative count from an INTEGER column.
pub(super) fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// A non-negative count from a BIGINT column.
pub(super) fn count64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The error of a stored value this queue does not know.
fn unknown(what: &str, value: &str) -> Error {
    Error::Backend {
        backend: BACKEND,
        message: format!("the run queue's tables hold an unknown {what} `{value}`"),
        source: None,
    }
}

/// A stored run status.
pub(super) fn status_of(name: &str) -> Result<RunStatus> {
    RunStatus::parse(name).ok_or_else(|| unknown("run status", name))
}

/// A stored JSON object (anything else reads as an empty one).
fn object(json: Json) -> Object {
    match json {
        Json::Object(map) => map,
        _ => Object::new(),
    }
}

/// The run of a row whose first [`ROW_WIDTH`] columns are [`ROW_COLUMNS`]; `None` when its
/// `run_id` is null (an outer join that found no run).
pub(super) fn run_row(row: &Row) -> Result<Option<RunRow>> {
    const OP: &str = "reading a run";
    let Some(run_id) = get::<Option<String>>(row, 0, OP)? else {
        return Ok(None);
    };
    let multitask: String = get(row, 6, OP)?;
    let cancel: Option<String> = get(row, 15, OP)?;
    let mut run = RunRow::new(run_id, get::<String>(row, 1, OP)?, get(row, 10, OP)?);
    run.assistant_id = get(row, 2, OP)?;
    run.status = status_of(&get::<String>(row, 3, OP)?)?;
    run.metadata = object(get(row, 4, OP)?);
    run.kwargs = object(get(row, 5, OP)?);
    run.multitask =
        Multitask::parse(&multitask).ok_or_else(|| unknown("multitask strategy", &multitask))?;
    run.temporary = get(row, 7, OP)?;
    run.created_at = get(row, 8, OP)?;
    run.updated_at = get(row, 9, OP)?;
    run.attempt = count(get(row, 11, OP)?);
    run.max_attempts = count(get(row, 12, OP)?);
    run.worker = get(row, 13, OP)?;
    run.lease_until = get(row, 14, OP)?;
    run.cancel = cancel.as_deref().and_then(CancelAction::parse);
    run.cancel_reason = get::<Option<String>>(row, 16, OP)?.unwrap_or_default();
    run.events = get(row, 17, OP)?;
    run.error = get(row, 18, OP)?;
    run.output = get(row, 19, OP)?;
    Ok(Some(run))
}

/// The runs of rows of [`ROW_COLUMNS`].
pub(super) fn run_rows(rows: &[Row]) -> Result<Vec<RunRow>> {
    rows.iter()
        .filter_map(|row| run_row(row).transpose())
        .collect()
}

/// A thread's state from columns `status, values, interrupts, error, updated_at` starting at
/// `at`; `None` when the thread has none (its status is null).
pub(super) fn thread_state(row: &Row, at: usize) -> Result<Option<(ThreadState, SystemTime)>> {
    const OP: &str = "reading a thread's state";
    let Some(status) = get::<Option<String>>(row, at, OP)? else {
        return Ok(None);
    };
    let status = ThreadStatus::parse(&status).ok_or_else(|| unknown("thread status", &status))?;
    let json = |i: usize| -> Result<Json> {
        Ok(get::<Option<Json>>(row, at + i, OP)?.unwrap_or(Json::Null))
    };
    let state = ThreadState::new(status, json(1)?, json(2)?).error(json(3)?);
    Ok(Some((state, get(row, at + 4, OP)?)))
}
