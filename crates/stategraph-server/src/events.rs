//! The `events` stream mode: LangChain's `astream_events` (v2) events, as LangGraph's server
//! sends them for a run created with `stream_mode: "events"` (SSE event `events`).
//!
//! Built from the engine's `debug` events: `on_chain_start` for the graph when the run
//! starts; per task `on_chain_start` (its input), then, if it finished without error or
//! interrupt, `on_chain_stream` (its update as `chunk`) and `on_chain_end` (its input and
//! update); `on_chain_end` for the graph (the final values) when the run ends without error.
//! Each carries the reference's fields: `event`, `name`, `run_id` (the run's for the graph,
//! the task's id for a task), `tags` (`graph:step:N` for a task), `metadata` (the run's, plus
//! `langgraph_step`, `langgraph_node`, `langgraph_triggers`, `langgraph_path` and
//! `langgraph_checkpoint_ns` for a task), `parent_ids` and `data`.
//!
//! The callbacks of LangChain runnables inside nodes (chat models, tools, retrievers) have no
//! counterpart in stategraph's nodes, so their events (`on_chat_model_stream`, …) are not
//! sent, and neither are those of subgraphs' tasks.

use std::collections::HashMap;

use serde_json::{Map as JsonMap, Value as Json, json};

use crate::records::RunRecord;

/// The name of the SSE events of this mode.
pub(crate) const EVENTS: &str = "events";

/// A run's `events` rendering: what its events repeat, and the tasks started so far.
pub(crate) struct Events {
    graph_id: String,
    run_id: String,
    /// The run's metadata, as every event carries it.
    metadata: JsonMap<String, Json>,
    /// Per task started and not finished: its input and its own metadata.
    tasks: HashMap<String, (Json, JsonMap<String, Json>, i64)>,
}

impl Events {
    /// The rendering of run `run` (its record, as it starts) and the graph's `on_chain_start`.
    pub(crate) fn start(run: &RunRecord) -> (Self, Json) {
        let configurable = run.kwargs_object("/config/configurable");
        let graph_id = configurable
            .get("graph_id")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned();
        let run_id = run.run_id.clone();
        let mut metadata = run.kwargs_object("/config/metadata");
        metadata.insert("run_id".into(), json!(run_id));
        metadata.insert("thread_id".into(), json!(run.thread_id));
        metadata.insert("graph_id".into(), json!(graph_id));
        // The input as the graph got it: new input, or the command that resumed it.
        let input = run
            .kwargs
            .get("input")
            .filter(|i| !i.is_null())
            .or_else(|| run.kwargs.get("command"))
            .cloned()
            .unwrap_or(Json::Null);
        let events = Self {
            graph_id,
            run_id,
            metadata,
            tasks: HashMap::new(),
        };
        let start = events.graph_event("on_chain_start", json!({ "input": input }));
        (events, start)
    }

