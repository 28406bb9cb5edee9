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
    /// Which errors to retry (`None`: those [`default_retry_on`] retries, as LangGraph's
    /// default). Interrupts are never retried.
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
    /// Whether this policy applies to `error` (its `retry_on`, or [`default_retry_on`]).
    fn applies_to(&self, error: &NodeError) -> bool {
        !error.is_signal()
            && match &self.retry_on {
                Some(f) => f(error),
                None => default_retry_on(error),
            }
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

/// The retry policies of a node or task, in order (LangGraph's `retry_policy=` list): a
/// failure is retried by the first policy that applies to its error, after that policy's
/// wait, while the tries so far (counted across policies) are fewer than its
/// `max_attempts`; a failure no policy applies to is final. Built from one policy, a
/// `Vec` or an array. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_graph::{RetryPolicies, RetryPolicy};
/// let policies: RetryPolicies = vec![
///     // Rate limits: up to 5 tries.
///     RetryPolicy {
///         max_attempts: 5,
///         retry_on: Some(Arc::new(|e| e.message.contains("429"))),
///         ..RetryPolicy::default()
///     },
///     // Anything else LangGraph retries by default: 3 tries.
///     RetryPolicy::default(),
/// ]
/// .into();
/// assert_eq!(policies.policies().len(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct RetryPolicies(Arc<[RetryPolicy]>);

impl RetryPolicies {
    /// The policies, in the order they are tried.
    pub fn policies(&self) -> &[RetryPolicy] {
        &self.0
    }

    /// After try `attempt` (1-based) failed with `error`: how long to wait before the next
    /// try, or `None` when the failure is final.
    pub(crate) fn after(&self, attempt: u32, error: &NodeError) -> Option<Duration> {
        let policy = self.0.iter().find(|p| p.applies_to(error))?;
        (attempt < policy.max_attempts).then(|| policy.delay(attempt))
    }
}

/// How long to wait before trying again after try `attempt` (1-based) ended in `result`:
/// `None` when it succeeded, or failed for good (no `retry`, no policy applies, no tries
/// left).
pub(crate) fn wait_after<T>(
    retry: Option<&RetryPolicies>,
    attempt: u32,
    result: &Result<T, NodeError>,
) -> Option<Duration> {
    match (result, retry) {
        (Err(e), Some(policies)) => policies.after(attempt, e),
        _ => None,
    }
}

impl From<RetryPolicy> for RetryPolicies {
    fn from(policy: RetryPolicy) -> Self {
        Self(Arc::from([policy]))
    }
}

impl From<Vec<RetryPolicy>> for RetryPolicies {
    fn from(policies: Vec<RetryPolicy>) -> Self {
        Self(policies.into())
    }
}

impl<const N: usize> From<[RetryPolicy; N]> for RetryPolicies {
    fn from(policies: [RetryPolicy; N]) -> Self {
        Self(Arc::from(policies))
    }
}

/// Python exceptions LangGraph's default does not retry (mistakes and bad data, not passing
/// trouble): `ValueError`, `TypeError`, `ArithmeticError`, `ImportError`, `LookupError`,
/// `NameError`, `SyntaxError`, `RuntimeError`, `ReferenceError`, `StopIteration`,
/// `StopAsyncIteration`, `OSError`, and their built-in subclasses.
const NOT_RETRIED: &[&str] = &[
    "ValueError",
    "UnicodeError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeTranslateError",
    "JSONDecodeError",
    "TypeError",
    "ArithmeticError",
    "ZeroDivisionError",
    "OverflowError",
    "FloatingPointError",
    "ImportError",
    "ModuleNotFoundError",
    "LookupError",
    "KeyError",
    "IndexError",
    "NameError",
    "UnboundLocalError",
    "SyntaxError",
    "IndentationError",
    "TabError",
    "RuntimeError",
    "NotImplementedError",
    "RecursionError",
    "ReferenceError",
    "StopIteration",
    "StopAsyncIteration",
    "OSError",
    "IOError",
    "EnvironmentError",
    "FileNotFoundError",
    "FileExistsError",
    "PermissionError",
    "TimeoutError",
    "IsADirectoryError",
    "NotADirectoryError",
    "InterruptedError",
    "BlockingIOError",
    "ChildProcessError",
    "ProcessLookupError",
];

/// LangGraph's default `retry_on`, for Rust errors: passing trouble is retried, mistakes and
/// bad data are not.
///
/// - An error converted from a Rust error (`?`, [`From`]) is judged by its source chain: a
///   [`std::io::Error`] is retried only when the connection failed (refused, reset, aborted,
///   broken pipe: Python's `ConnectionError`); errors of parsing and conversion
///   (`serde_json::Error`, number, boolean, character and UTF-8 parsing, integer
///   conversion) are not; anything else is.
/// - An error stored as a Python `repr` ([`NodeError::from_repr`], e.g. read from a
///   checkpoint Python wrote) is judged by its exception class, as LangGraph judges it:
///   `ValueError('…')`, `KeyError('…')`, `OSError(…)` and the rest of LangGraph's list are
///   not retried, `ConnectionError` and its subclasses are.
/// - Any other error ([`NodeError::new`]) is retried, as LangGraph retries a plain
///   `Exception`.
///
/// Interrupts and commands for a parent graph are never retried.
pub fn default_retry_on(error: &NodeError) -> bool {
    if error.is_signal() {
        return false;
    }
    let Some(mut source) = error.source() else {
        let class = error.message.split('(').next().unwrap_or_default();
        return !NOT_RETRIED.contains(&class);
    };
    loop {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset,
            };
            return matches!(
                io.kind(),
                ConnectionRefused | ConnectionReset | ConnectionAborted | BrokenPipe
            );
        }
        if is_bad_data(source) {
            return false;
        }
        match source.source() {
            Some(next) => source = next,
            None => return true,
        }
    }
}

