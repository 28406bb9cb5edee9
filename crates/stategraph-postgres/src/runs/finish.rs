//! The end of a run ([`RunEnd`]): its row (ended, given back or deleted), its last events,
//! its thread's state and the worker's next claim, in one statement.
//!
//! The statement's parameters, whichever parts it has:
//! `$1` run, `$2` worker, `$3` status, `$4` error, `$5` output, `$6` event names, `$7` event
//! data, `$8` how many events, `$9` the channel, `$10`–`$13` the thread's status, values,
//! interrupts and error, `$14` the lease in milliseconds (for the next claim), `$15` the
//! arguments the run ran with.

use stategraph_checkpoint::backend::Timed as _;
use tokio_postgres::types::{Json as SqlJson, ToSql};

use super::*;

/// Ends the run as `end` says (see [`RunQueue::finish`]).
pub(super) async fn finish(q: &PostgresRunQueue, end: &RunEnd<'_>) -> Result<Finished> {
    const OP: &str = "finishing a run";
    end.check()?;
    let params = Params::new(q, end)?;
    if end.is_release() && end.claim_next {
        // The run given back may be the next one claimed: the claim needs the release done.
        return q.timed(OP, in_transaction(q, end, &params)).await;
    }
    let sql = statement(end, end.claim_next);
    let tried = q
        .timed(OP, async {
            let client = q.client().await?;
            match client.query_typed(&sql, &params.list()).await {
                // The next claim collided with another claiming the same thread's run.
                Err(e) if second_running(&e) => Ok(None),
                rows => Ok(Some(finished_of(&rows.map_err(db(OP))?, end.claim_next)?)),
            }
        })
        .await?;
    match tried {
        Some(done) => Ok(done),
        None => q.timed(OP, in_transaction(q, end, &params)).await,
    }
}

/// The end and the next claim as two statements of one transaction, the claim behind a
/// savepoint: a claim that collides with another is given up (nothing claimed), not the end.
/// The three statements are sent together.
async fn in_transaction(
    q: &PostgresRunQueue,
    end: &RunEnd<'_>,
    params: &Params<'_>,
) -> Result<Finished> {
    const OP: &str = "finishing a run and claiming the next";
    let sql = statement(end, false);
    let mut client = q.client().await?;
    let tx = client.transaction().await.map_err(db(OP))?;
    let list = params.list();
    let (ended, savepoint, claimed) = tokio::join!(
        biased;
        tx.query_typed(&sql, &list),
        tx.batch_execute("SAVEPOINT claim"),
        super::lease::claim_on(&*tx, q, end.worker, None),
    );
    let ended = finished_of(&ended.map_err(db(OP))?, false)?.ended;
    savepoint.map_err(db(OP))?;
    let next = match claimed {
        Err(e) if second_running(&e) => {
            tx.batch_execute("ROLLBACK TO SAVEPOINT claim")
                .await
                .map_err(db(OP))?;
            None
        }
        rows => run_rows(&rows.map_err(db(OP))?)?.into_iter().next(),
    };
    tx.commit().await.map_err(db("committing a run's end"))?;
    Ok(Finished::new(ended, next))
}

/// What the statement answered: whether the worker held the run (the last column) and the
/// run claimed next, if `claims` (the [`ROW_COLUMNS`] before it).
fn finished_of(rows: &[Row], claims: bool) -> Result<Finished> {
    const OP: &str = "finishing a run";
    let Some(row) = rows.first() else {
        return Ok(Finished::new(false, None));
    };
    if !claims {
        return Ok(Finished::new(get(row, 0, OP)?, None));
    }
    Ok(Finished::new(get(row, ROW_WIDTH, OP)?, run_row(row)?))
}

