//! The Agent Server API's objects, as the client reads and sends them.

use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json};

/// An assistant: a graph with its configuration (`GET /assistants/{id}`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct Assistant {
    /// Its id.
    pub assistant_id: String,
    /// The graph it runs.
    pub graph_id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its configuration.
    #[serde(default)]
    pub config: Json,
    /// Its metadata.
    #[serde(default)]
    pub metadata: Json,
}

/// A thread (`POST /threads`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct Thread {
    /// Its id.
    pub thread_id: String,
    /// `idle`, `busy`, `interrupted` or `error`.
    #[serde(default)]
    pub status: String,
    /// Its metadata.
    #[serde(default)]
    pub metadata: Json,
    /// Its latest values.
    #[serde(default)]
    pub values: Json,
}

/// An interrupt a thread waits on: its value and id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteInterrupt {
    /// What it asks.
    pub value: Json,
    /// Its id (a resume map answers it by this id).
    #[serde(default)]
    pub id: String,
}

/// A task of a thread's state: the node it runs and the interrupts it waits on.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct StateTask {
    /// The task's id.
    pub id: String,
    /// Its node.
    pub name: String,
    /// Its error, if it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// The interrupts it waits on.
    #[serde(default)]
    pub interrupts: Vec<RemoteInterrupt>,
}

/// A thread's state at a checkpoint (`GET /threads/{id}/state`, `POST
/// /threads/{id}/history`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ThreadState {
    /// The state's values.
    #[serde(default)]
    pub values: Json,
    /// The nodes that run next.
    #[serde(default)]
    pub next: Vec<String>,
    /// The checkpoint's address (`thread_id`, `checkpoint_ns`, `checkpoint_id`).
    #[serde(default)]
    pub checkpoint: Json,
    /// The checkpoint's metadata.
    #[serde(default)]
    pub metadata: Json,
    /// When it was saved.
    #[serde(default)]
    pub created_at: Option<String>,
    /// The previous checkpoint's address.
    #[serde(default)]
    pub parent_checkpoint: Option<Json>,
    /// The tasks that run next.
    #[serde(default)]
    pub tasks: Vec<StateTask>,
}

impl ThreadState {
    /// The interrupts the thread waits on, task by task.
    pub fn interrupts(&self) -> Vec<RemoteInterrupt> {
        self.tasks
            .iter()
            .flat_map(|t| t.interrupts.iter().cloned())
            .collect()
    }

    /// The checkpoint's id.
    pub fn checkpoint_id(&self) -> Option<&str> {
        self.checkpoint.get("checkpoint_id").and_then(Json::as_str)
    }
}

/// A run to start (`POST /threads/{id}/runs/stream`, `/runs/stream`, `…/runs/wait`):
/// the body the Python SDK sends. Unset fields are left out.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RunRequest {
    /// The assistant (or graph id) to run.
    pub assistant_id: String,
    /// New input: the graph's state keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Json>,
    /// A command instead: `{"resume": …}`, `{"update": …}`, `{"goto": …}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Json>,
    /// The run's config (`configurable`, `tags`, `recursion_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Json>,
    /// The run's metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap<String, Json>>,
    /// The stream modes (`values`, `updates`, `messages-tuple`, `events`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stream_mode: Vec<String>,
    /// Stream subgraphs' events too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream_subgraphs: bool,
    /// Stop before these nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt_before: Option<Vec<String>>,
    /// Stop after these nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt_after: Option<Vec<String>>,
    /// `create` to create the thread when it does not exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub if_not_exists: Option<String>,
}

impl RunRequest {
    /// A run of `assistant_id` on `input`.
    pub fn input(assistant_id: impl Into<String>, input: Json) -> Self {
        Self {
            assistant_id: assistant_id.into(),
            input: Some(input),
            ..Self::default()
        }
    }

    /// A run of `assistant_id` on `command` (`{"resume": …}`, …).
    pub fn command(assistant_id: impl Into<String>, command: Json) -> Self {
        Self {
            assistant_id: assistant_id.into(),
            command: Some(command),
            ..Self::default()
        }
    }

    /// The same run, streaming `modes`.
    pub fn stream_modes<I, M>(mut self, modes: I) -> Self
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.stream_mode = modes.into_iter().map(Into::into).collect();
        self
    }
}

/// One server-sent event of a streamed run: its name (`values`, `updates|sub:…`, `error`,
/// `metadata`, …) and its data.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamPart {
    /// The event's name: the mode, then `|` and the namespace for a subgraph's event.
    pub event: String,
    /// Its data.
    pub data: Json,
}

impl StreamPart {
    /// The stream mode (the event's name before any `|`).
    pub fn mode(&self) -> &str {
        self.event.split('|').next().unwrap_or_default()
    }

    /// The namespace of a subgraph's event, outermost first (empty for the graph's own).
    pub fn namespace(&self) -> Vec<&str> {
        self.event.split('|').skip(1).collect()
    }

    /// The interrupts of an `updates` event that reports them (`{"__interrupt__": […]}`).
    pub fn interrupts(&self) -> Vec<RemoteInterrupt> {
        if self.mode() != "updates" {
            return Vec::new();
        }
        self.data
            .get("__interrupt__")
            .and_then(Json::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|i| serde_json::from_value(i.clone()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}
