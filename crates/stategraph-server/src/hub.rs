//! Per-run event hubs: every event a run streams goes through its hub, which hands it to any
//! number of joiners (`GET /threads/{thread_id}/runs/{run_id}/stream`) and, for runs created
//! with `stream_resumable: true`, keeps it in a bounded in-memory log that a client resumes
//! from after its `Last-Event-ID`.
//!
//! Event ids are `"{run_ms}-{seq}"`, the Redis-stream shape LangGraph's server uses, where
//! `run_ms` is the time in the run's id and `seq` counts the run's events from 1 (the
//! reference's in-memory runtime writes the event's millisecond and always `-0`, so two
//! events of the same millisecond share an id there and a resume can skip one; ours are
//! unique, and the same from any process). Hubs of resumable runs are kept for a while after the run ended (by default
//! [`DEFAULT_RESUMABLE_TTL`], the reference's `RESUMABLE_STREAM_TTL_SECONDS`), others are
//! dropped as soon as the run has ended: joiners already attached keep theirs until they have
//! read it all.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json_;
use tokio::sync::watch;

/// How long, by default, a resumable run's events stay available after the run ended (the
/// reference's `RESUMABLE_STREAM_TTL_SECONDS`, 120).
pub const DEFAULT_RESUMABLE_TTL: Duration = Duration::from_secs(120);

/// The most events a resumable run's log keeps (the oldest go first beyond it).
pub(crate) const RESUMABLE_LOG_CAP: usize = 10_000;

/// The most events a run that is not resumable keeps for joiners that read slower than the
/// run writes; a joiner further behind misses the oldest.
pub(crate) const LIVE_TAIL_CAP: usize = 1_024;

/// One streamed event of a run.
#[derive(Clone, Debug)]
pub(crate) struct StreamEvent {
    /// Position in the run's stream, from 1.
    pub(crate) seq: u64,
    /// The SSE `id` (`"{run_ms}-{seq}"`, see [`StreamEvent::new`]).
    pub(crate) id: Arc<str>,
    /// The SSE event name (`metadata`, `values`, `updates|…`, `error`, …).
    pub(crate) name: Arc<str>,
    /// Its data.
    pub(crate) data: Arc<Json_>,
}

impl StreamEvent {
    /// Event `seq` of the run whose id is `run_id`. Its SSE id is `"{run_ms}-{seq}"`, the
    /// form of LangGraph's ids (a Redis stream's `{ms}-{seq}`), where `run_ms` is the time
    /// in the run's own time-ordered id: the same event has the same id in every process and
    /// whether it was read from the run's hub or from the queue's log, so a client that
    /// reconnects anywhere resumes and de-duplicates by it.
    pub(crate) fn new(run_id: &str, seq: u64, name: impl Into<Arc<str>>, data: Json_) -> Self {
        Self::numbered(run_ms(run_id), seq, name, data)
    }

    fn numbered(run_ms: u64, seq: u64, name: impl Into<Arc<str>>, data: Json_) -> Self {
        Self {
            seq,
            id: Arc::from(format!("{run_ms}-{seq}")),
            name: name.into(),
            data: Arc::new(data),
        }
    }
}

/// The time (ms since the Unix epoch) in a time-ordered run id (UUIDv6 or v7, as run ids
/// are), or 0 for an id without one.
fn run_ms(run_id: &str) -> u64 {
    uuid::Uuid::parse_str(run_id)
        .ok()
        .and_then(|u| u.get_timestamp())
        .map_or(0, |t| {
            let (secs, nanos) = t.to_unix();
            secs.saturating_mul(1000)
                .saturating_add(u64::from(nanos / 1_000_000))
        })
}

struct Inner {
    events: VecDeque<StreamEvent>,
    next_seq: u64,
    ended: bool,
}

/// A run's event hub.
pub(crate) struct RunHub {
    /// The first part of its events' ids (see [`StreamEvent::new`]).
    run_ms: u64,
    resumable: bool,
    inner: Mutex<Inner>,
    /// Bumped on every event and when the run ends, so joiners wake up.
    bell: watch::Sender<u64>,
}

