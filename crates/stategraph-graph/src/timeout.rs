//! Node and task timeouts (LangGraph's `TimeoutPolicy`): a hard cap on one attempt's wall
//! time, and an idle cap on the time it may go without progress, which
//! [`NodeContext::heartbeat`](crate::NodeContext::heartbeat) (and, by default, the node's
//! stream output and task calls) pushes back. An attempt that runs out is cancelled — its
//! future dropped, so none of its writes are kept — and fails with a [`NodeTimeoutError`],
//! which the default retry filter retries.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::NodeError;

/// Which signals push an idle timeout back (LangGraph's `refresh_on`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefreshOn {
    /// Explicit heartbeats, and the node's progress: what it streams (`write_custom`,
    /// `send_message_chunk`) and the tasks it calls. LangGraph's `"auto"`.
    #[default]
    Auto,
    /// Explicit [`heartbeat`](crate::NodeContext::heartbeat)s only. LangGraph's `"heartbeat"`.
    Heartbeat,
}

/// How long one attempt of a node or task may take (LangGraph's `TimeoutPolicy`). A plain
/// [`Duration`] converts into a run timeout, as a number of seconds does in Python.
///
/// ```
/// use std::time::Duration;
/// use stategraph_graph::{RefreshOn, TimeoutPolicy};
///
/// let hard: TimeoutPolicy = Duration::from_secs(30).into();
/// assert_eq!(hard.run_timeout, Some(Duration::from_secs(30)));
/// let idle = TimeoutPolicy::idle(Duration::from_secs(5)).refresh_on(RefreshOn::Heartbeat);
/// assert_eq!((idle.run_timeout, idle.idle_timeout), (None, Some(Duration::from_secs(5))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimeoutPolicy {
    /// The hard cap on one attempt's wall time; never pushed back.
    pub run_timeout: Option<Duration>,
    /// The longest one attempt may go without progress.
    pub idle_timeout: Option<Duration>,
    /// What counts as progress for `idle_timeout`.
    pub refresh_on: RefreshOn,
}

impl TimeoutPolicy {
    /// A hard cap of `limit` on each attempt.
    pub fn run(limit: Duration) -> Self {
        Self {
            run_timeout: Some(limit),
            idle_timeout: None,
            refresh_on: RefreshOn::Auto,
        }
    }

    /// At most `limit` without progress, in each attempt.
    pub fn idle(limit: Duration) -> Self {
        Self {
            run_timeout: None,
            idle_timeout: Some(limit),
            refresh_on: RefreshOn::Auto,
        }
    }

    /// This policy with a hard cap of `limit` as well.
    pub fn with_run_timeout(mut self, limit: Duration) -> Self {
        self.run_timeout = Some(limit);
        self
    }

    /// This policy with an idle cap of `limit` as well.
    pub fn with_idle_timeout(mut self, limit: Duration) -> Self {
        self.idle_timeout = Some(limit);
        self
    }

    /// This policy, with `refresh` deciding what pushes the idle timeout back.
    pub fn refresh_on(mut self, refresh: RefreshOn) -> Self {
        self.refresh_on = refresh;
        self
    }
}

impl From<Duration> for TimeoutPolicy {
    fn from(limit: Duration) -> Self {
        Self::run(limit)
    }
}

/// Which of a [`TimeoutPolicy`]'s limits an attempt ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutKind {
    /// `idle_timeout`: too long without progress.
    Idle,
    /// `run_timeout`: too long in all.
    Run,
}

/// A node or task attempt that ran out of time (LangGraph's `NodeTimeoutError`; stored in
/// an `__error__` write as Python stores it, `NodeTimeoutError("Node 'x' exceeded …")`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeTimeoutError {
    /// The node (or task) that timed out.
    pub node: String,
    /// How long the attempt had run.
    pub elapsed: Duration,
    /// Which limit it ran into.
    pub kind: TimeoutKind,
    /// The policy's run timeout.
    pub run_timeout: Option<Duration>,
    /// The policy's idle timeout.
    pub idle_timeout: Option<Duration>,
}

