//! A run's stream events: appended by the lease holder, read from any sequence number.

use super::*;
use stategraph_checkpoint::backend::Timed as _;

/// Events as the statements' array parameters: names, data, and how many.
fn columns(events: &[(String, Json)]) -> (Vec<&str>, Vec<&Json>, i64) {
    (
        events.iter().map(|(n, _)| n.as_str()).collect(),
        events.iter().map(|(_, d)| d).collect(),
        i64::try_from(events.len()).unwrap_or(i64::MAX),
    )
}

/// Appends events in one statement (one notification, with the last number).
pub(super) async fn append_events(
    q: &PostgresRunQueue,
    run_id: &str,
    worker: &str,
    events: &[(String, Json)],
) -> Result<Option<i64>> {
    const OP: &str = "appending run events";
    let (names, data, n) = columns(events);
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                &format!(
                    "WITH r AS ( \
                       UPDATE stategraph_runs SET events = events + $6 \
                       WHERE run_id = $1 AND worker = $2 AND status = 'running' \
                       RETURNING run_id, events), \
                     logged AS ( \
                       INSERT INTO stategraph_run_events (run_id, seq, event, data) \
                       SELECT r.run_id, r.events - $6 + e.ord, e.event, e.data \
                       FROM r, unnest($3::text[], $4::json[]) WITH ORDINALITY AS e(event, data, ord)) \
                     SELECT events, CASE WHEN $6 > 0 THEN pg_notify($5, {EVENT}) END FROM r"
                ),
                &[
                    (&run_id, Type::TEXT),
                    (&worker, Type::TEXT),
                    (&names, Type::TEXT_ARRAY),
                    (&data, Type::JSON_ARRAY),
                    (&q.channel, Type::TEXT),
                    (&n, Type::INT8),
                ],
            )
            .await
            .map_err(db(OP))?;
        rows.first().map(|row| get(row, 0, OP)).transpose()
    })
    .await
}

/// Up to `limit` events of a run after sequence number `after_seq` (0 for all), in order:
/// for joining a run's stream, or resuming it after a `Last-Event-ID`.
pub(super) async fn events_after(
    q: &PostgresRunQueue,
    run_id: &str,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<RunEvent>> {
    const OP: &str = "reading run events";
    q.timed(OP, async {
        let client = q.client().await?;
        let rows = client
            .query_typed(
                "SELECT seq, event, data FROM stategraph_run_events \
                 WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[
                    (&run_id, Type::TEXT),
                    (&after_seq, Type::INT8),
                    (&i64::from(limit), Type::INT8),
                ],
            )
            .await
            .map_err(db(OP))?;
        rows.iter()
            .map(|row| {
                Ok(RunEvent::new(
                    get(row, 0, OP)?,
                    get::<String>(row, 1, OP)?,
                    get(row, 2, OP)?,
                ))
            })
            .collect()
    })
    .await
}