impl RunHub {
    fn new(run_id: &str, resumable: bool) -> Self {
        Self {
            run_ms: run_ms(run_id),
            resumable,
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                next_seq: 1,
                ended: false,
            }),
            bell: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the run was created with `stream_resumable: true`.
    pub(crate) fn resumable(&self) -> bool {
        self.resumable
    }

    /// Adds an event; the event as joiners see it.
    pub(crate) fn publish(&self, name: impl Into<Arc<str>>, data: Json_) -> StreamEvent {
        let name: Arc<str> = name.into();
        let cap = if self.resumable {
            RESUMABLE_LOG_CAP
        } else {
            LIVE_TAIL_CAP
        };
        let event = {
            let mut inner = self.lock();
            let seq = inner.next_seq;
            inner.next_seq += 1;
            let event = StreamEvent::numbered(self.run_ms, seq, name, data);
            inner.events.push_back(event.clone());
            while inner.events.len() > cap {
                inner.events.pop_front();
            }
            event
        };
        self.bell.send_modify(|n| *n = n.wrapping_add(1));
        event
    }

    /// Marks the run ended: joiners stop once they have read every event.
    pub(crate) fn end(&self) {
        self.lock().ended = true;
        self.bell.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A reader of this hub's events. With `resume` (a `Last-Event-ID`) on a resumable run it
    /// first replays what the log kept after that id; otherwise it starts at the next event,
    /// as the reference ignores the id of a run that is not resumable.
    pub(crate) fn reader(self: &Arc<Self>, resume: Option<&str>) -> HubReader {
        let mut bell = self.bell.subscribe();
        bell.borrow_and_update();
        let inner = self.lock();
        let live = inner.next_seq.saturating_sub(1);
        let cursor = match resume {
            Some(id) if self.resumable => Cursor::parse(id),
            _ => Cursor::Seq(live),
        };
        drop(inner);
        HubReader {
            hub: Arc::clone(self),
            cursor,
            bell,
        }
    }
}

/// Where a reader is: after an event of ours, or after a foreign `Last-Event-ID`, compared as
/// a string as the reference compares ids (so `-1` or `0` replay everything).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cursor {
    Seq(u64),
    Foreign(String),
}

impl Cursor {
    fn parse(id: &str) -> Self {
        let id = id.trim();
        if let Some((ms, seq)) = id.split_once('-')
            && !ms.is_empty()
            && ms.bytes().all(|b| b.is_ascii_digit())
            && let Ok(seq) = seq.parse::<u64>()
        {
            return Cursor::Seq(seq);
        }
        Cursor::Foreign(id.to_owned())
    }

    fn after(&self, event: &StreamEvent) -> bool {
        match self {
            Cursor::Seq(s) => event.seq > *s,
            Cursor::Foreign(id) => &*event.id > id.as_str(),
        }
    }
}

/// Reads a hub's events in order, each once.
pub(crate) struct HubReader {
    hub: Arc<RunHub>,
    cursor: Cursor,
    bell: watch::Receiver<u64>,
}

impl HubReader {
    /// The events after the cursor, waiting for at least one; `None` once the run has ended
    /// and every event was read.
    pub(crate) async fn next_batch(&mut self) -> Option<Vec<StreamEvent>> {
        loop {
            self.bell.borrow_and_update();
            let (batch, ended) = {
                let inner = self.hub.lock();
                let batch: Vec<StreamEvent> = inner
                    .events
                    .iter()
                    .filter(|e| self.cursor.after(e))
                    .cloned()
                    .collect();
                (batch, inner.ended)
            };
            if let Some(last) = batch.last() {
                self.cursor = Cursor::Seq(last.seq);
                return Some(batch);
            }
            if ended {
                return None;
            }
            if self.bell.changed().await.is_err() {
                return None;
            }
        }
    }
}

/// The hubs of runs in flight, and of resumable runs that ended less than their TTL ago.
pub(crate) struct Hubs {
    hubs: Mutex<BTreeMap<String, Arc<RunHub>>>,
    ttl: Duration,
}

impl Hubs {
    /// No hubs; resumable runs' events kept `ttl` after they end.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            hubs: Mutex::new(BTreeMap::new()),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<RunHub>>> {
        self.hubs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new hub for run `run_id`.
    pub(crate) fn open(&self, run_id: &str, resumable: bool) -> Arc<RunHub> {
        let hub = Arc::new(RunHub::new(run_id, resumable));
        self.lock().insert(run_id.to_owned(), Arc::clone(&hub));
        hub
    }

