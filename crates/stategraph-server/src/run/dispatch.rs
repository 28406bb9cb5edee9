//! One subscription to the run queue per process, turned into what waits in this process:
//! idle worker loops woken when a run may be claimed, readers of a run woken when it has new
//! events or ended, readers of a thread woken when it has a new run, and runs executing here
//! stopped when they are asked to stop — wherever the request was made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use stategraph_runs::{Notification, RunStatus};
use tokio::sync::{Notify, watch};

use super::{Cancel, Stop};
use crate::app::AppState;

/// What a run's readers are told: how often it changed, and whether it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunBell {
    pub(crate) rung: u64,
    pub(crate) ended: bool,
}

/// The wake-ups and stop signals of this process.
#[derive(Default)]
pub(crate) struct Dispatch {
    runs: Mutex<HashMap<String, watch::Sender<RunBell>>>,
    threads: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Wakes one idle worker loop per run that may be claimed now.
    pub(crate) wake: Notify,
    /// The runs executing in this process: how to stop each.
    controls: Mutex<HashMap<String, watch::Sender<Option<Stop>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A receiver of `map`'s sender for `key` (made if missing); senders nobody listens to any
/// more are dropped on the way.
fn watch_in<T: Default>(
    map: &Mutex<HashMap<String, watch::Sender<T>>>,
    key: &str,
) -> watch::Receiver<T> {
    let mut map = lock(map);
    if map.len() > 64 {
        map.retain(|_, s| s.receiver_count() > 0);
    }
    map.entry(key.to_owned())
        .or_insert_with(|| watch::Sender::new(T::default()))
        .subscribe()
}

/// A run executing in this process, registered for stop requests; unregistered on drop.
pub(crate) struct Control<'a> {
    dispatch: &'a Dispatch,
    run_id: String,
    pub(crate) stop: watch::Receiver<Option<Stop>>,
}

impl Drop for Control<'_> {
    fn drop(&mut self) {
        lock(&self.dispatch.controls).remove(&self.run_id);
    }
}

impl Dispatch {
    /// A receiver rung when run `run_id` has new events or ends. Take it before reading the
    /// run, so that nothing that happens meanwhile is missed.
    pub(crate) fn watch_run(&self, run_id: &str) -> watch::Receiver<RunBell> {
        watch_in(&self.runs, run_id)
    }

    /// A receiver rung when thread `thread_id` has a new run, or one of its runs ends.
    pub(crate) fn watch_thread(&self, thread_id: &str) -> watch::Receiver<u64> {
        watch_in(&self.threads, thread_id)
    }

    fn ring_run(&self, run_id: &str, ended: bool) {
        if let Some(s) = lock(&self.runs).get(run_id) {
            s.send_modify(|b| {
                b.rung = b.rung.wrapping_add(1);
                b.ended |= ended;
            });
        }
    }

    fn ring_thread(&self, thread_id: &str) {
        if let Some(s) = lock(&self.threads).get(thread_id) {
            s.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Rings every reader (a subscription was lost: anything may have happened).
    fn ring_all(&self) {
        for s in lock(&self.runs).values() {
            s.send_modify(|b| b.rung = b.rung.wrapping_add(1));
        }
        for s in lock(&self.threads).values() {
            s.send_modify(|n| *n = n.wrapping_add(1));
        }
        self.wake.notify_waiters();
    }

    /// Hands `n` to whatever waits for it here.
    pub(crate) fn deliver(&self, n: &Notification) {
        match n {
            Notification::Enqueued {
                thread_id,
                claimable,
                ..
            } => {
                if *claimable {
                    self.wake.notify_one();
                }
                self.ring_thread(thread_id);
            }
            Notification::Requeued { thread_id, .. } => {
                self.wake.notify_one();
                self.ring_thread(thread_id);
            }
            Notification::Cancel {
                run_id,
                action,
                reason,
            } => {
                self.stop(run_id, Stop::Cancel(Cancel::of(*action, reason)));
            }
            Notification::Event { run_id, .. } => self.ring_run(run_id, false),
            Notification::Finished {
                run_id, thread_id, ..
            } => {
                self.ring_run(run_id, true);
                self.ring_thread(thread_id);
            }
            _ => {}
        }
    }

    /// Registers run `run_id` as executing here.
    pub(crate) fn register(&self, run_id: &str) -> Control<'_> {
        let (tx, stop) = watch::channel(None);
        lock(&self.controls).insert(run_id.to_owned(), tx);
        Control {
            dispatch: self,
            run_id: run_id.to_owned(),
            stop,
        }
    }

    /// Stops run `run_id` if it executes here (the first request wins); whether it does.
    pub(crate) fn stop(&self, run_id: &str, stop: Stop) -> bool {
        match lock(&self.controls).get(run_id) {
            Some(tx) => {
                tx.send_if_modified(|s| {
                    if s.is_none() {
                        *s = Some(stop);
                        true
                    } else {
                        false
                    }
                });
                true
            }
            None => false,
        }
    }

    /// The runs executing here.
    pub(crate) fn running_here(&self) -> Vec<String> {
        lock(&self.controls).keys().cloned().collect()
    }
}

/// Listens to the queue for the process's lifetime: hands each notification to
/// [`Dispatch::deliver`]; after a lost subscription, subscribes again and rings everyone
/// (and stops the runs here whose stop request came meanwhile).
pub(crate) async fn listen(state: Arc<AppState>) {
    let runs = &state.runs;
    loop {
        if let Ok(mut notes) = runs.queue.subscribe().await {
            runs.dispatch.ring_all();
            stops_missed(&state).await;
            while let Some(n) = notes.recv().await {
                runs.dispatch.deliver(&n);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Stops the runs executing here whose stop request the queue holds: one made while this
/// process had no subscription reached it by no notification.
async fn stops_missed(state: &AppState) {
    let runs = &state.runs;
    for run_id in runs.dispatch.running_here() {
        if let Ok(Some(row)) = runs.queue.get(&run_id).await
            && row.status == RunStatus::Running
            && let Some(action) = row.cancel
        {
            runs.dispatch.stop(
                &run_id,
                Stop::Cancel(Cancel::of(action, &row.cancel_reason)),
            );
        }
    }
}
