//! Reading threads without the graph's code: a stand-in graph inferred from a checkpoint.
//!
//! Tools that inspect a database (the `stategraph` CLI, audits, repairs) meet threads written
//! by graphs they cannot run — another program's, or Python's. [`reader_graph`] builds a
//! [`CompiledGraph<DynState>`] from what a checkpoint itself records: its state keys, and its
//! trigger channels (`branch:to:NODE` for each node, `join:A+B:NODE` for each join edge),
//! which is how LangGraph wires graphs built from standard edges. Attached to the saver, its
//! `get_state` and `get_state_history` give the snapshots the real graph would — the same
//! values, metadata, configs, and `next`/`tasks` computed from the triggers — without running
//! anything (its nodes do nothing and are never called by reads).
//!
//! What it cannot know: reducers. Values are read as stored; where a snapshot applies pending
//! writes (the latest state of an interrupted or failed step), state keys merge by a default
//! rule for this case — lists concatenate, maps merge, anything else takes the last
//! write. Conditional edges are invisible until they fire (their targets still have trigger
//! channels, so `next` is right for checkpoints that recorded the route). A deferred node
//! (`defer=True`) is recognised only while the checkpoint holds its pending edge (stored as
//! a `[value, finished]` pair); read from a checkpoint where it does not, the node counts as
//! an ordinary one, and earlier snapshots may list it in `next` a step early.

use std::collections::BTreeSet;

use stategraph_checkpoint::{Checkpoint, Value};

use crate::channel::Reducer;
use crate::compiled::CompiledGraph;
use crate::error::GraphError;
use crate::graph::{START, StateGraph};
use crate::node::NodeOutput;
use crate::state::{DynState, Schema};

const BRANCH: &str = "branch:to:";
const JOIN: &str = "join:";

/// The default merge for a state key whose reducer is unknown: list → concatenation,
/// map → merge (the update's keys win), anything else → the last write.
pub fn default_merge() -> Reducer {
    Reducer::new("merge", None, |cur, upd| {
        Ok(match (cur, upd) {
            (Value::List(mut a), Value::List(b)) => {
                a.extend(b);
                Value::List(a)
            }
            (Value::Map(mut a), Value::Map(b)) => {
                for (k, v) in b.iter() {
                    a.insert(k.clone(), v.clone());
                }
                Value::Map(a)
            }
            (_, last) => last,
        })
    })
}

/// Whether `channel` is one of LangGraph's own (triggers, tasks, interrupts) rather than a
/// state key.
fn is_internal(channel: &str) -> bool {
    channel.starts_with("__") || channel.starts_with(BRANCH) || channel.starts_with(JOIN)
}

/// The nodes and join edges a checkpoint's trigger channels name.
fn wiring(channels: &BTreeSet<&str>) -> (BTreeSet<String>, Vec<(Vec<String>, String)>) {
    let mut nodes = BTreeSet::new();
    let mut joins = Vec::new();
    for ch in channels {
        if let Some(node) = ch.strip_prefix(BRANCH) {
            nodes.insert(node.to_owned());
        } else if let Some(rest) = ch.strip_prefix(JOIN)
            && let Some((sources, node)) = rest.rsplit_once(':')
        {
            let sources: Vec<String> = sources.split('+').map(str::to_owned).collect();
            nodes.insert(node.to_owned());
            nodes.extend(sources.iter().cloned());
            joins.push((sources, node.to_owned()));
        }
    }
    (nodes, joins)
}

/// A graph that reads threads whose latest checkpoint is `checkpoint` (see the module docs).
pub fn reader_graph(checkpoint: &Checkpoint) -> Result<CompiledGraph<DynState>, GraphError> {
    let channels: BTreeSet<&str> = checkpoint
        .channel_versions
        .keys()
        .chain(checkpoint.channel_values.keys().map(String::as_str))
        .collect();
    let mut schema = Schema::new();
    for ch in channels.iter().filter(|c| !is_internal(c)) {
        schema = schema.reducer(*ch, default_merge());
    }
    let (mut nodes, joins) = wiring(&channels);
    // Nodes that ran but whose trigger channel is gone from the record still count.
    nodes.extend(
        checkpoint
            .versions_seen
            .keys()
            .filter(|n| !n.starts_with("__"))
            .map(str::to_owned),
    );
    let mut graph = StateGraph::<DynState>::with_schema(schema);
    for node in &nodes {
        graph.add_node(node.clone(), |_s, _ctx| async {
            Ok(NodeOutput::<stategraph_checkpoint::Map>::Empty)
        });
        graph.add_edge(START, node.clone());
    }
    for (sources, node) in joins {
        graph.add_join(sources, node);
    }
    // LangGraph's after-finish channels (deferred nodes) store `[value, finished]`.
    for (ch, v) in &checkpoint.channel_values {
        let deferred = match ch.strip_prefix(BRANCH) {
            Some(node) => Some(node),
            None => ch
                .strip_prefix(JOIN)
                .and_then(|rest| rest.rsplit_once(':'))
                .map(|(_, n)| n),
        };
        if let (Some(node), Value::List(pair)) = (deferred, v)
            && pair.len() == 2
            && matches!(pair.get(1), Some(Value::Bool(_)))
        {
            graph.set_defer(node);
        }
    }
    graph.compile()
}

#[cfg(test)]
mod tests {
    use stategraph_checkpoint::{ChannelVersion, List};

    use super::*;
    use crate::channel::ChannelSpec;

    /// A branch or join channel stored as `[value, finished]` marks its node deferred.
    #[test]
    fn pending_edges_of_deferred_nodes_are_recognised() {
        let mut checkpoint = Checkpoint::empty();
        let pair = |v: Value| Value::List(List::from(vec![v, Value::Bool(false)]));
        for (ch, v) in [
            ("log", Value::List(List::new())),
            ("branch:to:d", pair(Value::Null)),
            ("branch:to:a", Value::Null),
            ("join:a+b:e", pair(Value::List(List::new()))),
        ] {
            checkpoint.channel_values.insert(ch.to_owned(), v);
            checkpoint
                .channel_versions
                .insert(ch, ChannelVersion::Int(1));
        }
        let graph = reader_graph(&checkpoint).unwrap();
        let spec = |name: &str| {
            graph
                .channel_specs
                .iter()
                .find(|(k, _)| &**k == name)
                .map(|(_, s)| s.clone())
        };
        assert!(matches!(
            spec("branch:to:d"),
            Some(ChannelSpec::LastValueAfterFinish)
        ));
        assert!(matches!(
            spec("branch:to:e"),
            Some(ChannelSpec::LastValueAfterFinish)
        ));
        assert!(matches!(
            spec("join:a+b:e"),
            Some(ChannelSpec::NamedBarrierAfterFinish(_))
        ));
        assert!(matches!(
            spec("branch:to:a"),
            Some(ChannelSpec::Ephemeral { .. })
        ));
    }
}