    /// The hub of run `run_id`, while it is kept.
    pub(crate) fn get(&self, run_id: &str) -> Option<Arc<RunHub>> {
        self.lock().get(run_id).cloned()
    }

    /// Ends run `run_id`'s stream and forgets its hub: now, or after the TTL for a resumable
    /// run.
    pub(crate) fn close(self: &Arc<Self>, run_id: &str, hub: &Arc<RunHub>) {
        hub.end();
        if !hub.resumable() || self.ttl.is_zero() {
            self.forget(run_id, hub);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.forget(run_id, hub);
            return;
        };
        let hubs = Arc::clone(self);
        let hub = Arc::clone(hub);
        let run_id = run_id.to_owned();
        let ttl = self.ttl;
        runtime.spawn(async move {
            tokio::time::sleep(ttl).await;
            hubs.forget(&run_id, &hub);
        });
    }

    fn forget(&self, run_id: &str, hub: &Arc<RunHub>) {
        let mut hubs = self.lock();
        if hubs.get(run_id).is_some_and(|h| Arc::ptr_eq(h, hub)) {
            hubs.remove(run_id);
        }
    }

    /// How many hubs are kept (for tests of the retention).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Closes a run's hub ([`Hubs::close`]) when dropped, so that joiners stop even if the run's
/// task ends early.
pub(crate) struct HubCloser {
    hubs: Arc<Hubs>,
    run_id: String,
    hub: Arc<RunHub>,
}

impl HubCloser {
    /// Closes `hub`, run `run_id`'s, when dropped.
    pub(crate) fn new(hubs: &Arc<Hubs>, run_id: &str, hub: Arc<RunHub>) -> Self {
        Self {
            hubs: Arc::clone(hubs),
            run_id: run_id.to_owned(),
            hub,
        }
    }

    /// The hub.
    pub(crate) fn hub(&self) -> &RunHub {
        &self.hub
    }
}

impl Drop for HubCloser {
    fn drop(&mut self) {
        self.hubs.close(&self.run_id, &self.hub);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn readers_resume_after_an_id_and_see_each_event_once() {
        let hub = Arc::new(RunHub::new("1f0b9a0e-3c4d-6e5f-8a9b-0c1d2e3f4a5b", true));
        let a = hub.publish("metadata", json!(1));
        hub.publish("values", json!(2));
        let mut live = hub.reader(None);
        let mut from_a = hub.reader(Some(&a.id));
        let mut all = hub.reader(Some("-1"));
        let mut none = hub.reader(Some("zzz"));
        hub.publish("values", json!(3));
        hub.end();
        let seqs = |b: Vec<StreamEvent>| b.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(live.next_batch().await.unwrap()), [3]);
        assert!(live.next_batch().await.is_none());
        assert_eq!(seqs(from_a.next_batch().await.unwrap()), [2, 3]);
        assert_eq!(seqs(all.next_batch().await.unwrap()), [1, 2, 3]);
        assert!(none.next_batch().await.is_none());
    }

    #[tokio::test]
    async fn a_hub_that_is_not_resumable_ignores_ids_and_is_bounded() {
        let hub = Arc::new(RunHub::new("r", false));
        let first = hub.publish("values", json!(0));
        let mut reader = hub.reader(Some(&first.id));
        for i in 0..(LIVE_TAIL_CAP + 10) {
            hub.publish("values", json!(i));
        }
        hub.end();
        let batch = reader.next_batch().await.unwrap();
        assert_eq!(batch.len(), LIVE_TAIL_CAP);
        assert_eq!(batch.last().unwrap().seq, (LIVE_TAIL_CAP + 11) as u64);
    }

    #[tokio::test]
    async fn resumable_hubs_are_forgotten_after_the_ttl() {
        let hubs = Arc::new(Hubs::new(Duration::from_millis(100)));
        let kept = hubs.open("r1", true);
        let dropped = hubs.open("r2", false);
        hubs.close("r1", &kept);
        hubs.close("r2", &dropped);
        assert!(hubs.get("r1").is_some());
        assert!(hubs.get("r2").is_none());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(hubs.get("r1").is_some());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(hubs.len(), 0);
    }
}
