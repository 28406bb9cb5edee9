//! Reading the queue's rows: columns, ids, counts, statuses, whole runs.

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

/// A stored status.
pub(super) fn status_of(name: &str) -> Result<RunStatus> {
    RunStatus::parse(name).ok_or_else(|| Error::Backend {
        backend: BACKEND,
        message: format!("stategraph_runs holds an unknown run status `{name}`"),
        source: None,
    })
}

/// A row of [`ROW_COLUMNS`].
pub(super) fn run_row(row: &Row) -> Result<RunRow> {
    const OP: &str = "reading a run";
    let cancel: Option<String> = get(row, 9, OP)?;
    let mut run = RunRow::new(
        get::<String>(row, 0, OP)?,
        get::<String>(row, 1, OP)?,
        status_of(&get::<String>(row, 2, OP)?)?,
        get(row, 3, OP)?,
        get(row, 4, OP)?,
    );
    run.attempt = count(get(row, 5, OP)?);
    run.max_attempts = count(get(row, 6, OP)?);
    run.worker = get(row, 7, OP)?;
    run.lease_until = get(row, 8, OP)?;
    run.cancel = cancel.as_deref().and_then(CancelAction::parse);
    run.cancel_reason = get::<Option<String>>(row, 14, OP)?.unwrap_or_default();
    run.events = get(row, 10, OP)?;
    run.error = get(row, 11, OP)?;
    run.created_at = get(row, 12, OP)?;
    run.updated_at = get(row, 13, OP)?;
    Ok(run)
}
