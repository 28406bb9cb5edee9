//! [`InMemoryRunQueue`]: the run queue of one process.

mod inner;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value as Json;
use tokio::sync::mpsc;

use super::{
    CLAIM_RETENTION, CancelAction, CancelOutcome, DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS, Deletion,
    Enqueued, Expired, Finished, Lease, Multitask, NewRun, Notification, Notifications, OnceKeys,
    RunEnd, RunEvent, RunEvents, RunQuery, RunQueue, RunRow, RunStatus, ThreadEnd, ThreadRow,
    ThreadState, check_id, duplicate, lease_expired_error, rejected,
};
use crate::Result;
use inner::Inner;

/// How many notifications a subscriber buffers; beyond that it misses the newest (they are
/// wake-ups: whoever reads the queue again sees what they announced).
const BUFFER: usize = 1024;

/// How many claimed keys a queue holds before it starts forgetting those older than
/// [`CLAIM_RETENTION`].
const CLAIM_SWEEP: usize = 1024;

/// A [`RunQueue`] in the memory of one process: for a server that runs as one process, and
/// tests. Its runs, and the states of the threads they ran on, are lost with the process.
/// Cheap to clone: clones share the queue.
#[derive(Clone)]
pub struct InMemoryRunQueue {
    inner: Arc<Mutex<Inner>>,
    lease: Duration,
    max_attempts: u32,
}

impl std::fmt::Debug for InMemoryRunQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryRunQueue")
            .field("lease", &self.lease)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryRunQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryRunQueue {
    /// An empty queue with a [`DEFAULT_LEASE`] and [`DEFAULT_MAX_ATTEMPTS`].
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner::default())),
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// With another lease (at least a millisecond).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// With another number of claims per run (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A claim for `worker` (of `run_id` only, if given) in `inner`.
    fn claim_in(&self, inner: &mut Inner, worker: &str, run_id: Option<&str>) -> Option<RunRow> {
        let now = SystemTime::now();
        let id = match run_id {
            Some(id) => {
                let run = inner.runs.get(id)?;
                inner.claimable(run, now).then(|| id.to_owned())?
            }
            None => inner.next_claimable(now)?,
        };
        inner.take(&id, worker, self.lease)
    }
}

#[async_trait]
impl RunEvents for InMemoryRunQueue {
    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>> {
        let mut inner = self.lock();
        if inner.held(run_id, worker).is_none() {
            return Ok(None);
        }
        Ok(Some(inner.append(run_id, events)))
    }

