//! Threads: the document the store keeps of one (what is not a run's: its metadata, config,
//! TTL and times), and the thread as the API answers it — that document with the status,
//! values, interrupts and error the run queue keeps ([`ThreadRow`]).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use stategraph_checkpoint::now_iso;
use stategraph_runs::{ThreadRow, ThreadState, ThreadStatus};

use super::{Kind, Object, Record, iso, nullable};
use crate::error::ApiError;
use crate::records::AssistantRecord;
use crate::request::merge_objects;

/// What becomes of a thread left alone past its TTL (LangGraph's thread `ttl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TtlStrategy {
    /// The thread is deleted with its runs and checkpoints (the default).
    #[default]
    Delete,
    /// Its checkpoints but the latest are deleted; the thread stays.
    KeepLatest,
}

/// A thread's TTL, as `POST /threads` and `PATCH /threads/{thread_id}` take it (`ttl`:
/// `{"strategy", "ttl"}`) and its document keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) struct ThreadTtl {
    /// What happens once it runs out.
    #[serde(default)]
    pub(crate) strategy: TtlStrategy,
    /// Minutes without activity (a run, a state update, a change of the thread) after
    /// which it does; none: never.
    #[serde(default)]
    pub(crate) ttl: Option<f64>,
}

impl ThreadTtl {
    /// The TTL a request gives (`null` or absent: none), refused (422) as the reference's
    /// schema refuses it: an object whose `strategy` is `delete` or `keep_latest` and whose
    /// `ttl` is a number.
    pub(crate) fn from_request(given: Option<&Json>) -> Result<Option<Self>, ApiError> {
        use crate::input::{not_of_type, not_one_of};
        let fields = match given {
            None | Some(Json::Null) => return Ok(None),
            Some(Json::Object(o)) => o,
            Some(other) => return Err(not_of_type(&["ttl"], other, "object")),
        };
        let strategy = match fields.get("strategy") {
            None | Some(Json::Null) => TtlStrategy::Delete,
            Some(Json::String(s)) if s == "delete" => TtlStrategy::Delete,
            Some(Json::String(s)) if s == "keep_latest" => TtlStrategy::KeepLatest,
            Some(s @ Json::String(_)) => {
                return Err(not_one_of(
                    &["ttl", "strategy"],
                    s,
                    &["delete", "keep_latest"],
                ));
            }
            Some(other) => return Err(not_of_type(&["ttl", "strategy"], other, "string")),
        };
        let ttl = match fields.get("ttl") {
            None | Some(Json::Null) => None,
            Some(Json::Number(n)) => n.as_f64().filter(|m| m.is_finite()),
            Some(other) => return Err(not_of_type(&["ttl", "ttl"], other, "number")),
        };
        Ok(Some(Self { strategy, ttl }))
    }

    /// When a thread last active at `last` (RFC 3339) runs out; `None` without a TTL, or
    /// for one too long for the calendar (never).
    pub(crate) fn expires_at(&self, last: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        let minutes = self.ttl?;
        let last = chrono::DateTime::parse_from_rfc3339(last).ok()?;
        // Saturates far out of range; a negative TTL has already run out.
        let ttl = chrono::TimeDelta::try_milliseconds((minutes * 60_000.0) as i64)?;
        last.with_timezone(&chrono::Utc).checked_add_signed(ttl)
    }
}

/// A thread's document in the store: what is not a run's. Earlier versions kept the
/// thread's status and state here too; they are read (and moved to the run queue once) but
/// never written again.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ThreadDoc {
    pub(crate) thread_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ttl: Option<ThreadTtl>,
    /// The state an earlier version kept here, if any.
    #[serde(default, rename = "values", skip_serializing)]
    pub(crate) legacy_values: Option<Json>,
    #[serde(default, rename = "interrupts", skip_serializing)]
    pub(crate) legacy_interrupts: Option<Json>,
    #[serde(default, rename = "error", skip_serializing)]
    pub(crate) legacy_error: Option<Json>,
    #[serde(default, rename = "status", skip_serializing)]
    pub(crate) legacy_status: Option<ThreadStatus>,
    #[serde(default, rename = "state_updated_at", skip_serializing)]
    pub(crate) legacy_state_updated_at: Option<String>,
    /// Fields kept as they were given.
    #[serde(flatten)]
    pub(crate) extra: Object,
}

impl Record for ThreadDoc {
    const KIND: Kind = Kind::Thread;
    fn key(&self) -> String {
        self.thread_id.clone()
    }
}

