//! One event of a run's stream, as SSE sends it.
//!
//! Event ids are `"{run_ms}-{seq}"`, the Redis-stream shape LangGraph's server uses, where
//! `run_ms` is the time in the run's id and `seq` the event's number in the run queue's log
//! (from 1). The reference's in-memory runtime writes the event's millisecond and always
//! `-0`, so two events of the same millisecond share an id there and a resume can skip one;
//! ours are unique, and the same from any process.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json_;

/// How long, by default, an ended run's events stay readable (by joiners, and by clients
/// that reconnect with `Last-Event-ID`): the reference's `RESUMABLE_STREAM_TTL_SECONDS`,
/// 120.
pub const DEFAULT_RESUMABLE_TTL: Duration = Duration::from_secs(120);

/// One streamed event of a run.
#[derive(Clone, Debug)]
pub(crate) struct StreamEvent {
    /// Position in the run's stream, from 1 (0: not one of the run's own events).
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
    /// in the run's own time-ordered id: the same event has the same id in every process, so
    /// a client that reconnects anywhere resumes and de-duplicates by it.
    pub(crate) fn new(run_id: &str, seq: u64, name: impl Into<Arc<str>>, data: Json_) -> Self {
        Self {
            seq,
            id: Arc::from(format!("{}-{seq}", run_ms(run_id))),
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

/// Where a client resumes a run's stream: after event `seq` of ours (a `Last-Event-ID` we
/// sent), from the start for `-1` or any id that sorts before ours, or — as the reference
/// compares ids as text — after the events whose ids sort at or before a foreign one.
pub(crate) fn resume_after(last_event_id: &str) -> Resume {
    let id = last_event_id.trim();
    if let Some((ms, seq)) = id.split_once('-')
        && !ms.is_empty()
        && ms.bytes().all(|b| b.is_ascii_digit())
        && let Ok(seq) = seq.parse::<u64>()
    {
        return Resume::Seq(seq);
    }
    Resume::Foreign(id.to_owned())
}

/// See [`resume_after`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// After our event number `seq`.
    Seq(u64),
    /// After every event whose id sorts at or before this one, as text.
    Foreign(String),
}

impl Resume {
    /// Whether `event` comes after the resume point.
    pub(crate) fn after(&self, event: &StreamEvent) -> bool {
        match self {
            Resume::Seq(s) => event.seq > *s,
            Resume::Foreign(id) => &*event.id > id.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_carry_the_runs_time_and_the_events_number() {
        let e = StreamEvent::new(
            "1f0b9a0e-3c4d-6e5f-8a9b-0c1d2e3f4a5b",
            3,
            "values",
            json!(1),
        );
        let (ms, seq) = e.id.split_once('-').unwrap();
        assert!(ms.parse::<u64>().unwrap() > 0);
        assert_eq!(seq, "3");
        assert_eq!(
            StreamEvent::new("not-a-uuid", 2, "x", json!(0)).id.as_ref(),
            "0-2"
        );
    }

    #[test]
    fn resumes_after_our_ids_or_by_text() {
        let e = |seq| StreamEvent::new("1f0b9a0e-3c4d-6e5f-8a9b-0c1d2e3f4a5b", seq, "v", json!(0));
        let ours = resume_after(&e(2).id);
        assert_eq!(ours, Resume::Seq(2));
        assert!(!ours.after(&e(2)) && ours.after(&e(3)));
        let all = resume_after("-1");
        assert!(all.after(&e(1)));
        let none = resume_after("zzz");
        assert!(!none.after(&e(1)));
    }
}
