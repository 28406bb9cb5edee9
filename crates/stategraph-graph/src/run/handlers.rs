//! Error handlers in a run: a task whose node has a handler and fails for good is recorded as
//! failed (`__error__`, then `__error_source_node__` naming the node) and its handler task
//! joins the step; a step continued after such a failure runs the handler, not the node.

use std::collections::HashMap;
use std::sync::Arc;

use stategraph_checkpoint::{Value, channels as reserved};

use super::Run;
use crate::handler::{NodeFailure, error_text, handler_task};
use crate::state::State;
use crate::step::Task;

/// The error handlers of the current step.
#[derive(Default)]
pub(super) struct Handlers {
    /// Handler tasks to start: a task of the step just failed.
    pub(super) queued: Vec<Task>,
    /// Each handler task of the step, by id: its namespace and the failure it handles.
    pub(super) of: HashMap<String, (String, Arc<NodeFailure>)>,
}

impl<S: State> Run<'_, S> {
    /// The handler node of `node`'s failures, if it has one.
    fn error_handler_of(&self, node: &str) -> Option<&str> {
        let i = *self.graph.node_index.get(node)?;
        self.graph.nodes.get(i)?.error_handler.as_deref()
    }

    /// Queues the handler of `failed`'s failure with `error`, if its node has one: whether it
    /// did (then the failure is handled, not the run's).
    pub(super) fn hand_to_handler(&mut self, failed: &Task, error: &str) -> bool {
        let Some(handler) = self.error_handler_of(&failed.name).map(str::to_owned) else {
            return false;
        };
        let h = handler_task(
            self.checkpoint.id.as_str(),
            &self.task_ns(failed),
            self.step,
            &handler,
            failed,
            NodeFailure::new(&failed.name, error),
        );
        self.handlers
            .of
            .insert(h.task.id.clone(), (h.ns, h.failure));
        self.handlers.queued.push(h.task);
        true
    }

    /// The checkpoint namespace of `task` (a handler's nests under the task it handles).
    pub(super) fn ns_of(&self, task: &Task) -> String {
        match self.handlers.of.get(&task.id) {
            Some((ns, _)) => ns.clone(),
            None => self.task_ns(task),
        }
    }

    /// The failure `task` handles, if it is a handler task.
    pub(super) fn failure_of(&self, task: &Task) -> Option<Arc<NodeFailure>> {
        self.handlers.of.get(&task.id).map(|(_, f)| Arc::clone(f))
    }

    /// LangGraph's `_resume_error_handlers_if_applicable`: a task of the step whose saved
    /// writes say it failed and went to its handler (an `__error__` and an
    /// `__error_source_node__` write) is not run again — it keeps its error — and its handler
    /// joins the step afresh, to run (again).
    pub(super) fn resume_error_handlers(&mut self, tasks: &mut Vec<Task>) {
        let mut errors: HashMap<&str, &Value> = HashMap::new();
        let mut routed: Vec<&str> = Vec::new();
        for w in &self.pending_writes {
            if w.channel == reserved::ERROR {
                errors.insert(&w.task_id, &w.value);
            } else if w.channel == reserved::ERROR_SOURCE_NODE {
                routed.push(&w.task_id);
            }
        }
        let failed: Vec<(String, Value)> = routed
            .into_iter()
            .filter_map(|id| Some((id.to_owned(), (*errors.get(id)?).clone())))
            .collect();
        for (id, error) in failed {
            let Some(task) = tasks.iter_mut().find(|t| t.id == id) else {
                continue;
            };
            if self.error_handler_of(&task.name).is_none() {
                continue;
            }
            let text = error_text(&error);
            task.writes = vec![(reserved::ERROR.to_owned(), error)];
            let task = task.clone();
            self.hand_to_handler(&task, &text);
        }
        tasks.append(&mut self.handlers.queued);
    }
}
