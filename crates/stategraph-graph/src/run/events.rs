//! Stream events: the checkpoints a run saves, and its tasks' results.

use stategraph_checkpoint::{CheckpointConfig, Map, Value, channels as reserved};

use super::{Run, values_map};
use crate::state::State;
use crate::step::Task;
use crate::stream::StreamMode;

/// A checkpoint address as LangGraph's config dict (or null).
fn config_value(config: Option<&CheckpointConfig>) -> Value {
    config.map_or(Value::Null, |c| Value::from(c.to_json()))
}

impl<S: State> Run<'_, S> {
    /// Emits the last saved checkpoint (`checkpoints`/`debug`), with the tasks that follow it.
    pub(super) fn announce_checkpoint(&mut self, tasks: &[Task]) {
        let (Some(e), Some(parent)) = (&self.stream.emitter, self.stream.unannounced.take()) else {
            return;
        };
        let values = values_map(&self.graph.read_values(&self.channels));
        let config = config_value(Some(&self.checkpoint_config));
        let parent = config_value(parent.as_ref());
        let metadata = Value::from(self.metadata.to_json());
        let next: Vec<Value> = tasks.iter().map(|t| Value::from(t.name.as_str())).collect();
        let task_list: Vec<Value> = tasks
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("id", t.id.as_str());
                m.insert("name", t.name.as_str());
                m.insert("interrupts", Value::List(Default::default()));
                m.insert("state", Value::Null);
                Value::Map(m)
            })
            .collect();
        let step = self.metadata.step.unwrap_or_default();
        e.emit_debug(StreamMode::Checkpoints, "checkpoint", step, || {
            let mut m = Map::new();
            m.insert("config", config.clone());
            m.insert("parent_config", parent.clone());
            m.insert("values", values.clone());
            m.insert("metadata", metadata.clone());
            m.insert("next", Value::from(next.clone()));
            m.insert("tasks", Value::from(task_list.clone()));
            Value::Map(m)
        });
    }

    /// Emits a finished task's `updates` and `tasks`/`debug` result events.
    pub(super) fn announce_result(&self, task: &Task, writes: &[(String, Value)]) {
        let Some(e) = &self.stream.emitter else {
            return;
        };
        let mut result = Map::new();
        for (k, v) in writes {
            if self.graph.schema.contains(k) {
                result.insert(k.as_str(), v.clone());
            }
        }
        let error = writes
            .iter()
            .find(|(c, _)| c == reserved::ERROR)
            .map(|(_, v)| v.clone());
        e.emit(StreamMode::Updates, || {
            let mut m = Map::new();
            let update = if result.is_empty() {
                Value::Null
            } else {
                Value::Map(result.clone())
            };
            m.insert(task.name.as_str(), update);
            Value::Map(m)
        });
        let mut m = Map::new();
        m.insert("id", task.id.as_str());
        m.insert("name", task.name.as_str());
        m.insert("error", error.unwrap_or_default());
        m.insert("result", Value::Map(result));
        m.insert("interrupts", Value::List(Default::default()));
        let payload = Value::Map(m);
        e.emit_debug(StreamMode::Tasks, "task_result", self.step, || {
            payload.clone()
        });
    }
}
