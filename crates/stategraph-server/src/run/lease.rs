//! A claimed run's lease while it executes: the heartbeat that keeps it (and hears stop
//! requests, in case their notification was lost), the appender that copies the run's events
//! to the queue's log in batches, and the flag raised when the lease is lost.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;
use stategraph_runs::RunQueue;
use tokio::sync::{mpsc, watch};

use super::{Cancel, Stop};
use crate::app::AppState;

/// The most events sent to the queue's log in one append.
const APPEND_BATCH: usize = 256;

/// A run's lease while it executes.
pub(super) struct Leased {
    /// Where the run's events go, in order.
    pub(super) sink: mpsc::UnboundedSender<(String, Json)>,
    pub(super) lost: watch::Receiver<bool>,
    heartbeat: tokio::task::JoinHandle<()>,
    /// Ends with the events it gathered but did not append (the run ended meanwhile).
    appender: tokio::task::JoinHandle<Vec<(String, Json)>>,
}

impl Leased {
    /// Starts the heartbeat and the appender of run `run_id` held by `worker`.
    pub(super) fn start(state: &Arc<AppState>, run_id: &str, worker: &str) -> Self {
        let queue = Arc::clone(&state.runs.queue);
        let (lost_tx, lost) = watch::channel(false);
        // Events go to the log in order, in batches; a refused append means the lease is gone.
        let (sink, mut events) = mpsc::unbounded_channel::<(String, Json)>();
        let appender = tokio::spawn({
            let (queue, run_id, worker, lost_tx) = (
                Arc::clone(&queue),
                run_id.to_owned(),
                worker.to_owned(),
                lost_tx.clone(),
            );
            async move {
                let delay = queue.batch_delay();
                let mut batch = Vec::new();
                while events.recv_many(&mut batch, APPEND_BATCH).await > 0 {
                    // Gather what comes within the queue's delay: one append (one commit on a
                    // database) for all of it; what is still gathered when the run ends goes
                    // with its end.
                    let until = tokio::time::Instant::now() + delay;
                    while !delay.is_zero() && batch.len() < APPEND_BATCH {
                        let room = APPEND_BATCH - batch.len();
                        match tokio::time::timeout_at(until, events.recv_many(&mut batch, room))
                            .await
                        {
                            Ok(0) => return batch,
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                    if let Ok(None) = queue.append_events(&run_id, &worker, &batch).await {
                        lost_tx.send_replace(true);
                        return Vec::new();
                    }
                    batch.clear();
                }
                batch
            }
        });
        let heartbeat = tokio::spawn({
            let (state, run_id, worker) = (Arc::clone(state), run_id.to_owned(), worker.to_owned());
            async move {
                let lease = queue.lease();
                let mut held_at = Instant::now();
                loop {
                    tokio::time::sleep(lease / 3).await;
                    match queue.heartbeat(&run_id, &worker).await {
                        Ok(l) if !l.held => break,
                        Ok(l) => {
                            held_at = Instant::now();
                            if let Some(action) = l.cancel {
                                let stop = Stop::Cancel(Cancel::of(action, &l.reason));
                                state.runs.dispatch.stop(&run_id, stop);
                            }
                        }
                        Err(_) if held_at.elapsed() >= lease => break,
                        Err(_) => {}
                    }
                }
                lost_tx.send_replace(true);
            }
        });
        Self {
            sink,
            lost,
            heartbeat,
            appender,
        }
    }

    /// Stops the heartbeat and waits until the appender is done: the events it did not
    /// append, for the step that ends the run.
    pub(super) async fn close(self) -> Vec<(String, Json)> {
        self.heartbeat.abort();
        drop(self.sink);
        self.appender.await.unwrap_or_default()
    }

    /// Stops both at once (the lease is lost).
    pub(super) fn abort(self) {
        self.heartbeat.abort();
        self.appender.abort();
    }
}

/// Resolves once `lost` is raised (never if its sender is gone).
pub(super) async fn lost(lost: &mut watch::Receiver<bool>) {
    loop {
        if *lost.borrow_and_update() {
            return;
        }
        if lost.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Says once per process that runs' checkpoint writes are not fenced by their leases (the
/// checkpointer was not given as a fencing one, or is on another database than the queue).
pub(super) fn unfenced_once(queue: &dyn RunQueue) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            queue = ?queue,
            "runs' checkpoint writes are not fenced by their leases (the checkpointer was not \
             given with `fencing_checkpointer`, or is on another database than the run \
             queue): a worker that stalls past its lease may still write a checkpoint after \
             another worker took its run over"
        );
    });
}
