//! The in-memory queue's state and the changes every operation is made of.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use serde_json::Value as Json;
use tokio::sync::mpsc;

use crate::{
    CancelAction, Notification, RunEvent, RunRow, RunStatus, ThreadRow, ThreadState, ThreadStatus,
};

/// Everything the queue holds.
#[derive(Default)]
pub(super) struct Inner {
    pub(super) runs: HashMap<String, RunRow>,
    pub(super) events: HashMap<String, Vec<RunEvent>>,
    /// Pending runs by queue position.
    pub(super) pending: BTreeMap<i64, String>,
    /// Each thread's runs by queue position.
    pub(super) by_thread: HashMap<String, BTreeMap<i64, String>>,
    /// The running run of each thread that has one.
    pub(super) running: HashMap<String, String>,
    /// What each thread's last run (or state update) left, and when.
    pub(super) states: HashMap<String, (ThreadState, SystemTime)>,
    /// Runs that ended, in the order they did (some may be gone already): what a purge
    /// looks at.
    pub(super) ended: VecDeque<(SystemTime, String)>,
    pub(super) next_seq: i64,
    pub(super) subscribers: Vec<mpsc::Sender<Notification>>,
    /// Keys taken by `claim_once`, and when.
    pub(super) claimed: HashMap<String, SystemTime>,
}

impl Inner {
    pub(super) fn notify(&mut self, n: Notification) {
        self.subscribers.retain(|s| !s.is_closed());
        for s in &self.subscribers {
            let _ = s.try_send(n.clone());
        }
    }

    /// Whether pending run `run` may be claimed at `now`: due, and next on its thread (no
    /// running run, no older due pending run).
    pub(super) fn claimable(&self, run: &RunRow, now: SystemTime) -> bool {
        run.status == RunStatus::Pending
            && run.created_at <= now
            && !self.running.contains_key(&run.thread_id)
            && !self.by_thread.get(&run.thread_id).is_some_and(|runs| {
                runs.range(..run.seq).any(|(seq, id)| {
                    self.pending.contains_key(seq)
                        && self.runs.get(id).is_some_and(|r| r.created_at <= now)
                })
            })
    }

    /// The oldest claimable pending run, if any.
    pub(super) fn next_claimable(&self, now: SystemTime) -> Option<String> {
        self.pending
            .values()
            .filter_map(|id| self.runs.get(id))
            .find(|run| self.claimable(run, now))
            .map(|run| run.run_id.clone())
    }

    /// Whether `thread` has a run pending or running.
    pub(super) fn busy(&self, thread: &str) -> bool {
        self.running.contains_key(thread) || !self.pending_of(thread).is_empty()
    }

    /// Adds a run to the queue.
    pub(super) fn insert(&mut self, row: RunRow) {
        self.pending.insert(row.seq, row.run_id.clone());
        self.by_thread
            .entry(row.thread_id.clone())
            .or_default()
            .insert(row.seq, row.run_id.clone());
        self.runs.insert(row.run_id.clone(), row);
    }

    /// Removes run `run_id` and its events.
    pub(super) fn remove(&mut self, run_id: &str) -> Option<RunRow> {
        let run = self.runs.remove(run_id)?;
        self.pending.remove(&run.seq);
        self.events.remove(run_id);
        if self
            .running
            .get(&run.thread_id)
            .is_some_and(|r| r == run_id)
        {
            self.running.remove(&run.thread_id);
        }
        if let Some(runs) = self.by_thread.get_mut(&run.thread_id) {
            runs.remove(&run.seq);
            if runs.is_empty() {
                self.by_thread.remove(&run.thread_id);
            }
        }
        Some(run)
    }

    /// Makes pending run `run_id` running for `worker`; the claimed row.
    pub(super) fn take(&mut self, run_id: &str, worker: &str, lease: Duration) -> Option<RunRow> {
        let now = SystemTime::now();
        let run = self.runs.get_mut(run_id)?;
        self.pending.remove(&run.seq);
        run.status = RunStatus::Running;
        run.worker = Some(worker.to_owned());
        run.lease_until = Some(now + lease);
        run.attempt += 1;
        run.cancel = None;
        run.cancel_reason.clear();
        run.updated_at = now;
        self.running
            .insert(run.thread_id.clone(), run.run_id.clone());
        Some(run.clone())
    }