    async fn events_after(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<RunEvent>> {
        let inner = self.lock();
        let Some(log) = inner.events.get(run_id) else {
            return Ok(Vec::new());
        };
        // Events are numbered from 1 without gaps: event `n` is at index `n - 1`.
        let start = usize::try_from(after_seq.max(0)).unwrap_or(usize::MAX);
        Ok(log
            .iter()
            .skip(start)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    /// Appending costs no commit: events are appended as they come.
    fn batch_delay(&self) -> Duration {
        Duration::ZERO
    }
}

#[async_trait]
impl OnceKeys for InMemoryRunQueue {
    async fn claim_once(&self, key: &str) -> Result<bool> {
        check_id("claim key", key)?;
        let now = SystemTime::now();
        let mut inner = self.lock();
        // Forget old keys now and then: at most as often as the keys doubled since.
        if inner.claimed.len() >= CLAIM_SWEEP && inner.claimed.len().is_power_of_two() {
            inner
                .claimed
                .retain(|_, at| now.duration_since(*at).unwrap_or_default() < CLAIM_RETENTION);
        }
        if inner.claimed.contains_key(key) {
            return Ok(false);
        }
        inner.claimed.insert(key.to_owned(), now);
        Ok(true)
    }
}

#[async_trait]
impl RunQueue for InMemoryRunQueue {
    fn lease(&self) -> Duration {
        self.lease
    }

    async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        run.check()?;
        let mut inner = self.lock();
        if inner.runs.contains_key(&run.run_id) {
            return Err(duplicate(&run.run_id));
        }
        let mut done = Enqueued::default();
        match run.multitask {
            Multitask::Enqueue => {}
            Multitask::Reject => {
                let busy = inner
                    .running
                    .get(&run.thread_id)
                    .cloned()
                    .map(|id| (id, RunStatus::Running))
                    .or_else(|| {
                        inner
                            .pending_of(&run.thread_id)
                            .into_iter()
                            .next()
                            .map(|id| (id, RunStatus::Pending))
                    });
                if let Some((busy, status)) = busy {
                    return Err(rejected(&run.thread_id, &run.run_id, &busy, status));
                }
            }
            Multitask::Interrupt | Multitask::Rollback => {
                let action = run.multitask.cancel_action().unwrap_or_default();
                for id in inner.pending_of(&run.thread_id) {
                    match action {
                        CancelAction::Interrupt => inner.end(&id, RunStatus::Interrupted, None),
                        CancelAction::Rollback => inner.remove_pending(&id),
                    }
                    done.ended.push(id);
                }
                if let Some(id) = inner.running.get(&run.thread_id).cloned() {
                    inner.signal(&id, action, "");
                    done.signalled.push(id);
                }
            }
        }
        done.first = !inner.busy(&run.thread_id);
        inner.next_seq += 1;
        let seq = inner.next_seq;
        let now = SystemTime::now();
        let row = RunRow::pending(&run, seq, self.max_attempts, now);
        let claimable = inner.claimable(&row, now);
        inner.insert(row);
        if let Some(worker) = &run.claim_for
            && claimable
        {
            done.claimed = inner.take(&run.run_id, worker, self.lease);
        }
        inner.notify(Notification::Enqueued {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            claimable: claimable && done.claimed.is_none(),
        });
        Ok(done)
    }

    async fn claim(&self, worker: &str, run_id: Option<&str>) -> Result<Option<RunRow>> {
        let mut inner = self.lock();
        Ok(self.claim_in(&mut inner, worker, run_id))
    }

    async fn heartbeat(&self, run_id: &str, worker: &str) -> Result<Lease> {
        let mut inner = self.lock();
        let Some(run) = inner.held(run_id, worker) else {
            return Ok(Lease::lost());
        };
        let now = SystemTime::now();
        run.lease_until = Some(now + self.lease);
        run.updated_at = now;
        Ok(Lease::held(run.cancel).with_reason(run.cancel_reason.clone()))
    }

    async fn finish(&self, end: RunEnd<'_>) -> Result<Finished> {
        end.check()?;
        let mut inner = self.lock();
        let held = inner.held(end.run_id, end.worker).is_some();
        if held && end.is_release() {
            if let Some(run) = inner.runs.get_mut(end.run_id) {
                // The attempt given back does not count.
                run.max_attempts = run.max_attempts.saturating_add(1);
            }
            inner.requeue(end.run_id);
        } else if held {
            inner.append(end.run_id, end.events);
            let thread_id = inner.runs.get_mut(end.run_id).map(|run| {
                run.output = end.output.cloned();
                if let Some(kwargs) = end.kwargs {
                    run.kwargs = kwargs.clone();
                }
                run.thread_id.clone()
            });
            inner.end(end.run_id, end.status, end.error.cloned());
            if let Some(thread_id) = thread_id {
                match end.thread {
                    ThreadEnd::Keep => {}
                    ThreadEnd::Settle(state) => {
                        inner
                            .states
                            .insert(thread_id, (state.clone(), SystemTime::now()));
                    }
                    ThreadEnd::Delete => {
                        inner.states.remove(&thread_id);
                    }
                }
            }
            if end.delete {
                inner.remove(end.run_id);
            }
        }
        let next = if end.claim_next {
            self.claim_in(&mut inner, end.worker, None)
        } else {
            None
        };
        Ok(Finished::new(held, next))
    }

    async fn requeue_expired(&self) -> Result<Vec<Expired>> {
        let mut inner = self.lock();
        let now = SystemTime::now();
        let expired: Vec<String> = inner
            .runs
            .values()
            .filter(|r| {
                r.status == RunStatus::Running && r.lease_until.is_some_and(|until| until < now)
            })
            .map(|r| r.run_id.clone())
            .collect();
        let mut out = Vec::new();
        for id in expired {
            let Some(run) = inner.runs.get(&id) else {
                continue;
            };
            let (thread, attempt, max, cancel) = (
                run.thread_id.clone(),
                run.attempt,
                run.max_attempts,
                run.cancel,
            );
            let status = if cancel.is_some() {
                RunStatus::Interrupted
            } else if attempt >= max {
                RunStatus::Error
            } else {
                RunStatus::Pending
            };
            match status {
                RunStatus::Pending => inner.requeue(&id),
                RunStatus::Error => {
                    let error = lease_expired_error(attempt, max);
                    inner.end(&id, status, Some(error.clone()));
                    inner.fail_thread(&thread, error);
                }
                _ => inner.end(&id, status, None),
            }
            out.push(Expired::new(id, thread, status));
        }
        Ok(out)
    }

    async fn request_cancel(
        &self,
        run_id: &str,
        action: CancelAction,
        reason: &str,
    ) -> Result<CancelOutcome> {
        let mut inner = self.lock();
        let Some(status) = inner.runs.get(run_id).map(|r| r.status) else {
            return Ok(CancelOutcome::NotFound);
        };
        Ok(match status {
            RunStatus::Pending => {
                match action {
                    CancelAction::Interrupt => inner.end(run_id, RunStatus::Interrupted, None),
                    CancelAction::Rollback => inner.remove_pending(run_id),
                }
                CancelOutcome::Ended
            }
            RunStatus::Running => {
                inner.signal(run_id, action, reason);
                CancelOutcome::Signalled
            }
            done => CancelOutcome::AlreadyFinished(done),
        })
    }

    async fn list(&self, query: &RunQuery) -> Result<Vec<RunRow>> {
        let inner = self.lock();
        let runs: Vec<RunRow> = match (&query.run_ids, &query.thread_id) {
            (Some(ids), _) => ids
                .iter()
                .filter_map(|id| inner.runs.get(id))
                .cloned()
                .collect(),
            (None, Some(thread)) => inner
                .by_thread
                .get(thread)
                .map(|runs| {
                    runs.values()
                        .filter_map(|id| inner.runs.get(id))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            (None, None) => inner.runs.values().cloned().collect(),
        };
        Ok(query.apply(runs))
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self.lock().runs.get(run_id).cloned())
    }

    async fn delete(&self, what: Deletion<'_>) -> Result<u64> {
        let mut inner = self.lock();
        let not_running = |r: &RunRow| r.status != RunStatus::Running;
        Ok(match what {
            Deletion::Run(id) => match inner.runs.get(id) {
                Some(run) if not_running(run) => u64::from(inner.remove(id).is_some()),
                _ => 0,
            },
            Deletion::Thread(thread) => {
                let ids: Vec<String> = inner
                    .by_thread
                    .get(thread)
                    .map(|runs| runs.values().cloned().collect())
                    .unwrap_or_default();
                let mut deleted = 0;
                for id in ids {
                    if inner.runs.get(&id).is_some_and(not_running) && inner.remove(&id).is_some() {
                        deleted += 1;
                    }
                }
                inner.states.remove(thread);
                deleted
            }
            Deletion::EventsEndedBefore {
                ended_before,
                limit,
            } => {
                let mut purged = 0;
                while purged < u64::from(limit) {
                    match inner.ended.front() {
                        Some((at, _)) if *at < ended_before => {}
                        _ => break,
                    }
                    let Some((_, id)) = inner.ended.pop_front() else {
                        break;
                    };
                    let Some(run) = inner.runs.get(&id) else {
                        continue;
                    };
                    if !run.status.is_final() {
                        continue;
                    }
                    if run.temporary {
                        inner.remove(&id);
                    } else {
                        inner.events.remove(&id);
                    }
                    purged += 1;
                }
                purged
            }
        })
    }

    async fn threads(&self, thread_ids: &[String]) -> Result<Vec<ThreadRow>> {
        let inner = self.lock();
        Ok(thread_ids
            .iter()
            .filter_map(|id| inner.thread(id))
            .collect())
    }

    async fn set_thread(
        &self,
        thread_id: &str,
        state: &ThreadState,
        if_idle: bool,
    ) -> Result<bool> {
        check_id("thread id", thread_id)?;
        let mut inner = self.lock();
        if if_idle && inner.busy(thread_id) {
            return Ok(false);
        }
        inner
            .states
            .insert(thread_id.to_owned(), (state.clone(), SystemTime::now()));
        Ok(true)
    }

    async fn subscribe(&self) -> Result<Notifications> {
        let (sender, receiver) = mpsc::channel(BUFFER);
        self.lock().subscribers.push(sender);
        Ok(Notifications::new(receiver, ()))
    }
}
