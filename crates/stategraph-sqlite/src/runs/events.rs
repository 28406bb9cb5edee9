//! Each run's stream events: appended by the lease holder, read from any number, purged
//! after the run ended.

use rusqlite::{OptionalExtension, params};

use super::records::json;
use super::*;
use crate::error::db;

/// Events as stored: their names and their data as JSON text.
pub(super) fn encode(events: &[(String, Json)]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|(name, data)| (name.clone(), data.to_string()))
        .collect()
}

/// Up to `limit` events of run `run_id` after number `after_seq`, in order.
pub(super) fn after(
    conn: &Connection,
    run_id: &str,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<RunEvent>> {
    let reading = db("reading a run's events");
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, event, data FROM stategraph_run_events \
             WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(&reading)?;
    let rows = stmt
        .query_map(params![run_id, after_seq, limit], |r| {
            Ok(RunEvent::new(
                r.get(0)?,
                r.get::<_, String>(1)?,
                json(r, 2)?,
            ))
        })
        .map_err(&reading)?;
    rows.collect::<rusqlite::Result<_>>().map_err(reading)
}

impl Change<'_> {
    /// Appends `events` to running run `run_id` if `worker` holds it: the number of the last
    /// (of the run's last event, when `events` is empty).
    pub(super) fn append(
        &mut self,
        run_id: &str,
        worker: &str,
        events: &[(String, String)],
    ) -> Result<Option<i64>> {
        let n = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let last: Option<i64> = self
            .conn
            .prepare_cached(
                "UPDATE stategraph_runs SET events = events + ?3 \
                 WHERE run_id = ?1 AND worker = ?2 AND status = 'running' RETURNING events",
            )
            .and_then(|mut s| {
                s.query_row(params![run_id, worker, n], |r| r.get(0))
                    .optional()
            })
            .map_err(db("appending events"))?;
        if let Some(last) = last {
            self.insert_events(run_id, last, events)?;
        }
        Ok(last)
    }

    /// Stores `events` of run `run_id` as the ones numbered up to `last`, announcing the last.
    pub(super) fn insert_events(
        &mut self,
        run_id: &str,
        last: i64,
        events: &[(String, String)],
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let first = last - i64::try_from(events.len()).unwrap_or(i64::MAX) + 1;
        let storing = db("storing events");
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT INTO stategraph_run_events (run_id, seq, event, data) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(&storing)?;
        for (seq, (name, data)) in (first..).zip(events) {
            stmt.execute(params![run_id, seq, name, data])
                .map_err(&storing)?;
        }
        self.note(Notification::Event {
            run_id: run_id.to_owned(),
            seq: last,
        });
        Ok(())
    }

    /// Purges the events of up to `limit` runs that ended before `before` (oldest end first),
    /// deleting the temporary ones: how many runs it purged. Each run is counted once: its
    /// row is marked `purged`.
    pub(super) fn purge(&mut self, before: i64, limit: u32) -> Result<u64> {
        let purging = db("purging events");
        let purged: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "UPDATE stategraph_runs SET purged = 1 WHERE seq IN ( \
                       SELECT seq FROM stategraph_runs WHERE purged = 0 AND ended_at < ?1 \
                       ORDER BY ended_at, seq LIMIT ?2) \
                     RETURNING run_id",
                )
                .map_err(&purging)?;
            let rows = stmt
                .query_map(params![before, limit], |r| r.get(0))
                .map_err(&purging)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&purging)?
        };
        if purged.is_empty() {
            return Ok(0);
        }
        let ids = Json::from(purged.clone()).to_string();
        for sql in [
            "DELETE FROM stategraph_run_events WHERE run_id IN (SELECT value FROM json_each(?1))",
            "DELETE FROM stategraph_runs WHERE temporary AND run_id IN \
             (SELECT value FROM json_each(?1))",
        ] {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut s| s.execute([&ids]))
                .map_err(&purging)?;
        }
        Ok(purged.len() as u64)
    }
}
