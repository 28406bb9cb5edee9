//! Reading runs: one, a thread's, the busy threads, the queue's figures.

use super::*;

pub(super) async fn busy_threads(q: &PostgresRunQueue) -> Result<BTreeSet<String>> {
    const OP: &str = "reading the busy threads";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "SELECT DISTINCT thread_id FROM stategraph_runs \
                 WHERE status IN ('pending', 'running')",
                &[],
            )
            .await
            .map_err(db(OP))?;
        rows.iter().map(|row| get(row, 0, OP)).collect()
    })
    .await
}

pub(super) async fn stats(q: &PostgresRunQueue) -> Result<QueueStats> {
    const OP: &str = "counting the queue's runs";
    q.timed(OP, async {
        let client = q.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'pending'), \
                        count(*) FILTER (WHERE status = 'running'), \
                        min(created_at) FILTER (WHERE status = 'pending') \
                 FROM stategraph_runs WHERE status IN ('pending', 'running')",
                &[],
            )
            .await
            .map_err(db(OP))?;
        let pending: i64 = get(&row, 0, OP)?;
        let running: i64 = get(&row, 1, OP)?;
        let oldest: Option<std::time::SystemTime> = get(&row, 2, OP)?;
        Ok(QueueStats::new(
            u64::try_from(pending).unwrap_or(0),
            u64::try_from(running).unwrap_or(0),
            oldest,
        ))
    })
    .await
}

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
        rows.first().map(run_row).transpose()
    })
    .await
}

/// The runs of a thread, in queue order.
pub(super) async fn runs_of_thread(q: &PostgresRunQueue, thread_id: &str) -> Result<Vec<RunRow>> {
    const OP: &str = "reading a thread's runs";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                &format!(
                    "SELECT {ROW_COLUMNS} FROM stategraph_runs WHERE thread_id = $1 \
                     ORDER BY seq"
                ),
                &[(&thread_id, Type::TEXT)],
            )
            .await
            .map_err(db(OP))?;
        rows.iter().map(run_row).collect()
    })
    .await
}