    /// The events of one engine `debug` event (`{step, type, payload}`).
    pub(crate) fn debug(&mut self, debug: &Json) -> Vec<Json> {
        let (Some(kind), Some(payload)) = (
            debug.get("type").and_then(Json::as_str),
            debug.get("payload"),
        ) else {
            return Vec::new();
        };
        let text = |key: &str| {
            payload
                .get(key)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (id, name) = (text("id"), text("name"));
        match kind {
            "task" => {
                let step = debug.get("step").and_then(Json::as_i64).unwrap_or_default();
                let triggers = payload.get("triggers").cloned().unwrap_or(json!([]));
                let pushed = triggers
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t == "__pregel_push"));
                let mut metadata = self.metadata.clone();
                metadata.insert("langgraph_step".into(), json!(step));
                metadata.insert("langgraph_node".into(), json!(name));
                metadata.insert("langgraph_triggers".into(), triggers);
                let path = if pushed {
                    "__pregel_push"
                } else {
                    "__pregel_pull"
                };
                metadata.insert("langgraph_path".into(), json!([path, name]));
                metadata.insert(
                    "langgraph_checkpoint_ns".into(),
                    json!(format!("{name}:{id}")),
                );
                let input = payload.get("input").cloned().unwrap_or(Json::Null);
                let start = self.task_event(
                    "on_chain_start",
                    (&id, &name, step),
                    &metadata,
                    json!({ "input": input }),
                );
                self.tasks.insert(id, (input, metadata, step));
                vec![start]
            }
            "task_result" => {
                let Some((input, metadata, step)) = self.tasks.remove(&id) else {
                    return Vec::new();
                };
                let failed = payload.get("error").is_some_and(|e| !e.is_null());
                let interrupted = payload
                    .get("interrupts")
                    .and_then(Json::as_array)
                    .is_some_and(|i| !i.is_empty());
                if failed || interrupted {
                    return Vec::new();
                }
                let output = payload.get("result").cloned().unwrap_or(Json::Null);
                let task = (id.as_str(), name.as_str(), step);
                vec![
                    self.task_event(
                        "on_chain_stream",
                        task,
                        &metadata,
                        json!({ "chunk": output }),
                    ),
                    self.task_event(
                        "on_chain_end",
                        task,
                        &metadata,
                        json!({ "output": output, "input": input }),
                    ),
                ]
            }
            _ => Vec::new(),
        }
    }

    /// The graph's `on_chain_end`, with the run's final `values`.
    pub(crate) fn end(&self, values: &Json) -> Json {
        self.graph_event("on_chain_end", json!({ "output": values }))
    }

    fn graph_event(&self, event: &str, data: Json) -> Json {
        json!({
            "event": event,
            "data": data,
            "name": self.graph_id,
            "tags": [],
            "run_id": self.run_id,
            "metadata": self.metadata,
            "parent_ids": [],
        })
    }

    fn task_event(
        &self,
        event: &str,
        (id, name, step): (&str, &str, i64),
        metadata: &JsonMap<String, Json>,
        data: Json,
    ) -> Json {
        json!({
            "event": event,
            "data": data,
            "name": name,
            "tags": [format!("graph:step:{step}")],
            "run_id": id,
            "metadata": metadata,
            "parent_ids": [self.run_id],
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn a_task_that_finishes_starts_streams_and_ends() {
        let run = json!({
            "run_id": "r1",
            "thread_id": "t1",
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00",
            "status": "running",
            "kwargs": {
                "input": {"foo": "x"},
                "config": {"configurable": {"graph_id": "seed"}, "metadata": {"a": 1}},
            },
        });
        let run: RunRecord = serde_json::from_value(run).unwrap();
        let (mut events, start) = Events::start(&run);
        assert_eq!(start["event"], "on_chain_start");
        assert_eq!(start["name"], "seed");
        assert_eq!(start["data"]["input"], json!({"foo": "x"}));
        assert_eq!(start["metadata"]["a"], 1);
        let task = json!({"step": 1, "type": "task", "payload": {
            "id": "k1", "name": "node_a", "input": {"foo": "x"}, "triggers": ["branch:to:node_a"],
        }});
        let started = events.debug(&task);
        assert_eq!(started[0]["tags"], json!(["graph:step:1"]));
        assert_eq!(started[0]["metadata"]["langgraph_node"], "node_a");
        assert_eq!(started[0]["parent_ids"], json!(["r1"]));
        let result = json!({"step": 1, "type": "task_result", "payload": {
            "id": "k1", "name": "node_a", "error": null, "result": {"foo": "a"}, "interrupts": [],
        }});
        let ended = events.debug(&result);
        let kinds: Vec<_> = ended.iter().map(|e| e["event"].clone()).collect();
        assert_eq!(kinds, [json!("on_chain_stream"), json!("on_chain_end")]);
        assert_eq!(ended[1]["data"]["input"], json!({"foo": "x"}));
        assert_eq!(
            events.end(&json!({"foo": "a"}))["data"]["output"]["foo"],
            "a"
        );
    }
}
