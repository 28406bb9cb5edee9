//! TTL behaviour: the configuration and the background sweeper.

use std::sync::Arc;
use std::time::Duration;

use super::{Clock, Store};

/// How often [`spawn_ttl_sweeper`] sweeps when neither it nor the store's
/// [`TtlConfig::sweep_interval`] says (LangGraph's default, 5 minutes).
const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// TTL behaviour of a store (LangGraph's `TTLConfig`).
///
/// Times are [`Duration`]s; the stores convert them to LangGraph's unit (fractional minutes)
/// only where they are stored, so what they write is what Python's stores write.
///
/// ```
/// use std::time::Duration;
/// use stategraph_store::TtlConfig;
///
/// let ttl = TtlConfig::default()
///     .default_ttl(Duration::from_secs(60 * 60)) // items live an hour unless a put says
///     .refresh_on_read(false)                    // reads do not extend it
///     .sweep_interval(Duration::from_secs(10 * 60));
/// assert_eq!(ttl.default_ttl, Some(Duration::from_secs(3600)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TtlConfig {
    /// How long an item lives when a put does not say (`None`: forever).
    pub default_ttl: Option<Duration>,
    /// Whether reads refresh expiry by default.
    pub refresh_on_read: bool,
    /// How often [`spawn_ttl_sweeper`] deletes expired items (`None`: every 5 minutes).
    pub sweep_interval: Option<Duration>,
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
            sweep_interval: None,
            clock: Clock::system(),
        }
    }
}

impl TtlConfig {
    /// Items live `ttl` (not zero) when a put does not say otherwise (default: forever).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Whether reads push an item's expiry back by its TTL when they do not say (default
    /// `true`).
    pub fn refresh_on_read(mut self, refresh: bool) -> Self {
        self.refresh_on_read = refresh;
        self
    }

    /// How often [`spawn_ttl_sweeper`] deletes expired items (default 5 minutes).
    pub fn sweep_interval(mut self, every: Duration) -> Self {
        self.sweep_interval = Some(every);
        self
    }

    /// Reads "now" from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }
}

/// Starts a background task that calls [`Store::sweep_ttl`] every `interval` (default: the
/// store's [`sweep_interval`](TtlConfig::sweep_interval), else 5 minutes; at least a
/// millisecond) until the handle is aborted or dropped with the runtime. Sweep errors are
/// retried at the next tick.
pub fn spawn_ttl_sweeper(
    store: Arc<dyn Store>,
    interval: Option<Duration>,
) -> tokio::task::JoinHandle<()> {
    let every = interval
        .or(store.ttl_config().sweep_interval)
        .unwrap_or(DEFAULT_SWEEP_INTERVAL)
        .max(Duration::from_millis(1));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let _ = store.sweep_ttl().await;
        }
    })
}
