//! TTL behaviour: the configuration and the background sweeper.

use std::sync::Arc;

use super::{Clock, Store};

/// TTL behaviour of a store (LangGraph's `TTLConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct TtlConfig {
    /// Minutes an item lives when a put does not say (`None`: forever).
    pub default_ttl: Option<f64>,
    /// Whether reads refresh expiry by default.
    pub refresh_on_read: bool,
    /// How often [`spawn_ttl_sweeper`] deletes expired items, in minutes (default 5).
    pub sweep_interval_minutes: Option<f64>,
    /// Where the store reads "now": when items are stamped and TTLs start, and whether they
    /// have expired (the system clock by default; a [`ManualClock`](super::ManualClock) in
    /// tests).
    pub clock: Clock,
}

impl Default for TtlConfig {
    fn default() -> Self {
        Self {
            default_ttl: None,
            refresh_on_read: true,
            sweep_interval_minutes: None,
            clock: Clock::system(),
        }
    }
}

impl TtlConfig {
    /// Reads "now" from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }
}

/// Starts a background task that calls [`Store::sweep_ttl`] every `interval` (default: the
/// store's `sweep_interval_minutes`, else 5 minutes) until the handle is aborted or dropped
/// with the runtime. Sweep errors are retried at the next tick.
pub fn spawn_ttl_sweeper(
    store: Arc<dyn Store>,
    interval: Option<std::time::Duration>,
) -> tokio::task::JoinHandle<()> {
    let every = interval.unwrap_or_else(|| {
        let minutes = store.ttl_config().sweep_interval_minutes.unwrap_or(5.0);
        std::time::Duration::from_secs_f64((minutes * 60.0).max(0.001))
    });
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let _ = store.sweep_ttl().await;
        }
    })
}
