//! Stream events: the checkpoints a run saves, and its tasks' results (with the messages
//! they return).

use stategraph_checkpoint::{Map, Value, channels as reserved};
use stategraph_messages::Message;

use super::Run;
use crate::call::RETURN;
use crate::config::EXCLUDED_METADATA;
use crate::graph::{END, START};
use crate::state::{State, Values};
use crate::step::Task;
use crate::stream::{
    CheckpointEvent, ChildRun, MessageEvent, RunTree, StreamEvent, StreamMode, TaskResult,
    TaskStart, UpdatesEvent,
};

/// The LangChain messages in a written value: the value itself, or the items of a list.
fn messages_in(value: &Value) -> Vec<Message> {
    match value {
        Value::Ext(_) => Message::from_value(value).into_iter().collect(),
        Value::List(items) => items
            .iter()
            .filter(|v| matches!(v, Value::Ext(_)))
            .filter_map(|v| Message::from_value(v).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// A task's path as LangGraph's metadata shows it: a `Send`'s task as `(PUSH, index,
/// False)` (its index a number, `False`: not a call); other paths as they are.
fn path_value(path: &[String]) -> Value {
    match path {
        [push, index, _] if push == crate::step::PUSH => {
            let index = index
                .parse::<i64>()
                .map_or_else(|_| Value::from(index.as_str()), Value::from);
            Value::List(
                [Value::from(push.as_str()), index, Value::Bool(false)]
                    .into_iter()
                    .collect(),
            )
        }
        _ => Value::List(path.iter().map(|p| Value::from(p.as_str())).collect()),
    }
}

/// `events` mode: a task's `run` ended with `update` (`None`: it wrote no state key).
fn end_run(run: ChildRun, update: Option<&Values>) {
    let output = || update.map_or(Value::Null, crate::cache::input_map);
    run.stream(output);
    run.end(output);
}

impl<S: State> Run<'_, S> {
    /// Emits the last saved checkpoint (`checkpoints`/`debug`), with the tasks that follow it.
    pub(super) fn announce_checkpoint(&mut self, tasks: &[Task]) {
        let (Some(e), Some(parent)) = (&self.stream.emitter, self.stream.unannounced.take()) else {
            return;
        };
        let step = self.metadata.step.unwrap_or_default();
        e.checkpoint(step, || CheckpointEvent {
            config: self.checkpoint_config.clone(),
            parent_config: parent,
            values: self.graph.read_values(&self.channels),
            metadata: self.metadata.clone(),
            next: tasks.iter().map(|t| t.name.clone()).collect(),
            tasks: tasks
                .iter()
                .map(|t| (t.id.clone(), t.name.clone()))
                .collect(),
        });
    }

    /// Emits the `tasks`/`debug` start event of each task of the step (LangGraph's
    /// `map_debug_tasks` over the step's tasks), those whose writes are reused or cached
    /// included; not the hidden `__start__`. Error handlers scheduled while the step runs
    /// are not announced, as in LangGraph.
    pub(super) fn announce_task_starts(&self, tasks: &[Task], values: &Values) {
        let Some(e) = &self.stream.emitter else {
            return;
        };
        if !e.wants(StreamMode::Tasks) && !e.wants(StreamMode::Debug) {
            return;
        }
        let state = crate::cache::input_map(values);
        for task in tasks.iter().filter(|t| t.name != START) {
            e.task_start(self.step, || TaskStart {
                id: task.id.clone(),
                name: task.name.clone(),
                input: self.task_input(task, &state),
                triggers: task.triggers.to_vec(),
                metadata: self.task_start_metadata(),
            });
        }
    }

    /// What a task is given, as its start event shows it: an entrypoint's argument, a
    /// `Send`'s argument, or the step's `state`.
    fn task_input(&self, task: &Task, state: &Value) -> Value {
        if self.graph.is_entrypoint(&task.name) {
            return self
                .channels
                .get(START)
                .and_then(|c| c.get())
                .unwrap_or(Value::Null);
        }
        match &task.input {
            Some(Value::Map(arg)) => Value::Map(arg.clone()),
            Some(_) => Value::Map(Map::new()),
            None => state.clone(),
        }
    }

    /// Emits a finished task's `updates`, `messages` and `tasks`/`debug` result events.
    pub(super) fn announce_result(&mut self, task: &Task, writes: &[(String, Value)]) {
        let Some(e) = &self.stream.emitter else {
            return;
        };
        let result: Values = writes
            .iter()
            .filter(|(k, _)| self.graph.schema.contains(k) || k == RETURN)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let error = writes
            .iter()
            .find(|(c, _)| c == reserved::ERROR)
            .map(|(_, v)| v.clone());
        // A called task reports what it returned; an entrypoint what it returns to the
        // caller (its `__end__` write), as LangGraph's single-channel output does.
        let returned = writes
            .iter()
            .find(|(c, _)| c == RETURN || (c == END && self.graph.is_entrypoint(&task.name)))
            .map(|(_, v)| v.clone());
        // A failed task has no update to report (LangGraph leaves it out of `updates`); its
        // `tasks` result carries the error.
        let failed = writes.first().is_some_and(|(c, _)| c == reserved::ERROR);
        // A failed task's run reports nothing more, as in LangGraph.
        let run = self.stream.task_runs.remove(&task.id);
        if let Some(run) = run.filter(|_| !failed) {
            end_run(run, (!result.is_empty()).then_some(&result));
        }
        if !failed {
            self.emit_update(|| match returned {
                Some(value) => UpdatesEvent::Returned {
                    node: task.name.clone(),
                    value,
                    cached: false,
                },
                None => UpdatesEvent::Node {
                    node: task.name.clone(),
                    update: (!result.is_empty()).then(|| result.clone()),
                    cached: false,
                },
            });
        }
        if !failed && e.wants(StreamMode::Messages) {
            self.announce_messages(task, &result);
        }
        if let Some(e) = &self.stream.emitter {
            e.task_result(self.step, || TaskResult {
                id: task.id.clone(),
                name: task.name.clone(),
                error,
                result,
                interrupts: Vec::new(),
            });
        }
    }

    /// `messages` mode: each message a task returned that the run has not shown yet (nor was
    /// in the state the task read, nor streamed in pieces while the task ran), with the
    /// task's metadata.
    fn announce_messages(&mut self, task: &Task, result: &Values) {
        let returned: Vec<Message> = result.values().flat_map(messages_in).collect();
        if returned.is_empty() {
            return;
        }
        self.seed_seen_messages();
        let Some(e) = &self.stream.emitter else {
            return;
        };
        // A returned message carries its task's metadata, as LangGraph's handler reads it
        // from the task's run (no `checkpoint_ns`: that is added by what the node invokes).
        let mut metadata = self.task_metadata(task, &self.task_ns(task));
        metadata.insert("ls_integration", "langgraph");
        for message in returned {
            // A message without an id is shown with a new one, as LangGraph does.
            let message = match &message.fields().id {
                Some(id) if !e.mark_seen(id) => continue,
                Some(_) => message,
                None => message.with_id(stategraph_checkpoint::uuid4()),
            };
            let metadata = metadata.clone();
            e.emit(StreamMode::Messages, || {
                StreamEvent::Messages(MessageEvent { message, metadata })
            });
        }
    }

    /// Messages already in the state when streaming starts are not news.
    pub(super) fn seed_seen_messages(&mut self) {
        if self.stream.messages_seeded {
            return;
        }
        let Some(e) = &self.stream.emitter else {
            return;
        };
        self.stream.messages_seeded = true;
        for v in self.graph.read_values(&self.channels).values() {
            for m in messages_in(v) {
                if let Some(id) = &m.fields().id {
                    e.mark_seen(id);
                }
            }
        }
    }

    /// The metadata every runnable of the run carries, as LangGraph's `ensure_config` makes
    /// it: the run's metadata, then the configurable ids it propagates (`task_id`,
    /// `run_id`, `assistant_id`, `graph_id`; when set and not already there), and the
    /// thread's id.
    fn run_metadata(&self) -> Map {
        let mut metadata = Map::new();
        for (k, v) in &self.config.metadata {
            metadata.insert(k.as_str(), Value::from(v.clone()));
        }
        for (k, v) in self.propagated_ids() {
            if metadata.get(k).is_none() {
                metadata.insert(k, v);
            }
        }
        if let Some(thread) = &self.config.thread_id
            && metadata.get("thread_id").is_none()
        {
            metadata.insert("thread_id", thread.as_str());
        }
        metadata
    }

    /// The metadata of the model tokens `task` (in namespace `ns`) streams, as LangGraph's:
    /// the [run's](Self::run_metadata), `langgraph_step`, `langgraph_node`,
    /// `langgraph_triggers`, `langgraph_path`, `langgraph_checkpoint_ns` and `checkpoint_ns`
    /// (the model adds its own: `ls_integration`, `ls_provider`, …).
    pub(super) fn message_metadata(&self, task: &Task, ns: &str) -> Map {
        let mut metadata = self.task_metadata(task, ns);
        metadata.insert("checkpoint_ns", ns);
        metadata
    }

    /// The run's metadata and the task's `langgraph_*` keys.
    fn task_metadata(&self, task: &Task, ns: &str) -> Map {
        let mut metadata = self.run_metadata();
        metadata.insert("langgraph_step", self.step);
        metadata.insert("langgraph_node", task.name.as_str());
        metadata.insert(
            "langgraph_triggers",
            Value::List(
                task.triggers
                    .iter()
                    .map(|t| Value::from(t.as_str()))
                    .collect(),
            ),
        );
        metadata.insert("langgraph_path", path_value(&task.path));
        metadata.insert("langgraph_checkpoint_ns", ns);
        metadata
    }

    /// `events` mode: the run of this graph (under its parent task's, for a subgraph), its
    /// start reported.
    pub(super) fn graph_run(
        &self,
        emitter: &crate::stream::Emitter,
        setup: &super::entry::RunSetup,
    ) -> ChildRun {
        if !emitter.wants(StreamMode::Events) {
            return ChildRun::off();
        }
        let mut metadata = self.run_metadata();
        metadata.insert("ls_integration", "langgraph");
        // The root run takes the config's name and id (a server's run), as LangChain's.
        let root = !setup.parent_run.is_on();
        let name = match &self.config.run_name {
            Some(name) if root => name.as_str(),
            _ => self.graph.name(),
        };
        let run_id = root
            .then(|| self.config.configurable.get("run_id"))
            .flatten()
            .and_then(serde_json::Value::as_str);
        RunTree::graph(
            emitter,
            &setup.parent_run,
            (name, run_id),
            &self.config.tags,
            metadata,
            setup.input.clone().unwrap_or(Value::Null),
        )
    }

    /// `events` mode: reports that `task` starts (given `values` as the step's state), and
    /// returns the tree its node's runnables report under.
    pub(super) fn start_task_run(&mut self, task: &Task, ns: &str, values: &Values) -> RunTree {
        let graph = self.stream.graph_run.tree();
        if !graph.is_on() {
            return RunTree::off();
        }
        let mut metadata = self.task_metadata(task, ns);
        metadata.insert("ls_integration", "langgraph");
        let configured = Map::from_iter([("checkpoint_ns", ns)]);
        // What the node is given: the state with its managed values, or a `Send`'s argument.
        let input = || {
            let mut values = values.clone();
            self.graph
                .schema
                .add_managed(&mut values, self.step, self.stop);
            self.task_input(task, &crate::cache::input_map(&values))
        };
        let run = graph.task(&task.name, self.step, metadata, configured, input);
        let tree = run.tree();
        self.stream.task_runs.insert(task.id.clone(), run);
        tree
    }

    /// `events` mode: the run tree of `task`, if it runs.
    pub(super) fn task_tree(&self, task_id: &str) -> RunTree {
        self.stream
            .task_runs
            .get(task_id)
            .map_or_else(RunTree::off, ChildRun::tree)
    }

    /// Emits an `updates` event, which the graph's run also streams in `events` mode.
    pub(super) fn emit_update(&self, event: impl FnOnce() -> UpdatesEvent) {
        let Some(e) = &self.stream.emitter else {
            return;
        };
        let graph = &self.stream.graph_run;
        if !e.wants(StreamMode::Updates) && !graph.is_on() {
            return;
        }
        let event = event();
        graph.stream(|| event.to_value());
        e.emit(StreamMode::Updates, || StreamEvent::Updates(event));
    }

    /// The metadata a `tasks` / `debug` stream reports with a task's start, as LangGraph
    /// does: the run config's `metadata`, with the `configurable` ids LangGraph propagates
    /// into it (`run_id`, `assistant_id`, `graph_id`, `task_id`, when set and not already
    /// there), but for the keys that repeat the task's own fields and namespace
    /// (`thread_id`, `checkpoint_ns`, `langgraph_step`, …).
    pub(super) fn task_start_metadata(&self) -> Map {
        let mut metadata = Map::new();
        for (k, v) in &self.config.metadata {
            if !EXCLUDED_METADATA.contains(&k.as_str()) {
                metadata.insert(k.as_str(), Value::from(v.clone()));
            }
        }
        for (k, v) in self.propagated_ids() {
            if !self.config.metadata.contains_key(k) {
                metadata.insert(k, v);
            }
        }
        metadata
    }

    /// The `configurable` ids LangGraph's `ensure_config` propagates into metadata (its
    /// `_PROPAGATE_TO_METADATA`, but for the checkpoint's own address), those set: Python's
    /// `if value`, so not `null`, `false`, `""` or `0`.
    fn propagated_ids(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        const PROPAGATED: [&str; 4] = ["task_id", "run_id", "assistant_id", "graph_id"];
        PROPAGATED.into_iter().filter_map(|k| {
            let v = self.config.configurable.get(k)?;
            let unset = matches!(v, serde_json::Value::Null | serde_json::Value::Bool(false))
                || v.as_str() == Some("")
                || v.as_i64() == Some(0);
            (!unset).then(|| (k, Value::from(v.clone())))
        })
    }

    /// The namespace `task` runs in (and a subgraph it starts checkpoints under):
    /// `node:task_id` under the run's own.
    pub(super) fn task_ns(&self, task: &Task) -> String {
        match self.checkpoint_config.checkpoint_ns.as_str() {
            "" => format!("{}:{}", task.name, task.id),
            parent => format!("{parent}|{}:{}", task.name, task.id),
        }
    }
}
