//! Writes to untracked channels (LangGraph's `UntrackedValue`), which are never saved.

use stategraph_checkpoint::{Map, Value, channels as reserved};

use std::sync::Arc;

use super::CompiledGraph;
use crate::channel::ChannelSpec;
use crate::node::send_value;
use crate::state::State;

/// The untracked channels among `specs`.
pub(super) fn channels(specs: &[(Arc<str>, ChannelSpec)]) -> Arc<[Arc<str>]> {
    specs
        .iter()
        .filter(|(_, spec)| matches!(spec, ChannelSpec::Untracked { .. }))
        .map(|(k, _)| Arc::clone(k))
        .collect()
}

impl<S: State> CompiledGraph<S> {
    /// `writes` without those to untracked channels (and without untracked keys in the map
    /// arguments of `Send`s), as LangGraph saves a task's writes; `None` when nothing is
    /// left out.
    pub(crate) fn untracked_writes(
        &self,
        writes: &[(String, Value)],
    ) -> Option<Vec<(String, Value)>> {
        if self.untracked.is_empty() {
            return None;
        }
        let untracked = |name: &str| self.untracked.iter().any(|u| &**u == name);
        // A `Send`'s map argument without its untracked keys (`None`: it has none).
        let sanitized = |value: &Value| -> Option<Value> {
            let (node, Value::Map(arg)) = crate::node::parse_send(value)? else {
                return None;
            };
            if !arg.iter().any(|(k, _)| k.as_str().is_some_and(untracked)) {
                return None;
            }
            let arg: Map = arg
                .into_iter()
                .filter(|(k, _)| !k.as_str().is_some_and(untracked))
                .collect();
            Some(send_value(&node, Value::Map(arg)))
        };
        let clean_send =
            |c: &str, v: &Value| (c == reserved::TASKS).then(|| sanitized(v)).flatten();
        let touched = writes
            .iter()
            .any(|(c, v)| untracked(c) || clean_send(c, v).is_some());
        if !touched {
            return None;
        }
        Some(
            writes
                .iter()
                .filter(|(c, _)| !untracked(c))
                .map(|(c, v)| match clean_send(c, v) {
                    Some(clean) => (c.clone(), clean),
                    None => (c.clone(), v.clone()),
                })
                .collect(),
        )
    }
}
