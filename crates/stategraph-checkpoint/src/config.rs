//! Which checkpoint an operation addresses: LangGraph's `config["configurable"]` keys.

use serde_json::json;

/// The `configurable` key naming the thread.
pub const THREAD_ID: &str = "thread_id";
/// The `configurable` key naming the checkpoint namespace (`""` for the root graph).
pub const CHECKPOINT_NS: &str = "checkpoint_ns";
/// The `configurable` key naming one checkpoint.
pub const CHECKPOINT_ID: &str = "checkpoint_id";
/// Separator between nested namespaces: `outer:<task>|inner:<task>`.
pub const NS_SEP: char = '|';
/// Separator between a node name and its task id in a namespace: `node:<task>`.
pub const NS_END: char = ':';

/// Addresses a thread, a namespace inside it and optionally one checkpoint.
///
/// Without `checkpoint_id` it means "the latest checkpoint" for reads, and "no parent" for
/// [`put`](crate::CheckpointSaver::put).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CheckpointConfig {
    /// The thread.
    pub thread_id: String,
    /// The namespace: `""` for the root graph, `node:<task_id>` for a subgraph.
    pub checkpoint_ns: String,
    /// One checkpoint, or `None` for the latest.
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// The latest checkpoint of `thread_id` in the root namespace.
    pub fn new(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            checkpoint_ns: String::new(),
            checkpoint_id: None,
        }
    }

    /// The same address in namespace `ns`.
    pub fn with_ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = ns.into();
        self
    }

    /// The same address pinned to checkpoint `id`.
    pub fn with_checkpoint_id(mut self, id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(id.into());
        self
    }

    /// LangGraph's JSON form: `{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut c = serde_json::Map::new();
        c.insert(THREAD_ID.into(), json!(self.thread_id));
        c.insert(CHECKPOINT_NS.into(), json!(self.checkpoint_ns));
        if let Some(id) = &self.checkpoint_id {
            c.insert(CHECKPOINT_ID.into(), json!(id));
        }
        json!({ "configurable": c })
    }
}

/// A database URL without its password (`postgres://u:***@host/db`), for error messages and
/// logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}
