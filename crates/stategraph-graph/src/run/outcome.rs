//! A task's outcome: what its node returned as channel writes (state update, then edges),
//! recorded on the task and saved against the current checkpoint.

use std::sync::Arc;

use stategraph_checkpoint::{Map, Value, channels as reserved};

use super::Run;
use crate::error::{GraphError, NodeError, Signal};
use crate::graph::START;
use crate::interrupt::{Interrupt, Scratchpad};
use crate::node::NodeOutput;
use crate::state::{State, Values};
use crate::step::Task;
use crate::stream::{Raw, StreamMode, TaskResult, UpdatesEvent};

/// Turns a parent-addressed `Command` into the error that carries it out of the subgraph.
fn parent_command<S: State>(c: crate::node::Command<S::Update>) -> Result<NodeError, NodeError> {
    let update = match c.update {
        Some(u) => S::into_writes(u).map_err(NodeError::from)?,
        None => Vec::new(),
    };
    let mut cmd = crate::error::ParentCommand {
        update,
        goto: Vec::new(),
        sends: Vec::new(),
    };
    for g in c.goto {
        match g {
            crate::node::Goto::Node(n) => cmd.goto.push(n),
            crate::node::Goto::Send(s) => {
                let arg: Map = S::into_writes(s.arg)
                    .map_err(NodeError::from)?
                    .into_iter()
                    .collect();
                cmd.sends.push((s.node, Value::Map(arg)));
            }
        }
    }
    Ok(NodeError::to_parent(cmd))
}

