//! Where a store reads the current time: the system clock, or a clock tests move by hand.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::Timestamp;

/// The source of "now" for a store: items' `created_at` / `updated_at`, when TTLs start and
/// whether an item has expired. The system clock ([`Timestamp::now`]) by default; a
/// [`ManualClock`] lets tests expire items without waiting.
///
/// A store takes its clock from its [`TtlConfig`](super::TtlConfig):
///
/// ```
/// use std::time::Duration;
/// use serde_json::json;
/// use stategraph_store::*;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// const MINUTE: Duration = Duration::from_secs(60);
/// let clock = ManualClock::starting_now();
/// let ttl = TtlConfig::default().default_ttl(5 * MINUTE).with_clock(clock.clock());
/// let store = InMemoryStore::new().with_ttl(ttl);
/// store.put(&["session"], "k", json!({"v": 1})).await?;
/// clock.advance(4 * MINUTE);
/// assert!(store.get(&["session"], "k").await?.is_some()); // and the read refreshes it
/// clock.advance(6 * MINUTE);
/// assert_eq!(store.get(&["session"], "k").await?, None);
/// # Ok::<(), StoreError>(()) }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct Clock(Option<Arc<dyn Fn() -> Timestamp + Send + Sync>>);

impl Clock {
    /// The system clock: [`Timestamp::now`].
    pub fn system() -> Self {
        Self(None)
    }

    /// A clock that reads `now`. Stores order writes by the times they read, so successive
    /// readings should increase.
    pub fn from_fn(now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(now)))
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        match &self.0 {
            None => Timestamp::now(),
            Some(f) => f(),
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Clock(system)"),
            Some(_) => f.write_str("Clock(custom)"),
        }
    }
}

/// Two clocks are equal when both are the system clock or both are the same custom clock.
impl PartialEq for Clock {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A clock that moves only when told to (and by one microsecond per reading, see
/// [`clock`](Self::clock)): tests advance it past a TTL instead of sleeping.
#[derive(Clone, Debug)]
pub struct ManualClock {
    micros: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            micros: Arc::new(AtomicI64::new(start.unix_micros())),
        }
    }

    /// A clock showing the current system time (so that items it stamps look recent to other
    /// readers of the same database).
    pub fn starting_now() -> Self {
        Self::new(Timestamp::now())
    }

    /// The time it shows, without moving it.
    pub fn time(&self) -> Timestamp {
        Timestamp::from_unix_micros(self.micros.load(Ordering::SeqCst))
    }

    /// Shows `time` from now on.
    pub fn set(&self, time: Timestamp) {
        self.micros.store(time.unix_micros(), Ordering::SeqCst);
    }

    /// Moves it forward by `by`, rounded to the microsecond (as [`Timestamp::plus`]).
    pub fn advance(&self, by: Duration) {
        let t = self.time();
        self.add(t.plus(by).unix_micros() - t.unix_micros());
    }

    fn add(&self, micros: i64) {
        let _ = self
            .micros
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |m| {
                Some(m.saturating_add(micros))
            });
    }

    /// The [`Clock`] a store reads this through. Each reading returns the time shown, then
    /// moves it on by one microsecond: like the system clock's, successive readings strictly
    /// increase, so writes made one after the other still order by time.
    pub fn clock(&self) -> Clock {
        let micros = Arc::clone(&self.micros);
        Clock::from_fn(move || {
            let m = micros
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |m| {
                    Some(m.saturating_add(1))
                })
                .unwrap_or_else(|m| m);
            Timestamp::from_unix_micros(m)
        })
    }
}

impl From<ManualClock> for Clock {
    fn from(manual: ManualClock) -> Self {
        manual.clock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_when_told_and_ticks_per_reading() {
        let manual = ManualClock::new(Timestamp::from_unix_micros(1_000));
        let clock = manual.clock();
        assert_eq!(clock.now().unix_micros(), 1_000);
        assert_eq!(clock.now().unix_micros(), 1_001);
        assert_eq!(manual.time().unix_micros(), 1_002);
        manual.advance(Duration::from_millis(1));
        assert_eq!(manual.time().unix_micros(), 2_002);
        manual.advance(Duration::from_secs(30));
        assert_eq!(manual.time().unix_micros(), 30_002_002);
        manual.set(Timestamp::from_unix_micros(5));
        assert_eq!(clock.now().unix_micros(), 5);
        assert_eq!(clock, clock.clone());
        assert_ne!(clock, Clock::system());
        assert_eq!(Clock::default(), Clock::system());
        assert!(Clock::system().now() > Timestamp::from_unix_micros(0));
    }
}
