//! Writes to untracked channels (LangGraph's `UntrackedValue`), which are never saved.

use stategraph_checkpoint::{Map, Value, channels};

use super::CompiledGraph;
use crate::channel::ChannelSpec;
use crate::node::send_value;
use crate::state::State;

impl<S: State> CompiledGraph<S> {
    /// `writes` without those to untracked channels (and without untracked keys in the map
    /// arguments of `Send`s), as LangGraph saves a task's writes; `None` when nothing is
    /// left out.
    pub(crate) fn untracked_writes(
        &self,
        writes: &[(String, Value)],
    ) -> Option<Vec<(String, Value)>> {
        let untracked = |name: &str| {
            self.channel_specs
                .binary_search_by(|(k, _)| (**k).cmp(name))
                .ok()
                .and_then(|i| self.channel_specs.get(i))
                .is_some_and(|(_, spec)| matches!(spec, ChannelSpec::Untracked { .. }))
        };
        if !self
            .channel_specs
            .iter()
            .any(|(_, spec)| matches!(spec, ChannelSpec::Untracked { .. }))
        {
            return None;
        }
        let sanitized = |value: &Value| -> Value {
            let Some((node, Value::Map(arg))) = crate::node::parse_send(value) else {
                return value.clone();
            };
            let arg: Map = arg
                .into_iter()
                .filter(|(k, _)| !k.as_str().is_some_and(untracked))
                .collect();
            send_value(&node, Value::Map(arg))
        };
        Some(
            writes
                .iter()
                .filter(|(c, _)| !untracked(c))
                .map(|(c, v)| {
                    if c == channels::TASKS {
                        (c.clone(), sanitized(v))
                    } else {
                        (c.clone(), v.clone())
                    }
                })
                .collect(),
        )
    }
}
