//! Retry policies: how often, and how long apart, a failing node is tried again.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::NodeError;

/// Which errors a policy retries.
pub type RetryOn = Arc<dyn Fn(&NodeError) -> bool + Send + Sync>;

/// LangGraph's `RetryPolicy`: up to `max_attempts` tries, waiting
/// `min(max_interval, initial_interval * backoff_factor^(attempt-1))` between them, plus up to
/// one second of random jitter.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Time before the first retry.
    pub initial_interval: Duration,
    /// Multiplier of the interval after each retry.
    pub backoff_factor: f64,
    /// Longest wait between tries.
    pub max_interval: Duration,
    /// Tries in all, the first included.
    pub max_attempts: u32,
    /// Add up to one second of random wait (spreads out retries of parallel tasks).
    pub jitter: bool,
    /// Which errors to retry (`None`: every error). Interrupts are never retried.
    pub retry_on: Option<RetryOn>,
}

impl Default for RetryPolicy {
    /// LangGraph's defaults: 3 attempts, 0.5 s doubling up to 128 s, with jitter.
    fn default() -> Self {
        Self {
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(128),
            max_attempts: 3,
            jitter: true,
            retry_on: None,
        }
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("max_attempts", &self.max_attempts)
            .field("jitter", &self.jitter)
            .field("retry_on", &self.retry_on.as_ref().map(|_| ".."))
            .finish()
    }
}

impl RetryPolicy {
    /// Whether a failure of try `attempt` (1-based) is tried again.
    pub(crate) fn retries(&self, attempt: u32, error: &NodeError) -> bool {
        attempt < self.max_attempts
            && !error.is_signal()
            && self.retry_on.as_ref().is_none_or(|f| f(error))
    }

    /// How long to wait after failed try `attempt` (1-based).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let secs = self.initial_interval.as_secs_f64() * self.backoff_factor.powi(exp);
        let mut d = Duration::from_secs_f64(secs.min(self.max_interval.as_secs_f64()).max(0.0));
        if self.jitter {
            d += Duration::from_secs_f64(fastrand::f64());
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff() {
        let p = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(1), Duration::from_millis(500));
        assert_eq!(p.delay(2), Duration::from_secs(1));
        assert_eq!(p.delay(30), Duration::from_secs(128));
        assert!(p.retries(1, &NodeError::new("x")));
        assert!(!p.retries(3, &NodeError::new("x")));
    }
}
