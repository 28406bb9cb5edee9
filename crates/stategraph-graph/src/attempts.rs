//! How a node, a task or an entrypoint is tried: its retry, timeout and cache policies, and
//! the one loop that runs its tries under them.

use std::future::Future;
use std::sync::Arc;

use crate::error::NodeError;
use crate::retry::{RetryPolicies, wait_after};
use crate::timeout::{Progress, TimeoutPolicy};

/// A node's (or task's) retry, timeout and cache policies.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attempts {
    pub(crate) retry: Option<RetryPolicies>,
    pub(crate) timeout: Option<TimeoutPolicy>,
    /// Whether (and how) its results are cached; the engine looks them up before the tries.
    pub(crate) cache: Option<crate::cache::CachePolicy>,
}

impl Attempts {
    /// These policies, with `defaults` where a node set none of its own.
    pub(crate) fn or(self, defaults: &crate::graph::NodeDefaults) -> Self {
        Self {
            retry: self.retry.or_else(|| defaults.retry.clone()),
            timeout: self.timeout.or_else(|| defaults.timeout.clone()),
            cache: self.cache.or_else(|| defaults.cache.clone()),
        }
    }

    /// Runs `once` until it succeeds, fails for good or signals (an interrupt): each try
    /// under the timeout (handed a fresh progress clock if it has an idle limit), a failed
    /// one tried again as the retry policies say, after their wait and `restart`.
    pub(crate) async fn run<T, Fut>(
        &self,
        name: &str,
        mut once: impl FnMut(Option<Arc<Progress>>) -> Fut,
        mut restart: impl FnMut(),
    ) -> Result<T, NodeError>
    where
        Fut: Future<Output = Result<T, NodeError>>,
    {
        let timeout = self.timeout.as_ref();
        let mut attempt = 1;
        loop {
            let progress = crate::timeout::clock(timeout);
            let work = once(progress.clone());
            let result = crate::timeout::attempt(name, timeout, progress.as_deref(), work).await;
            let wait = wait_after(self.retry.as_ref(), attempt, &result);
            match (&result, wait) {
                (Err(e), Some(wait)) => {
                    tracing::info!(attempt, error = %e, node = name, "retry");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    restart();
                }
                _ => return result,
            }
        }
    }
}