impl ThreadDoc {
    /// A new thread.
    pub(crate) fn new(thread_id: &str, metadata: Object) -> Self {
        let now = now_iso();
        Self {
            thread_id: thread_id.to_owned(),
            created_at: now.clone(),
            updated_at: now,
            metadata,
            config: Object::new(),
            ttl: None,
            legacy_values: None,
            legacy_interrupts: None,
            legacy_error: None,
            legacy_status: None,
            legacy_state_updated_at: None,
            extra: Object::new(),
        }
    }

    /// Records that a run of graph `graph_id` and assistant `assistant` starts the thread's
    /// work: the run's graph and assistant in its metadata, and its config merged as
    /// LangGraph's server merges it (the assistant's, the thread's, the run's, then
    /// `configurable` from the assistant's and the thread's only). Whether anything changed.
    pub(crate) fn start_run(
        &mut self,
        graph_id: &str,
        assistant: &AssistantRecord,
        run_config: Option<&Json>,
    ) -> bool {
        let before = (self.metadata.clone(), self.config.clone());
        self.metadata
            .insert("graph_id".into(), Json::String(graph_id.to_owned()));
        self.metadata.insert(
            "assistant_id".into(),
            Json::String(assistant.assistant_id.clone()),
        );
        let assistant_config = Json::Object(assistant.config.clone());
        let own = Json::Object(std::mem::take(&mut self.config));
        let mut config = merge_objects([Some(&assistant_config), Some(&own), run_config]);
        let kept = merge_objects([
            assistant_config.get("configurable"),
            own.get("configurable"),
        ]);
        config.insert("configurable".into(), Json::Object(kept));
        self.config = config;
        let changed = before != (self.metadata.clone(), self.config.clone());
        if changed {
            self.updated_at = now_iso();
        }
        changed
    }

    /// Merges `metadata` into its own.
    pub(crate) fn merge_metadata(&mut self, metadata: Object) {
        self.metadata.extend(metadata);
        self.updated_at = now_iso();
    }

    /// A copy under `thread_id`, created now, with the same metadata and config.
    pub(crate) fn copied_to(&self, thread_id: &str) -> Self {
        let mut copy = Self::new(thread_id, self.metadata.clone());
        copy.config = self.config.clone();
        copy.ttl = self.ttl;
        copy
    }

    /// The state an earlier version kept in this document, as the run queue keeps it now
    /// (`None` when it kept none).
    pub(crate) fn legacy_state(&self) -> Option<ThreadState> {
        let values = self.legacy_values.clone().filter(|v| !v.is_null())?;
        let status = match self.legacy_status {
            Some(ThreadStatus::Busy) | None => ThreadStatus::Idle,
            Some(s) => s,
        };
        let interrupts = self
            .legacy_interrupts
            .clone()
            .unwrap_or_else(|| Json::Object(Object::new()));
        let error = self.legacy_error.clone().unwrap_or(Json::Null);
        Some(ThreadState::new(status, values, interrupts).error(error))
    }

    /// The graph its runs use, if one ran on it.
    pub(crate) fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Json::as_str)
    }
}

/// A thread, as `GET /threads/{thread_id}` answers it: its document and what the run queue
/// says of it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Thread)]
pub(crate) struct ThreadRecord {
    pub(crate) thread_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) state_updated_at: String,
    pub(crate) metadata: Object,
    #[schema(value_type = String)]
    pub(crate) status: ThreadStatus,
    pub(crate) config: Object,
    /// The values of its latest checkpoint (`null` before the first).
    pub(crate) values: Json,
    /// The interrupts it waits on, by task id, once a run or update left some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interrupts: Option<Json>,
    /// The error its last run ended with (`null` after a run without), once one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Json>,
    /// Fields kept as they were given.
    #[serde(flatten)]
    pub(crate) extra: Object,
}

impl ThreadRecord {
    /// Thread `doc` as `row` (the queue's, if it knows the thread) says it is now.
    pub(crate) fn of(doc: ThreadDoc, row: Option<&ThreadRow>) -> Self {
        let state = row.and_then(|r| r.state.as_ref());
        let written = row.and_then(|r| r.updated_at).map(iso);
        let updated_at = match &written {
            Some(w) if *w > doc.updated_at => w.clone(),
            _ => doc.updated_at.clone(),
        };
        Self {
            state_updated_at: written
                .or_else(|| doc.legacy_state_updated_at.clone())
                .unwrap_or_else(|| doc.created_at.clone()),
            updated_at,
            status: row.map_or(ThreadStatus::Idle, |r| r.status),
            values: state.map_or(Json::Null, |s| s.values.clone()),
            interrupts: state.map(|s| s.interrupts.clone()),
            error: state.map(|s| s.error.clone()),
            thread_id: doc.thread_id,
            created_at: doc.created_at,
            metadata: doc.metadata,
            config: doc.config,
            extra: doc.extra,
        }
    }