impl fmt::Display for NodeTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let elapsed = self.elapsed.as_secs_f64();
        match self.kind {
            TimeoutKind::Idle => write!(
                f,
                "Node '{}' exceeded its idle timeout of {:.3}s without making progress \
                 (elapsed: {elapsed:.3}s).",
                self.node,
                self.idle_timeout.unwrap_or_default().as_secs_f64()
            ),
            TimeoutKind::Run => write!(
                f,
                "Node '{}' exceeded its run timeout of {:.3}s (elapsed: {elapsed:.3}s).",
                self.node,
                self.run_timeout.unwrap_or_default().as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for NodeTimeoutError {}

/// One attempt's progress clock: when it last made progress, read by its idle watchdog and
/// pushed forward by heartbeats (and, under [`RefreshOn::Auto`], by its other progress).
#[derive(Debug)]
pub(crate) struct Progress {
    start: Instant,
    /// Nanoseconds from `start` to the last progress.
    last: AtomicU64,
    refresh_on: RefreshOn,
}

impl Progress {
    fn new(refresh_on: RefreshOn) -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            refresh_on,
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    /// An explicit heartbeat.
    pub(crate) fn heartbeat(&self) {
        self.touch();
    }

    /// Progress the node made on its own (stream output, a task call): counts under
    /// [`RefreshOn::Auto`] only.
    pub(crate) fn progressed(&self) {
        if self.refresh_on == RefreshOn::Auto {
            self.touch();
        }
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }
}

/// The progress clock a new attempt under `policy` reports to (`None`: no idle timeout, so
/// nothing to report).
pub(crate) fn clock(policy: Option<&TimeoutPolicy>) -> Option<Arc<Progress>> {
    let policy = policy?;
    policy.idle_timeout?;
    Some(Arc::new(Progress::new(policy.refresh_on)))
}

/// Runs one attempt of `node` under `policy`, its progress reported to `progress` (from
/// [`clock`]): its output, or a [`NodeTimeoutError`] once a limit passes (the attempt is
/// dropped then, cancelling what it was doing).
pub(crate) async fn attempt<T>(
    node: &str,
    policy: Option<&TimeoutPolicy>,
    progress: Option<&Progress>,
    work: impl Future<Output = Result<T, NodeError>>,
) -> Result<T, NodeError> {
    let Some(policy) = policy else {
        return work.await;
    };
    let start = Instant::now();
    let run_deadline = policy.run_timeout.map(|limit| start + limit);
    tokio::pin!(work);
    loop {
        let idle_deadline = match (policy.idle_timeout, progress) {
            (Some(limit), Some(p)) => Some(p.last() + limit),
            _ => None,
        };
        let (deadline, kind) = match (run_deadline, idle_deadline) {
            (Some(run), Some(idle)) if idle < run => (idle, TimeoutKind::Idle),
            (Some(run), _) => (run, TimeoutKind::Run),
            (None, Some(idle)) => (idle, TimeoutKind::Idle),
            (None, None) => return work.await,
        };
        tokio::select! {
            biased;
            out = &mut work => return out,
            () = tokio::time::sleep_until(deadline) => {
                // An idle deadline that progress moved since is not reached yet.
                let moved = kind == TimeoutKind::Idle
                    && progress.zip(policy.idle_timeout).is_some_and(|(p, limit)| p.last() + limit > deadline);
                if !moved {
                    return Err(NodeError::from(NodeTimeoutError {
                        node: node.to_owned(),
                        elapsed: start.elapsed(),
                        kind,
                        run_timeout: policy.run_timeout,
                        idle_timeout: policy.idle_timeout,
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_timeout_cancels_and_names_the_node() {
        let policy = TimeoutPolicy::run(Duration::from_millis(100));
        let slow = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(1)
        };
        let e = attempt("slow", Some(&policy), None, slow)
            .await
            .unwrap_err();
        assert!(
            e.message.starts_with(
                "NodeTimeoutError(\"Node 'slow' exceeded its run timeout of 0.100s (elapsed: 0.1"
            ),
            "{}",
            e.message
        );
        let t = e
            .source()
            .and_then(|s| s.downcast_ref::<NodeTimeoutError>())
            .unwrap();
        assert_eq!(
            (t.kind, t.run_timeout),
            (TimeoutKind::Run, Some(Duration::from_millis(100)))
        );
        assert!(
            crate::retry::default_retry_on(&e),
            "timeouts are retried by default"
        );
        let fast = attempt("fast", Some(&policy), None, async { Ok(2) }).await;
        assert_eq!(fast.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_hold_off_an_idle_timeout_but_not_a_run_timeout() {
        let policy = TimeoutPolicy::idle(Duration::from_millis(100))
            .with_run_timeout(Duration::from_secs(1))
            .refresh_on(RefreshOn::Heartbeat);
        let p = clock(Some(&policy)).unwrap();
        // Beats every 50 ms for 500 ms: the idle limit never passes.
        let beating = async {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                p.heartbeat();
            }
            Ok("done")
        };
        assert_eq!(
            attempt("n", Some(&policy), Some(&p), beating)
                .await
                .unwrap(),
            "done"
        );
        // Progress other than heartbeats does not count under `Heartbeat`.
        let p = clock(Some(&policy)).unwrap();
        let chatty = async {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                p.progressed();
            }
            Ok("done")
        };
        let e = attempt("n", Some(&policy), Some(&p), chatty)
            .await
            .unwrap_err();
        assert!(
            e.message.contains("idle timeout of 0.100s"),
            "{}",
            e.message
        );
        // Beating forever still meets the run timeout.
        let p = clock(Some(&policy)).unwrap();
        let forever = async {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                p.heartbeat();
            }
        };
        let e = attempt::<()>("n", Some(&policy), Some(&p), forever)
            .await
            .unwrap_err();
        assert!(e.message.contains("run timeout of 1.000s"), "{}", e.message);
    }
}
