//! Reading runs and threads: one run, a listing, the threads' states, the queue's figures.

use stategraph_checkpoint::backend::Timed as _;
use tokio_postgres::types::ToSql;

use super::*;

/// A run, or `None`.
pub(super) async fn run(q: &PostgresRunQueue, run_id: &str) -> Result<Option<RunRow>> {
    const OP: &str = "reading a run";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                &format!("SELECT {ROW_COLUMNS} FROM stategraph_runs WHERE run_id = $1"),
                &[(&run_id, Type::TEXT)],
            )
            .await
            .map_err(db(OP))?;
        Ok(run_rows(&rows)?.into_iter().next())
    })
    .await
}

/// The runs `query` asks for, in its order, in one statement with only the conditions it
/// has (so that the thread's and the runs' indexes serve them).
pub(super) async fn list(q: &PostgresRunQueue, query: &RunQuery) -> Result<Vec<RunRow>> {
    const OP: &str = "listing runs";
    if query.run_ids.as_ref().is_some_and(Vec::is_empty) || query.limit == Some(0) {
        return Ok(Vec::new());
    }
    let statuses: Vec<&str> = query.statuses.iter().map(|s| s.as_str()).collect();
    let limit = query.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
    let mut sql = format!("SELECT {ROW_COLUMNS} FROM stategraph_runs WHERE true");
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = Vec::new();
    if let Some(thread_id) = &query.thread_id {
        params.push((thread_id, Type::TEXT));
        sql.push_str(&format!(" AND thread_id = ${}", params.len()));
    }
    if let Some(run_ids) = &query.run_ids {
        params.push((run_ids, Type::TEXT_ARRAY));
        sql.push_str(&format!(" AND run_id = ANY(${})", params.len()));
    }
    if !statuses.is_empty() {
        params.push((&statuses, Type::TEXT_ARRAY));
        sql.push_str(&format!(" AND status = ANY(${})", params.len()));
    }
    sql.push_str(if query.oldest_first {
        " ORDER BY created_at, seq"
    } else {
        " ORDER BY created_at DESC, seq DESC"
    });
    if let Some(limit) = &limit {
        params.push((limit, Type::INT8));
        sql.push_str(&format!(" LIMIT ${}", params.len()));
    }
    if offset > 0 {
        params.push((&offset, Type::INT8));
        sql.push_str(&format!(" OFFSET ${}", params.len()));
    }
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client.query_typed(&sql, &params).await.map_err(db(OP))?;
        run_rows(&rows)
    })
    .await
}

/// The threads of `thread_ids` the queue knows, in their order: busy while a run of theirs
/// is pending or running, with the state their last run (or a state update) left.
pub(super) async fn threads(q: &PostgresRunQueue, thread_ids: &[String]) -> Result<Vec<ThreadRow>> {
    const OP: &str = "reading threads";
    if thread_ids.is_empty() {
        return Ok(Vec::new());
    }
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "SELECT w.id, EXISTS (SELECT 1 FROM stategraph_runs r \
                   WHERE r.thread_id = w.id AND r.status IN ('pending', 'running')), \
                   s.status, s.\"values\", s.interrupts, s.error, s.updated_at \
                 FROM unnest($1::text[]) WITH ORDINALITY AS w(id, i) \
                 LEFT JOIN stategraph_run_threads s ON s.thread_id = w.id \
                 WHERE s.thread_id IS NOT NULL \
                   OR EXISTS (SELECT 1 FROM stategraph_runs r WHERE r.thread_id = w.id) \
                 ORDER BY w.i",
                &[(&thread_ids, Type::TEXT_ARRAY)],
            )
            .await
            .map_err(db(OP))?;
        rows.iter()
            .map(|row| {
                Ok(ThreadRow::new(
                    get::<String>(row, 0, OP)?,
                    get(row, 1, OP)?,
                    thread_state(row, 2)?,
                ))
            })
            .collect()
    })
    .await
}

/// How many runs are pending and running, and since when the oldest pending one waits, in
/// one statement.
pub(super) async fn stats(q: &PostgresRunQueue) -> Result<QueueStats> {
    const OP: &str = "counting the queue's runs";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "SELECT count(*) FILTER (WHERE status = 'pending'), \
                        count(*) FILTER (WHERE status = 'running'), \
                        min(created_at) FILTER (WHERE status = 'pending') \
                 FROM stategraph_runs WHERE status IN ('pending', 'running')",
                &[],
            )
            .await
            .map_err(db(OP))?;
        let Some(row) = rows.first() else {
            return Ok(QueueStats::default());
        };
        let pending: i64 = get(row, 0, OP)?;
        let running: i64 = get(row, 1, OP)?;
        let oldest: Option<SystemTime> = get(row, 2, OP)?;
        Ok(QueueStats::new(count64(pending), count64(running), oldest))
    })
    .await
}