    /// The graph its runs use, if one ran on it.
    pub(crate) fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Json::as_str)
    }
}

/// What reading a thread's state needs of its document: that it exists, and its graph.
/// Read without the rest.
#[derive(Serialize, Deserialize)]
pub(crate) struct ThreadHead {
    pub(crate) thread_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
}

impl Record for ThreadHead {
    const KIND: Kind = Kind::Thread;
    fn key(&self) -> String {
        self.thread_id.clone()
    }
}

/// A thread's graph, as its metadata names it.
pub(crate) trait HasGraph {
    /// The graph its runs use, if one ran on it.
    fn graph_id(&self) -> Option<&str>;
}

impl HasGraph for ThreadHead {
    fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Json::as_str)
    }
}

impl HasGraph for ThreadRecord {
    fn graph_id(&self) -> Option<&str> {
        ThreadRecord::graph_id(self)
    }
}

impl HasGraph for ThreadDoc {
    fn graph_id(&self) -> Option<&str> {
        ThreadDoc::graph_id(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use std::time::SystemTime;

    use super::*;

    #[test]
    fn a_thread_is_its_document_with_the_queues_state() {
        let stored = json!({
            "thread_id": "t", "created_at": "2000-01-01T00:00:00+00:00",
            "updated_at": "2000-01-02T00:00:00+00:00", "status": "busy",
            "values": {"old": 1}, "metadata": null, "error": null, "custom": {"x": 1},
        });
        let doc: ThreadDoc = serde_json::from_value(stored).unwrap();
        assert_eq!(doc.legacy_state().unwrap().status, ThreadStatus::Idle);
        // Written back, the state of an earlier version is gone.
        let written = serde_json::to_value(&doc).unwrap();
        assert!(written.get("values").is_none() && written.get("status").is_none());
        assert_eq!(written["custom"], json!({"x": 1}));

        let never_ran = ThreadRecord::of(doc.clone(), None);
        let out = serde_json::to_value(&never_ran).unwrap();
        assert_eq!(
            (out["status"].clone(), out["values"].clone()),
            (json!("idle"), Json::Null)
        );
        assert!(out.get("interrupts").is_none() && out.get("error").is_none());
        assert_eq!(out["metadata"], json!({}));

        let state = ThreadState::new(ThreadStatus::Interrupted, json!({"n": 1}), json!({}));
        let row = ThreadRow::new("t", false, Some((state, SystemTime::now())));
        let out = serde_json::to_value(ThreadRecord::of(doc, Some(&row))).unwrap();
        assert_eq!(out["status"], "interrupted");
        assert_eq!(out["values"], json!({"n": 1}));
        assert_eq!(out["error"], Json::Null);
        assert!(out["updated_at"].as_str().unwrap() > "2000-01-02T00:00:00+00:00");
    }

    #[test]
    fn ttls_are_minutes_with_a_known_strategy() {
        let read = |v: Json| ThreadTtl::from_request(Some(&v));
        let ttl = read(json!({"ttl": 1.5})).unwrap().unwrap();
        assert_eq!((ttl.strategy, ttl.ttl), (TtlStrategy::Delete, Some(1.5)));
        let expires = ttl.expires_at("2026-01-01T00:00:00+00:00").unwrap();
        assert_eq!(expires.to_rfc3339(), "2026-01-01T00:01:30+00:00");
        let keep = read(json!({"strategy": "keep_latest", "ttl": 60}))
            .unwrap()
            .unwrap();
        assert_eq!(keep.strategy, TtlStrategy::KeepLatest);
        assert_eq!(
            read(json!({"strategy": "delete"})).unwrap().unwrap().ttl,
            None
        );
        assert_eq!(ThreadTtl::from_request(None).unwrap(), None);
        let huge = read(json!({"ttl": 1e300})).unwrap().unwrap();
        assert_eq!(huge.expires_at("2026-01-01T00:00:00+00:00"), None, "never");
        let past = read(json!({"ttl": -1})).unwrap().unwrap();
        assert!(past.expires_at("2026-01-01T00:00:00+00:00").is_some());
        for bad in [json!({"strategy": "later"}), json!(5), json!({"ttl": "x"})] {
            assert_eq!(read(bad).unwrap_err().status.as_u16(), 422);
        }
    }
}