/// Errors of parsing and conversion: Python's `ValueError`s.
fn is_bad_data(e: &(dyn std::error::Error + 'static)) -> bool {
    e.is::<serde_json::Error>()
        || e.is::<std::num::ParseIntError>()
        || e.is::<std::num::ParseFloatError>()
        || e.is::<std::num::TryFromIntError>()
        || e.is::<std::str::ParseBoolError>()
        || e.is::<std::char::ParseCharError>()
        || e.is::<std::str::Utf8Error>()
        || e.is::<std::string::FromUtf8Error>()
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
        let one = RetryPolicies::from(p);
        assert!(one.after(1, &NodeError::new("x")).is_some());
        assert!(one.after(3, &NodeError::new("x")).is_none());
    }

    fn quick(max_attempts: u32, on: Option<RetryOn>) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            initial_interval: Duration::from_millis(7),
            jitter: false,
            retry_on: on,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn the_first_policy_that_applies_decides_and_tries_count_across_policies() {
        let policies = RetryPolicies::from([
            quick(
                2,
                Some(Arc::new(|e: &NodeError| e.message.contains("flaky"))),
            ),
            quick(4, None),
        ]);
        let flaky = NodeError::new("flaky");
        let other = NodeError::new("other");
        assert_eq!(policies.after(1, &flaky), Some(Duration::from_millis(7)));
        // The first policy applies: it allows two tries in all.
        assert_eq!(policies.after(2, &flaky), None);
        // Another error falls to the second policy, which allows four.
        assert_eq!(policies.after(2, &other), Some(Duration::from_millis(14)));
        assert_eq!(policies.after(4, &other), None);
        // No policy applies: final at once.
        let value_error = NodeError::from_repr("ValueError('bad')");
        assert_eq!(policies.after(1, &value_error), None);
    }

    #[test]
    fn the_default_filter_retries_passing_trouble_only() {
        use std::io::{Error, ErrorKind};
        assert!(default_retry_on(&NodeError::new("anything")));
        assert!(default_retry_on(&NodeError::from_repr(
            "ConnectionError('down')"
        )));
        assert!(default_retry_on(&NodeError::from_repr(
            "RateLimited('429')"
        )));
        for class in [
            "ValueError",
            "KeyError",
            "TypeError",
            "OSError",
            "TimeoutError",
        ] {
            let e = NodeError::from_repr(format!("{class}('x')"));
            assert!(!default_retry_on(&e), "{class}");
        }
        assert!(default_retry_on(&NodeError::from(Error::from(
            ErrorKind::ConnectionRefused
        ))));
        assert!(!default_retry_on(&NodeError::from(Error::from(
            ErrorKind::NotFound
        ))));
        let parse = "x".parse::<i64>().unwrap_err();
        assert!(!default_retry_on(&NodeError::from(parse)));
        let json = serde_json::from_str::<i64>("{").unwrap_err();
        assert!(!default_retry_on(&NodeError::from(json)));
        assert!(default_retry_on(&NodeError::from(std::fmt::Error)));
    }
}