    /// The running run `run_id` if `worker` holds it.
    pub(super) fn held(&mut self, run_id: &str, worker: &str) -> Option<&mut RunRow> {
        self.runs
            .get_mut(run_id)
            .filter(|r| r.status == RunStatus::Running && r.worker.as_deref() == Some(worker))
    }

    /// Ends run `run_id` (running or pending) with `status`, announcing it.
    pub(super) fn end(&mut self, run_id: &str, status: RunStatus, error: Option<Json>) {
        let now = SystemTime::now();
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.status == RunStatus::Pending {
            self.pending.remove(&run.seq);
        }
        if run.status == RunStatus::Running {
            self.running.remove(&run.thread_id);
        }
        run.status = status;
        if error.is_some() {
            run.error = error;
        }
        run.lease_until = None;
        run.updated_at = now;
        let thread_id = run.thread_id.clone();
        self.ended.push_back((now, run_id.to_owned()));
        self.notify(Notification::Finished {
            run_id: run_id.to_owned(),
            thread_id,
            status: Some(status),
        });
    }

    /// Puts running run `run_id` back to pending (its lease ran out, or it was given back).
    pub(super) fn requeue(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        self.running.remove(&run.thread_id);
        run.status = RunStatus::Pending;
        run.lease_until = None;
        run.updated_at = SystemTime::now();
        let (seq, thread_id) = (run.seq, run.thread_id.clone());
        self.pending.insert(seq, run_id.to_owned());
        self.notify(Notification::Requeued {
            run_id: run_id.to_owned(),
            thread_id,
        });
    }

    /// Deletes pending run `run_id`, announcing it.
    pub(super) fn remove_pending(&mut self, run_id: &str) {
        if let Some(run) = self.remove(run_id) {
            self.notify(Notification::Finished {
                run_id: run_id.to_owned(),
                thread_id: run.thread_id,
                status: None,
            });
        }
    }

    /// Sets running run `run_id`'s cancel, announcing it.
    pub(super) fn signal(&mut self, run_id: &str, action: CancelAction, reason: &str) {
        if let Some(run) = self.runs.get_mut(run_id) {
            run.cancel = Some(action);
            run.cancel_reason = reason.to_owned();
            run.updated_at = SystemTime::now();
        }
        self.notify(Notification::Cancel {
            run_id: run_id.to_owned(),
            action,
            reason: reason.to_owned(),
        });
    }

    /// The pending runs of `thread`, oldest first.
    pub(super) fn pending_of(&self, thread: &str) -> Vec<String> {
        self.by_thread
            .get(thread)
            .map(|runs| {
                runs.iter()
                    .filter(|(seq, _)| self.pending.contains_key(seq))
                    .map(|(_, id)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Appends events to run `run_id`'s log, numbered after its others; the last number.
    pub(super) fn append(&mut self, run_id: &str, events: &[(String, Json)]) -> i64 {
        let Some(run) = self.runs.get_mut(run_id) else {
            return 0;
        };
        let first = run.events + 1;
        run.events += i64::try_from(events.len()).unwrap_or(i64::MAX);
        let last = run.events;
        let log = self.events.entry(run_id.to_owned()).or_default();
        for (seq, (name, data)) in (first..).zip(events) {
            log.push(RunEvent::new(seq, name.clone(), data.clone()));
        }
        if !events.is_empty() {
            self.notify(Notification::Event {
                run_id: run_id.to_owned(),
                seq: last,
            });
        }
        last
    }

    /// Thread `thread_id` as the queue knows it, if it does.
    pub(super) fn thread(&self, thread_id: &str) -> Option<ThreadRow> {
        let state = self.states.get(thread_id).cloned();
        if state.is_none() && !self.by_thread.contains_key(thread_id) {
            return None;
        }
        Some(ThreadRow::new(thread_id, self.busy(thread_id), state))
    }

    /// The state of `thread_id` after its run failed with `error`: its last values and
    /// interrupts, status `error`.
    pub(super) fn fail_thread(&mut self, thread_id: &str, error: Json) {
        let (values, interrupts) = match self.states.get(thread_id) {
            Some((s, _)) => (s.values.clone(), s.interrupts.clone()),
            None => (Json::Null, Json::Object(serde_json::Map::new())),
        };
        let state = ThreadState::new(ThreadStatus::Error, values, interrupts).error(error);
        self.states
            .insert(thread_id.to_owned(), (state, SystemTime::now()));
    }
}