/// The statement of `end` (with the next claim if `claims`). Its CTE `done` ends the run the
/// worker holds — or gives it back, or deletes it — announcing it.
fn statement(end: &RunEnd<'_>, claims: bool) -> String {
    let held = "WHERE run_id = $1 AND worker = $2 AND status = 'running'";
    let mut ctes = vec![if end.is_release() {
        format!(
            "done AS (UPDATE stategraph_runs SET status = 'pending', lease_until = NULL, \
               max_attempts = max_attempts + 1, updated_at = now() {held} \
             RETURNING run_id, thread_id, pg_notify($9, {REQUEUED}))"
        )
    } else if end.delete {
        // Its events go with it (by the foreign key): the last ones are announced only.
        format!(
            "done AS (DELETE FROM stategraph_runs {held} \
             RETURNING run_id, thread_id, \
               CASE WHEN $8 > 0 THEN pg_notify($9, json_build_object('kind', 'event', \
                 'run_id', run_id, 'seq', events + $8)::text) END, \
               pg_notify($9, {}))",
            finished("$3::text")
        )
    } else {
        format!(
            "done AS (UPDATE stategraph_runs SET status = $3, error = COALESCE($4, error), \
               output = $5, kwargs = COALESCE($15, kwargs), lease_until = NULL, \
               events = events + $8, updated_at = now() {held} \
             RETURNING run_id, thread_id, events, \
               CASE WHEN $8 > 0 THEN pg_notify($9, {EVENT}) END, \
               pg_notify($9, {}))",
            finished("status")
        )
    }];
    if !end.is_release() && !end.delete && !end.events.is_empty() {
        ctes.push(
            "logged AS (INSERT INTO stategraph_run_events (run_id, seq, event, data) \
             SELECT done.run_id, done.events - $8 + e.ord, e.event, e.data \
             FROM done, unnest($6::text[], $7::json[]) WITH ORDINALITY AS e(event, data, ord))"
                .to_owned(),
        );
    }
    match (end.is_release(), end.thread) {
        (false, ThreadEnd::Settle(_)) => ctes.push(
            "thread AS (INSERT INTO stategraph_run_threads AS t \
               (thread_id, status, \"values\", interrupts, error, updated_at) \
             SELECT thread_id, $10, $11, $12, $13, now() FROM done \
             ON CONFLICT (thread_id) DO UPDATE SET status = EXCLUDED.status, \
               \"values\" = EXCLUDED.\"values\", interrupts = EXCLUDED.interrupts, \
               error = EXCLUDED.error, updated_at = EXCLUDED.updated_at)"
                .to_owned(),
        ),
        (false, ThreadEnd::Delete) => ctes.push(
            "thread AS (DELETE FROM stategraph_run_threads t USING done \
             WHERE t.thread_id = done.thread_id)"
                .to_owned(),
        ),
        _ => {}
    }
    if !claims {
        return format!(
            "WITH {} SELECT EXISTS (SELECT 1 FROM done)",
            ctes.join(", ")
        );
    }
    ctes.push(claim_ctes(&ClaimParams {
        worker: "$2",
        lease_ms: "$14",
        only: None,
        // The run ended here no longer holds up its thread; one given back still does.
        ending: (!end.is_release()).then_some("done"),
    }));
    format!(
        "WITH {} SELECT {}, EXISTS (SELECT 1 FROM done) \
         FROM (SELECT 1) AS one LEFT JOIN claimed ON true",
        ctes.join(", "),
        columns_of("claimed")
    )
}

/// The values of the statement's parameters.
struct Params<'a> {
    end: &'a RunEnd<'a>,
    status: &'static str,
    names: Vec<&'a str>,
    data: Vec<&'a Json>,
    n: i64,
    channel: &'a str,
    thread_status: Option<&'static str>,
    values: Option<&'a Json>,
    interrupts: Option<&'a Json>,
    thread_error: Option<&'a Json>,
    lease_ms: i64,
    kwargs: Option<SqlJson<&'a Object>>,
}

impl<'a> Params<'a> {
    fn new(q: &'a PostgresRunQueue, end: &'a RunEnd<'a>) -> Result<Self> {
        let state = match end.thread {
            ThreadEnd::Settle(state) => Some(state),
            ThreadEnd::Keep | ThreadEnd::Delete => None,
            other => {
                return Err(Error::invalid(
                    "thread end",
                    format!("{other:?} is not one this queue knows"),
                ));
            }
        };
        Ok(Self {
            end,
            status: end.status.as_str(),
            names: end.events.iter().map(|(n, _)| n.as_str()).collect(),
            data: end.events.iter().map(|(_, d)| d).collect(),
            n: i64::try_from(end.events.len()).unwrap_or(i64::MAX),
            channel: &q.channel,
            thread_status: state.map(|s| s.status.as_str()),
            values: state.map(|s| &s.values),
            interrupts: state.map(|s| &s.interrupts),
            thread_error: state.map(|s| &s.error),
            lease_ms: q.lease_ms(),
            kwargs: end.kwargs.map(SqlJson),
        })
    }

    /// `$1` to `$15`.
    fn list(&self) -> [(&(dyn ToSql + Sync), Type); 15] {
        [
            (&self.end.run_id, Type::TEXT),
            (&self.end.worker, Type::TEXT),
            (&self.status, Type::TEXT),
            (&self.end.error, Type::JSON),
            (&self.end.output, Type::JSON),
            (&self.names, Type::TEXT_ARRAY),
            (&self.data, Type::JSON_ARRAY),
            (&self.n, Type::INT8),
            (&self.channel, Type::TEXT),
            (&self.thread_status, Type::TEXT),
            (&self.values, Type::JSON),
            (&self.interrupts, Type::JSON),
            (&self.thread_error, Type::JSON),
            (&self.lease_ms, Type::INT8),
            (&self.kwargs, Type::JSON),
        ]
    }
}