impl<S: State> Run<'_, S> {
    /// Records what task `i`'s node returned (or how it failed).
    pub(super) async fn finish_output(
        &mut self,
        tasks: &mut [Task],
        pads: &[Option<Arc<std::sync::Mutex<Scratchpad>>>],
        i: usize,
        output: Result<NodeOutput<S::Update>, NodeError>,
        first_error: &mut Option<GraphError>,
    ) -> Result<(), GraphError> {
        let Some(task) = tasks.get_mut(i) else {
            return Ok(());
        };
        let runs = self.task_tree(&task.id);
        let result = output.and_then(|o| self.node_writes(&task.name, o, &runs));
        let resume_writes = pads
            .get(i)
            .and_then(Option::as_ref)
            .map(|p| std::mem::take(&mut p.lock().unwrap_or_else(|e| e.into_inner()).writes))
            .unwrap_or_default();
        self.finish_task(task, result, resume_writes, first_error)
            .await
    }

    /// The writes of the built-in `__start__` node: each input key, then the START edges.
    pub(super) fn start_writes(&self) -> Result<Vec<(String, Value)>, NodeError> {
        let mut writes = Vec::new();
        if let Some(Value::Map(input)) = self.channels.get(START).and_then(|c| c.get()) {
            for (k, v) in input {
                // An input schema narrows what the input writes (LangGraph drops the rest).
                if let Value::Str(k) = k
                    && self.graph.is_input(&k)
                {
                    writes.push((k.to_string(), v));
                }
            }
        }
        let edges = self.graph.edge_writes(
            START,
            &self.channels,
            &writes,
            Some((self.step, self.stop)),
            &crate::stream::RunTree::off(),
        )?;
        writes.extend(edges);
        Ok(writes)
    }

    /// A node's output as channel writes: its state update, then its edges.
    fn node_writes(
        &self,
        node: &str,
        output: NodeOutput<S::Update>,
        runs: &crate::stream::RunTree,
    ) -> Result<Vec<(String, Value)>, NodeError> {
        let (mut writes, goto) = match output {
            NodeOutput::Update(u) => (S::into_writes(u).map_err(NodeError::from)?, Vec::new()),
            NodeOutput::Empty => (Vec::new(), Vec::new()),
            NodeOutput::Writes(mut w) => {
                // Produced by the engine (subgraph results): state writes plus control writes.
                let own: Vec<(String, Value)> = w
                    .iter()
                    .filter(|(k, _)| self.graph.schema.contains(k))
                    .cloned()
                    .collect();
                w.extend(self.graph.edge_writes(
                    node,
                    &self.channels,
                    &own,
                    Some((self.step, self.stop)),
                    runs,
                )?);
                return Ok(w);
            }
            NodeOutput::Command(c) if c.parent => return Err(parent_command::<S>(c)?),
            NodeOutput::RawCommand {
                writes,
                goto,
                parent: true,
            } => {
                return Err(NodeError::to_parent(crate::error::ParentCommand {
                    update: writes,
                    goto,
                    sends: Vec::new(),
                }));
            }
            NodeOutput::RawCommand { writes, goto, .. } => (
                writes,
                goto.into_iter().map(crate::node::Goto::Node).collect(),
            ),
            NodeOutput::Command(c) => match c.update {
                Some(u) => (S::into_writes(u).map_err(NodeError::from)?, c.goto),
                None => (Vec::new(), c.goto),
            },
        };
        self.graph
            .check_state_writes(&writes)
            .map_err(NodeError::from)?;
        let own = writes.clone();
        writes.extend(self.graph.goto_writes(node, goto, None)?);
        writes.extend(self.graph.edge_writes(
            node,
            &self.channels,
            &own,
            Some((self.step, self.stop)),
            runs,
        )?);
        Ok(writes)
    }

    /// Records a task's outcome and saves it against the current checkpoint.
    pub(super) async fn finish_task(
        &mut self,
        task: &mut Task,
        result: Result<Vec<(String, Value)>, NodeError>,
        resume_writes: Vec<(String, Value)>,
        first_error: &mut Option<GraphError>,
    ) -> Result<(), GraphError> {
        // What a task with a cache key leaves in the cache once it succeeded: its own writes.
        let mut cacheable = None;
        let writes = match result {
            Ok(w) => {
                if self.cache_keys.contains_key(&task.id) {
                    cacheable = Some(w.clone());
                }
                // A task that finished with nothing but control writes is marked as done.
                let mut all = resume_writes;
                if w.is_empty() {
                    all.push((reserved::NO_WRITES.to_owned(), Value::Null));
                }
                all.extend(w);
                all
            }
            Err(NodeError {
                signal: Some(Signal::Interrupt(interrupts)),
                ..
            }) => {
                let mut writes = vec![(
                    reserved::INTERRUPT.to_owned(),
                    Value::List(interrupts.iter().map(Interrupt::to_value).collect()),
                )];
                writes.extend(resume_writes);
                self.save_writes(task, &writes).await?;
                self.stream.task_runs.remove(&task.id);
                self.emit_update(|| UpdatesEvent::Interrupt(interrupts.clone()));
                if let Some(em) = &self.stream.emitter {
                    // The state as it stands, with the interrupts (LangGraph 1.2).
                    em.emit(StreamMode::Values, || {
                        let values = self.graph.read_values(&self.channels);
                        Raw::values(values, self.graph.output_channel(), interrupts.clone())
                    });
                    em.task_result(self.step, || TaskResult {
                        id: task.id.clone(),
                        name: task.name.clone(),
                        error: None,
                        result: Values::new(),
                        interrupts: interrupts.clone(),
                    });
                }
                self.interrupts.extend(interrupts);
                return Ok(());
            }
            Err(NodeError {
                signal: Some(Signal::Parent(command)),
                ..
            }) => {
                // A command for the parent graph: this task writes nothing; the run stops and
                // the command leaves the subgraph as its result (a graph without a parent
                // fails with `NoParentGraph`).
                if first_error.is_none() {
                    *first_error = Some(GraphError::NoParentGraph {
                        node: task.name.clone(),
                    });
                    self.parent_command = Some(command);
                }
                return Ok(());
            }
            Err(mut e) => {
                self.stream.task_runs.remove(&task.id);
                // A node with an error handler hands its failure over: the handler joins the
                // step, and the failure is recorded as handled (LangGraph's
                // `__error_source_node__`), not as the run's.
                let handled = task.name != START && self.hand_to_handler(task, &e.message);
                if !handled && first_error.is_none() {
                    *first_error = Some(GraphError::NodeFailed {
                        node: task.name.clone(),
                        task_id: task.id.clone(),
                        message: e.message.clone(),
                        source: e.source.take(),
                    });
                }
                let mut writes = vec![(reserved::ERROR.to_owned(), Value::from(e.message))];
                if handled {
                    writes.push((
                        reserved::ERROR_SOURCE_NODE.to_owned(),
                        Value::from(task.name.clone()),
                    ));
                }
                writes
            }
        };
        self.save_writes(task, &writes).await?;
        if let Some(w) = cacheable {
            self.cache_result(task, &w).await;
        }
        if task.name != START {
            self.announce_result(task, &writes);
        }
        if writes.iter().any(|(c, _)| c != reserved::ERROR) {
            task.writes = writes;
        }
        Ok(())
    }
}
