//! [`InMemoryRunQueue`]: the run queue of one process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value as Json;
use tokio::sync::mpsc;

use super::*;

/// How many notifications a subscriber buffers; beyond that it misses the newest (they are
/// wake-ups: whoever reads the queue again sees what they announced).
const BUFFER: usize = 1024;

/// How many finished runs (with their events) a queue keeps unless told otherwise
/// ([`InMemoryRunQueue::keep_finished`]); the oldest finished go first beyond it.
pub const DEFAULT_KEEP_FINISHED: usize = 10_000;

/// How many claimed keys a queue holds before it starts forgetting those older than
/// [`CLAIM_RETENTION`].
const CLAIM_SWEEP: usize = 1024;

/// A [`RunQueue`] in the memory of one process: for the embedded server and tests. Its runs
/// are lost with the process. Cheap to clone: clones share the queue.
#[derive(Clone)]
pub struct InMemoryRunQueue {
    inner: Arc<Mutex<Inner>>,
    lease: Duration,
    max_attempts: u32,
}

#[derive(Default)]
struct Inner {
    runs: HashMap<String, RunRow>,
    events: HashMap<String, Vec<RunEvent>>,
    /// Pending runs by queue position.
    pending: BTreeMap<i64, String>,
    /// Each thread's runs by queue position.
    threads: HashMap<String, BTreeMap<i64, String>>,
    /// Finished runs, oldest first (some may be gone already), and how many to keep.
    finished: std::collections::VecDeque<String>,
    keep_finished: usize,
    /// The running run of each thread that has one.
    running: HashMap<String, String>,
    next_seq: i64,
    subscribers: Vec<mpsc::Sender<Notification>>,
    /// Keys taken by `claim_once`, and when.
    claimed: HashMap<String, SystemTime>,
}

impl fmt::Debug for InMemoryRunQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
            inner: Arc::new(Mutex::new(Inner {
                keep_finished: DEFAULT_KEEP_FINISHED,
                ..Inner::default()
            })),
            lease: DEFAULT_LEASE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// Keeps the `n` runs that finished last, with their events (default
    /// [`DEFAULT_KEEP_FINISHED`]); older finished runs are forgotten, so that a long-lived
    /// process does not keep every run it ever ran.
    pub fn keep_finished(self, n: usize) -> Self {
        self.lock().keep_finished = n;
        self
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
}

impl Inner {
    fn notify(&mut self, n: Notification) {
        self.subscribers.retain(|s| !s.is_closed());
        for s in &self.subscribers {
            let _ = s.try_send(n.clone());
        }
    }

    /// Whether pending run `seq` of `thread` is next on its thread.
    fn is_next(&self, seq: i64, thread: &str) -> bool {
        !self.running.contains_key(thread)
            && !self
                .threads
                .get(thread)
                .is_some_and(|runs| runs.range(..seq).any(|(s, _)| self.pending.contains_key(s)))
    }

    /// Adds a run to the queue.
    fn insert(&mut self, row: RunRow) {
        self.pending.insert(row.seq, row.run_id.clone());
        self.threads
            .entry(row.thread_id.clone())
            .or_default()
            .insert(row.seq, row.run_id.clone());
        self.runs.insert(row.run_id.clone(), row);
    }

    /// Removes run `run_id` and its events.
    fn remove(&mut self, run_id: &str) -> Option<RunRow> {
        let run = self.runs.remove(run_id)?;
        self.pending.remove(&run.seq);
        self.events.remove(run_id);
        if let Some(runs) = self.threads.get_mut(&run.thread_id) {
            runs.remove(&run.seq);
            if runs.is_empty() {
                self.threads.remove(&run.thread_id);
            }
        }
        Some(run)
    }

    /// Notes that run `run_id` finished, forgetting the oldest finished runs beyond the
    /// number kept.
    fn retire(&mut self, run_id: &str) {
        self.finished.push_back(run_id.to_owned());
        while self.finished.len() > self.keep_finished {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            if self.runs.get(&old).is_some_and(|r| r.status.is_final()) {
                self.remove(&old);
            }
        }
    }

