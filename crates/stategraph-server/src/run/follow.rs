//! The one way to read a run, wherever it executes: its events from the run queue's log, in
//! order, woken by the queue's notifications (a slow timer stands in for a lost one), and
//! its outcome once it is over.

use std::time::Duration;

use serde_json::json;
use stategraph_runs::{RunQueue, RunRow, RunStatus};
use tokio::sync::{mpsc, oneshot, watch};

use super::Outcome;
use super::dispatch::RunBell;
use crate::app::AppState;
use crate::stream_event::StreamEvent;

/// How many events one read of the log takes at most.
const BATCH: u32 = 256;

/// How long a reader waits for a notification before it looks at the run anyway (they are
/// wake-ups that may be lost, not the truth).
const SAFETY: Duration = Duration::from_secs(1);

/// How a caller follows a run it just started: the run's bell, taken before the run was
/// enqueued (so nothing the run does is missed and it need not be looked at first), and,
/// when this process executes it, the executor's word of its end.
pub(crate) struct Early {
    pub(crate) bell: watch::Receiver<RunBell>,
    pub(crate) here: Option<oneshot::Receiver<RunRow>>,
}

/// A reader of one run: its bell, whether the run must be looked at (the first time, unless
/// the bell was taken before the run existed, and whenever the bell stayed quiet past
/// [`SAFETY`]), and the word of the executor in this process, while one is awaited.
struct Reader<'a> {
    queue: &'a dyn RunQueue,
    run_id: &'a str,
    bell: watch::Receiver<RunBell>,
    look: bool,
    here: Option<oneshot::Receiver<RunRow>>,
    /// The row the executor here answered with.
    told: Option<RunRow>,
}

impl<'a> Reader<'a> {
    fn new(state: &'a AppState, run_id: &'a str, early: Option<Early>) -> Self {
        let (bell, look, here) = match early {
            Some(e) => (e.bell, false, e.here),
            // Taken before the first read, so that nothing after it is missed.
            None => (state.runs.dispatch.watch_run(run_id), true, None),
        };
        Self {
            queue: state.runs.queue.as_ref(),
            run_id,
            bell,
            look,
            here,
            told: None,
        }
    }

    /// The run's row if it is over (`Some(None)`: deleted). A run executed here is over
    /// when its executor says so (it says nothing when the run is not over: it was given
    /// back, or taken over); otherwise the queue is read, only when the bell says the run
    /// ended or it must be looked at.
    async fn over(&mut self) -> Option<Option<RunRow>> {
        if let Some(row) = self.told.take() {
            return Some(Some(row));
        }
        if self.here.is_some() {
            return None;
        }
        let rung = *self.bell.borrow_and_update();
        if !(rung.ended || self.look) {
            return None;
        }
        self.look = false;
        match self.queue.get(self.run_id).await {
            Ok(Some(row)) if row.status.is_final() => Some(Some(row)),
            Ok(None) => Some(None),
            _ => None,
        }
    }

    /// Waits for the bell, the executor here, or [`SAFETY`].
    async fn wait(&mut self) {
        let (here, bell) = (&mut self.here, &mut self.bell);
        let told = async {
            match here.as_mut() {
                Some(rx) => rx.await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            told = told => {
                self.here = None;
                match told {
                    Some(row) => self.told = Some(row),
                    // Without a word, the executor here did not end the run: look at it.
                    None => self.look = true,
                }
            }
            r = tokio::time::timeout(SAFETY, bell.changed()) => self.look = r.is_err(),
        }
    }
}

/// Sends run `run_id`'s events after number `after` to `tx`, in order, until the run is
/// over and its last event was sent; then answers the run's row (`None` when it was
/// deleted). A receiver that went away does not stop the reading of the run's end.
pub(crate) async fn events(
    state: &AppState,
    run_id: &str,
    mut after: i64,
    tx: &mpsc::Sender<StreamEvent>,
    early: Option<Early>,
) -> Option<RunRow> {
    let mut reader = Reader::new(state, run_id, early);
    loop {
        // Whether it is over is read before its events: the end's last events are in the
        // log once the end is.
        let ended = reader.over().await;
        while !tx.is_closed() {
            let Ok(batch) = reader.queue.events_after(run_id, after, BATCH).await else {
                break;
            };
            let full = batch.len() >= BATCH as usize;
            for e in batch {
                after = e.seq;
                let seq = u64::try_from(e.seq).unwrap_or_default();
                let _ = tx
                    .send(StreamEvent::new(run_id, seq, e.event, e.data))
                    .await;
            }
            if !full {
                break;
            }
        }
        if let Some(row) = ended {
            return row;
        }
        reader.wait().await;
    }
}

/// Run `run_id`'s row once it is over (`None`: it was deleted), without its events.
pub(crate) async fn done(state: &AppState, run_id: &str, early: Option<Early>) -> Option<RunRow> {
    let mut reader = Reader::new(state, run_id, early);
    loop {
        if let Some(row) = reader.over().await {
            return row;
        }
        reader.wait().await;
    }
}

/// Waits up to `limit` (forever with `None`) for run `run_id` to be over.
pub(crate) async fn settled(state: &AppState, run_id: &str, limit: Option<Duration>) {
    match limit {
        Some(l) => {
            let _ = tokio::time::timeout(l, done(state, run_id, None)).await;
        }
        None => {
            done(state, run_id, None).await;
        }
    }
}

/// How a run that is over ended, as `runs/wait` reads it: what it answered, or (a run ended
/// by something else than its executor: a cancel while pending, its last lease running out)
/// its error, or its thread's values.
pub(crate) async fn outcome(state: &AppState, row: Option<RunRow>) -> Outcome {
    let Some(row) = row else {
        return Outcome {
            values: json!({}),
            interrupts: Vec::new(),
            error: Some(json!({ "error": "RuntimeError", "message": "the run was deleted" })),
        };
    };
    if let Some(answer) = row.output {
        return Outcome::from_wait_json(answer);
    }
    if row.status == RunStatus::Error {
        return Outcome {
            values: json!({}),
            interrupts: Vec::new(),
            error: Some(row.error.unwrap_or_else(
                || json!({ "error": "RuntimeError", "message": "the run's workers were lost" }),
            )),
        };
    }
    let values = state
        .runs
        .queue
        .threads(std::slice::from_ref(&row.thread_id))
        .await
        .ok()
        .and_then(|t| t.into_iter().next())
        .and_then(|t| t.state)
        .map_or_else(|| json!({}), |s| s.values);
    Outcome {
        values: if values.is_null() { json!({}) } else { values },
        interrupts: Vec::new(),
        error: None,
    }
}
