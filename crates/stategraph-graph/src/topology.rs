//! The shape of a compiled graph, for drawing it (LangGraph's `get_graph()`).

use std::collections::BTreeSet;

use crate::compiled::CompiledGraph;
use crate::graph::{END, START};
use crate::state::State;

mod mermaid;

/// An edge of a graph's drawing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DrawnEdge {
    /// The node it leaves (`__start__` for the graph's input).
    pub source: String,
    /// The node it leads to (`__end__` when the path finishes).
    pub target: String,
    /// A conditional edge: taken when the routing function returns its target.
    pub conditional: bool,
    /// What the edge is labelled with: the path-map key that leads to its target, where the
    /// key is not the target's name (LangGraph's edge `data`).
    pub label: Option<String>,
}

/// What [`CompiledGraph::topology`] returns: nodes and edges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// `__start__`, the nodes in the order they were added, then `__end__`.
    pub nodes: Vec<String>,
    /// The edges: those the graph declares, sorted, then those to `__end__` from nodes that
    /// lead nowhere (LangGraph's order).
    pub edges: Vec<DrawnEdge>,
    /// What a drawing notes on a node, in order (LangGraph's node metadata): `defer = True`
    /// for a deferred node, `__interrupt = before` (`after`, `before,after`) for a
    /// breakpoint.
    pub metadata: std::collections::BTreeMap<String, Vec<(String, String)>>,
}

impl<S: State> CompiledGraph<S> {
    /// The state's keys, in declaration order.
    pub fn state_keys(&self) -> Vec<String> {
        self.schema.keys().map(str::to_owned).collect()
    }

    /// The nodes that are subgraphs, in the order they were added, each with the
    /// subgraph's state keys.
    pub fn subgraph_nodes(&self) -> Vec<(String, Vec<String>)> {
        self.nodes
            .iter()
            .filter_map(|n| n.subgraph.as_ref().map(|g| (n.name.clone(), g.keys())))
            .collect()
    }

    /// The graph's nodes and edges as LangGraph draws them: declared edges (a join's sources
    /// each lead to its target), a conditional edge to every target of a routing function's
    /// path map (to every node and `__end__` without one), and an edge to `__end__` from each
    /// node that has no outgoing edge. Routes chosen at run time by commands are not drawn.
    ///
    /// ```
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, END, START, Schema, StateGraph};
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    /// g.add_edge(START, "a").add_edge("a", END);
    /// let t = g.compile().unwrap().topology();
    /// assert_eq!(t.nodes, ["__start__", "a", "__end__"]);
    /// assert_eq!(t.edges.len(), 2);
    /// ```
    pub fn topology(&self) -> Topology {
        let user: Vec<&str> = self
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .filter(|n| *n != START)
            .collect();
        let mut edges = BTreeSet::new();
        let mut termini: BTreeSet<&str> = BTreeSet::new();
        for source in std::iter::once(START).chain(user.iter().copied()) {
            let Some(out) = self.edges.get(source) else {
                if source != START {
                    termini.insert(source);
                }
                continue;
            };
            for (channel, _) in &out.writes {
                let target = channel.strip_prefix("branch:to:").or_else(|| {
                    channel
                        .strip_prefix("join:")
                        .and_then(|j| j.rsplit(':').next())
                });
                if let Some(target) = target {
                    edges.insert(edge(source, target, false));
                }
            }
            for branch in &out.branches {
                match &branch.path_map {
                    Some(map) => {
                        for (key, target) in map {
                            let mut e = edge(source, target, true);
                            e.label = (key != target).then(|| key.clone());
                            edges.insert(e);
                        }
                    }
                    None => {
                        for target in user.iter().copied().chain([END]) {
                            edges.insert(edge(source, target, true));
                        }
                    }
                }
            }
            if out.writes.is_empty() && out.branches.is_empty() && source != START {
                termini.insert(source);
            }
        }
        let mut nodes = vec![START.to_owned()];
        nodes.extend(user.iter().map(|n| (*n).to_owned()));
        nodes.push(END.to_owned());
        let mut edges: Vec<DrawnEdge> = edges.into_iter().collect();
        edges.extend(termini.into_iter().map(|t| edge(t, END, false)));
        Topology {
            nodes,
            edges,
            metadata: self.drawn_metadata(&user),
        }
    }

    /// What a drawing notes on each of `nodes`: deferral, then breakpoints.
    fn drawn_metadata(
        &self,
        nodes: &[&str],
    ) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
        let mut metadata = std::collections::BTreeMap::new();
        for n in nodes {
            let mut lines = Vec::new();
            let channel = crate::graph::branch_channel(n);
            let deferred = self.channel_specs.iter().any(|(c, spec)| {
                **c == *channel && matches!(spec, crate::channel::ChannelSpec::LastValueAfterFinish)
            });
            if deferred {
                lines.push(("defer".to_owned(), "True".to_owned()));
            }
            let before = self.interrupt_before.iter().any(|b| b == n);
            let after = self.interrupt_after.iter().any(|a| a == n);
            let interrupt = match (before, after) {
                (true, true) => Some("before,after"),
                (true, false) => Some("before"),
                (false, true) => Some("after"),
                (false, false) => None,
            };
            if let Some(i) = interrupt {
                lines.push(("__interrupt".to_owned(), i.to_owned()));
            }
            if !lines.is_empty() {
                metadata.insert((*n).to_owned(), lines);
            }
        }
        metadata
    }
}

fn edge(source: &str, target: &str, conditional: bool) -> DrawnEdge {
    DrawnEdge {
        source: source.to_owned(),
        target: target.to_owned(),
        conditional,
        label: None,
    }
}

#[cfg(test)]
mod tests {
    use stategraph_checkpoint::Map;

    use crate::{DynState, END, START, Schema, StateGraph};

    #[test]
    fn seed_graph_draws_a_chain_and_routes_draw_their_targets() {
        let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
        for n in ["a", "b", "c"] {
            g.add_node(n, |_s, _c| async { Ok(Map::new()) });
        }
        g.add_edge(START, "a");
        g.add_conditional_edges("a", |_s: &DynState| Ok(vec!["b".into()]))
            .path_map(["b", "c"]);
        g.add_edge("b", END);
        let t = g.compile().unwrap().topology();
        let drawn: Vec<_> = t
            .edges
            .iter()
            .map(|e| (e.source.as_str(), e.target.as_str(), e.conditional))
            .collect();
        assert_eq!(
            drawn,
            [
                ("__start__", "a", false),
                ("a", "b", true),
                ("a", "c", true),
                ("b", "__end__", false),
                ("c", "__end__", false),
            ]
        );
    }
}