    /// Makes pending run `run_id` running for `worker`.
    fn take(&mut self, run_id: &str, worker: &str, lease: Duration) -> Option<ClaimedRun> {
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
        Some(ClaimedRun::new(
            run.run_id.clone(),
            run.thread_id.clone(),
            run.payload.clone(),
            run.attempt,
        ))
    }

    /// The running run `run_id` if `worker` holds it.
    fn held(&mut self, run_id: &str, worker: &str) -> Option<&mut RunRow> {
        self.runs
            .get_mut(run_id)
            .filter(|r| r.status == RunStatus::Running && r.worker.as_deref() == Some(worker))
    }

    /// Ends run `run_id` (running or pending) with `status`, announcing it.
    fn end(&mut self, run_id: &str, status: RunStatus, error: Option<Json>) {
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
        run.updated_at = SystemTime::now();
        self.notify(Notification::Finished {
            run_id: run_id.to_owned(),
            status: Some(status),
        });
        self.retire(run_id);
    }

    /// Deletes pending run `run_id`, announcing it.
    fn remove_pending(&mut self, run_id: &str) {
        if self.remove(run_id).is_some() {
            self.notify(Notification::Finished {
                run_id: run_id.to_owned(),
                status: None,
            });
        }
    }

    /// Sets running run `run_id`'s cancel, announcing it.
    fn signal(&mut self, run_id: &str, action: CancelAction, reason: &str) {
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
    fn pending_of(&self, thread: &str) -> Vec<String> {
        self.threads
            .get(thread)
            .map(|runs| {
                runs.iter()
                    .filter(|(seq, _)| self.pending.contains_key(seq))
                    .map(|(_, id)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[async_trait]
impl RunQueue for InMemoryRunQueue {
    fn lease(&self) -> Duration {
        self.lease
    }

    async fn enqueue(&self, run: NewRun) -> Result<Enqueued> {
        run.check()?;
        if let Some(records) = &run.records {
            records.check_writable_by(self)?;
        }
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
        inner.next_seq += 1;
        let seq = inner.next_seq;
        let row = RunRow::pending(&run, seq, self.max_attempts, SystemTime::now());
        inner.insert(row);
        let next = inner.is_next(seq, &run.thread_id);
        if let Some(worker) = &run.claim_for
            && next
        {
            done.claimed = inner.take(&run.run_id, worker, self.lease);
        }
        inner.notify(Notification::Enqueued {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            claimable: next && done.claimed.is_none(),
        });
        Ok(done)
    }

    async fn claim(&self, worker: &str) -> Result<Option<ClaimedRun>> {
        let mut inner = self.lock();
        let mut seen = BTreeSet::new();
        let mut next = None;
        for id in inner.pending.values() {
            let Some(run) = inner.runs.get(id) else {
                continue;
            };
            if !seen.insert(run.thread_id.as_str()) || inner.running.contains_key(&run.thread_id) {
                continue;
            }
            next = Some(id.clone());
            break;
        }
        Ok(next.and_then(|id| inner.take(&id, worker, self.lease)))
    }

    async fn claim_run(&self, run_id: &str, worker: &str) -> Result<Option<ClaimedRun>> {
        let mut inner = self.lock();
        let Some(run) = inner.runs.get(run_id) else {
            return Ok(None);
        };
        if run.status != RunStatus::Pending || !inner.is_next(run.seq, &run.thread_id) {
            return Ok(None);
        }
        Ok(inner.take(run_id, worker, self.lease))
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

    async fn finish(
        &self,
        run_id: &str,
        worker: &str,
        status: RunStatus,
        error: Option<&Json>,
    ) -> Result<bool> {
        if !status.is_final() {
            return Err(not_final(status));
        }
        let mut inner = self.lock();
        if inner.held(run_id, worker).is_none() {
            return Ok(false);
        }
        inner.end(run_id, status, error.cloned());
        Ok(true)
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
            let (thread, attempt, max, cancel, seq) = (
                run.thread_id.clone(),
                run.attempt,
                run.max_attempts,
                run.cancel,
                run.seq,
            );
            let status = if cancel.is_some() {
                RunStatus::Interrupted
            } else if attempt >= max {
                RunStatus::Error
            } else {
                RunStatus::Pending
            };
            if status == RunStatus::Pending {
                inner.running.remove(&thread);
                if let Some(run) = inner.runs.get_mut(&id) {
                    run.status = RunStatus::Pending;
                    run.lease_until = None;
                    run.updated_at = now;
                }
                inner.pending.insert(seq, id.clone());
                inner.notify(Notification::Requeued {
                    run_id: id.clone(),
                    thread_id: thread.clone(),
                });
            } else {
                let error = (status == RunStatus::Error).then(|| lease_expired_error(attempt, max));
                inner.end(&id, status, error);
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

    async fn append_events(
        &self,
        run_id: &str,
        worker: &str,
        events: &[(String, Json)],
    ) -> Result<Option<i64>> {
        let mut inner = self.lock();
        let Some(run) = inner.held(run_id, worker) else {
            return Ok(None);
        };
        let first = run.events + 1;
        run.events += i64::try_from(events.len()).unwrap_or(i64::MAX);
        let last = run.events;
        let log = inner.events.entry(run_id.to_owned()).or_default();
        for (seq, (name, data)) in (first..).zip(events) {
            log.push(RunEvent::new(seq, name.clone(), data.clone()));
        }
        for seq in first..=last {
            inner.notify(Notification::Event {
                run_id: run_id.to_owned(),
                seq,
            });
        }
        Ok(Some(last))
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

    async fn get(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self.lock().runs.get(run_id).cloned())
    }

    async fn runs_of_thread(&self, thread_id: &str) -> Result<Vec<RunRow>> {
        let inner = self.lock();
        Ok(inner
            .threads
            .get(thread_id)
            .map(|runs| {
                runs.values()
                    .filter_map(|id| inner.runs.get(id).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn busy_threads(&self) -> Result<BTreeSet<String>> {
        let inner = self.lock();
        let mut threads: BTreeSet<String> = inner.running.keys().cloned().collect();
        threads.extend(
            inner
                .pending
                .values()
                .filter_map(|id| inner.runs.get(id).map(|r| r.thread_id.clone())),
        );
        Ok(threads)
    }

    async fn stats(&self) -> Result<QueueStats> {
        let inner = self.lock();
        let oldest = inner
            .pending
            .values()
            .filter_map(|id| inner.runs.get(id))
            .map(|r| r.created_at)
            .min();
        Ok(QueueStats::new(
            inner.pending.len() as u64,
            inner.running.len() as u64,
            oldest,
        ))
    }

    async fn delete(&self, run_id: &str) -> Result<bool> {
        let mut inner = self.lock();
        match inner.runs.get(run_id).map(|r| r.status) {
            None | Some(RunStatus::Running) => Ok(false),
            Some(_) => Ok(inner.remove(run_id).is_some()),
        }
    }

    async fn purge_finished(&self, ended_before: SystemTime, limit: u32) -> Result<u64> {
        let mut inner = self.lock();
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        // Finished runs in the order they finished: the oldest come first.
        let mut doomed = Vec::new();
        for id in &inner.finished {
            if doomed.len() >= limit {
                break;
            }
            if let Some(run) = inner.runs.get(id)
                && run.status.is_final()
                && run.updated_at < ended_before
            {
                doomed.push(id.clone());
            }
        }
        let mut purged = 0;
        for id in &doomed {
            if inner.remove(id).is_some() {
                purged += 1;
            }
        }
        let gone: std::collections::HashSet<&String> = doomed.iter().collect();
        inner.finished.retain(|id| !gone.contains(id));
        Ok(purged)
    }

    async fn subscribe(&self) -> Result<Notifications> {
        let (sender, receiver) = mpsc::channel(BUFFER);
        self.lock().subscribers.push(sender);
        Ok(Notifications::new(receiver, ()))
    }

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
