//! The shape of a compiled graph, for drawing it (LangGraph's `get_graph()`): nodes, edges
//! and notes, with subgraphs drawn into their parent on request ([`Xray`]), written out as
//! Mermaid ([`Topology::draw_mermaid`]), as ASCII art ([`Topology::draw_ascii`]) or as
//! LangChain's drawing JSON ([`Topology::to_json`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::compiled::CompiledGraph;
use crate::graph::{END, START};
use crate::state::State;

mod ascii;
mod json;
mod mermaid;
mod sugiyama;
mod xray;

pub use ascii::DrawAsciiError;
pub use json::DrawingJsonError;

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

/// What a drawing notes on a node, in order (LangGraph's node metadata).
pub type NodeNotes = serde_json::Map<String, serde_json::Value>;

/// What [`CompiledGraph::topology`] returns: nodes and edges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Node ids: `__start__`, the nodes in the order they were added (a node's own error
    /// handler just before it, the default handler after them all), then `__end__` when an
    /// edge leads there. A subgraph drawn into its parent replaces its node by its own
    /// nodes, named `node:child`, at the end.
    pub nodes: Vec<String>,
    /// The edges: those the graph declares, sorted, then those to `__end__` from nodes that
    /// lead nowhere (LangGraph's order).
    pub edges: Vec<DrawnEdge>,
    /// What a drawing notes on a node (LangGraph's node metadata): `defer: true` for a
    /// deferred node, `__interrupt: "before"` (`"after"`, `"before,after"`) for a
    /// breakpoint.
    pub metadata: BTreeMap<String, NodeNotes>,
}

/// How deep a drawing shows the inside of subgraph nodes (LangGraph's `xray`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Xray {
    /// A subgraph is one node.
    #[default]
    Off,
    /// Subgraphs are drawn into their parent this many levels down (`1`: the graph's own
    /// subgraphs, each with its subgraphs as single nodes). `Depth(0)` is `Off`.
    Depth(u32),
    /// Every level of subgraphs is drawn.
    All,
}

impl Xray {
    /// What the subgraphs of a graph drawn with `self` are drawn with: `None` when they are
    /// not drawn into it.
    fn inner(self) -> Option<Xray> {
        match self {
            Xray::Off | Xray::Depth(0) => None,
            Xray::Depth(n) => Some(Xray::Depth(n - 1)),
            Xray::All => Some(Xray::All),
        }
    }
}

impl From<bool> for Xray {
    fn from(all: bool) -> Self {
        if all { Xray::All } else { Xray::Off }
    }
}

impl From<u32> for Xray {
    fn from(depth: u32) -> Self {
        Xray::Depth(depth)
    }
}

/// Where each node's commands may route: each target with its drawn edge's label.
pub(crate) type Destinations = Vec<(String, Vec<(String, Option<String>)>)>;

/// What a compiled graph keeps for drawing it only.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    /// The user nodes in LangGraph's order (see [`Topology::nodes`]); empty: as compiled.
    pub(crate) order: Vec<String>,
    /// Where each node's commands may route, each target with its edge's label.
    pub(crate) destinations: Destinations,
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

    /// The graph's nodes and edges as LangGraph's `get_graph()` draws them, subgraphs as
    /// single nodes: [`drawing`](Self::drawing) with [`Xray::Off`].
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
        self.drawing(Xray::Off)
    }

    /// The graph's nodes and edges as LangGraph's `get_graph(xray=...)` draws them:
    /// declared edges (a join's sources each lead to its target), a conditional edge to every
    /// target of a routing function's path map (to every node and `__end__` without one) and
    /// to every declared [destination](crate::StateGraph::add_destinations) of a node's
    /// commands, and an edge to `__end__` from each node that is led to but leads nowhere.
    /// Only what can be reached from `__start__` is connected: an error handler, run only
    /// for failures, stands alone. With `xray`, subgraph nodes are replaced by their own
    /// drawing, its nodes named `node:child`.
    ///
    /// ```
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, END, START, Schema, StateGraph, Xray};
    /// let mut inner = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// inner.add_node("i", |_s, _c| async { Ok(Map::new()) });
    /// inner.add_edge(START, "i").add_edge("i", END);
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_subgraph("sub", inner.compile().unwrap());
    /// g.add_edge(START, "sub").add_edge("sub", END);
    /// let t = g.compile().unwrap().drawing(Xray::All);
    /// assert_eq!(t.nodes, ["__start__", "__end__", "sub:i"]);
    /// assert_eq!(t.edges[0].target, "sub:i");
    /// ```
    pub fn drawing(&self, xray: impl Into<Xray>) -> Topology {
        let mut drawing = self.own_drawing();
        if let Some(inner) = xray.into().inner() {
            for node in self.nodes.iter() {
                if let Some(view) = &node.subgraph {
                    drawing.draw_into(&node.name, view.drawing(inner));
                }
            }
        }
        drawing
    }

    /// The drawing of this graph alone (its subgraphs as single nodes).
    fn own_drawing(&self) -> Topology {
        let order: Vec<&str> = if self.drawn.order.is_empty() {
            self.nodes
                .iter()
                .map(|n| n.name.as_str())
                .filter(|n| *n != START)
                .collect()
        } else {
            self.drawn.order.iter().map(String::as_str).collect()
        };
        let mut declared: BTreeSet<DrawnEdge> = BTreeSet::new();
        for source in std::iter::once(START).chain(order.iter().copied()) {
            if let Some(out) = self.edges.get(source) {
                for (channel, _) in &out.writes {
                    let target = channel.strip_prefix("branch:to:").or_else(|| {
                        channel
                            .strip_prefix("join:")
                            .and_then(|j| j.rsplit(':').next())
                    });
                    if let Some(target) = target {
                        declared.insert(edge(source, target, false, None));
                    }
                }
                for branch in &out.branches {
                    match &branch.path_map {
                        Some(map) => {
                            for (key, target) in map {
                                let label = (key != target).then(|| key.clone());
                                declared.insert(edge(source, target, true, label));
                            }
                        }
                        None => {
                            for target in order.iter().copied().chain([END]) {
                                declared.insert(edge(source, target, true, None));
                            }
                        }
                    }
                }
            }
            for (_, to) in self.drawn.destinations.iter().filter(|(f, _)| f == source) {
                for (target, label) in to {
                    let label = label.clone().filter(|l| l != target);
                    declared.insert(edge(source, target, true, label));
                }
            }
        }
        // As LangGraph finds edges by running the graph's routing on an empty state, an edge
        // is drawn only from a node that can run.
        let mut reached: BTreeSet<&str> = BTreeSet::from([START]);
        let mut frontier = vec![START];
        while let Some(n) = frontier.pop() {
            for e in declared.iter().filter(|e| e.source == n) {
                if reached.insert(e.target.as_str()) {
                    frontier.push(e.target.as_str());
                }
            }
        }
        let mut edges: Vec<DrawnEdge> = declared
            .iter()
            .filter(|e| reached.contains(e.source.as_str()))
            .cloned()
            .collect();
        // One edge per pair of nodes: the first in order (sorted, a pair's edges are
        // neighbours).
        edges.dedup_by(|later, kept| later.source == kept.source && later.target == kept.target);
        // Nodes led to that lead nowhere end the graph.
        let sources: BTreeSet<&str> = edges.iter().map(|e| e.source.as_str()).collect();
        let termini: BTreeSet<String> = edges
            .iter()
            .map(|e| e.target.as_str())
            .filter(|t| *t != END && !sources.contains(t))
            .map(str::to_owned)
            .collect();
        edges.extend(termini.iter().map(|t| edge(t, END, false, None)));
        let mut nodes = vec![START.to_owned()];
        nodes.extend(order.iter().map(|n| (*n).to_owned()));
        if edges.iter().any(|e| e.target == END) {
            nodes.push(END.to_owned());
        }
        Topology {
            nodes,
            edges,
            metadata: self.drawn_metadata(&order),
        }
    }

    /// What a drawing notes on each of `nodes`: deferral, then breakpoints.
    fn drawn_metadata(&self, nodes: &[&str]) -> BTreeMap<String, NodeNotes> {
        let mut metadata = BTreeMap::new();
        for n in nodes {
            let mut notes = NodeNotes::new();
            let channel = crate::graph::branch_channel(n);
            let deferred = self.channel_specs.iter().any(|(c, spec)| {
                **c == *channel && matches!(spec, crate::channel::ChannelSpec::LastValueAfterFinish)
            });
            if deferred {
                notes.insert("defer".to_owned(), serde_json::Value::Bool(true));
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
                notes.insert("__interrupt".to_owned(), i.into());
            }
            if !notes.is_empty() {
                metadata.insert((*n).to_owned(), notes);
            }
        }
        metadata
    }
}

/// The name a node id shows: its last `:`-separated segment (`sub:a` is `a` inside
/// subgraph `sub`).
fn node_name(id: &str) -> &str {
    id.rsplit(':').next().unwrap_or(id)
}

fn edge(source: &str, target: &str, conditional: bool, label: Option<String>) -> DrawnEdge {
    DrawnEdge {
        source: source.to_owned(),
        target: target.to_owned(),
        conditional,
        label,
    }
}

#[cfg(test)]
mod tests {
    use stategraph_checkpoint::Map;

    use crate::{DynState, END, START, Schema, StateGraph};

    fn drawn(t: &super::Topology) -> Vec<(&str, &str, bool)> {
        t.edges
            .iter()
            .map(|e| (e.source.as_str(), e.target.as_str(), e.conditional))
            .collect()
    }

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
        assert_eq!(
            drawn(&t),
            [
                ("__start__", "a", false),
                ("a", "b", true),
                ("a", "c", true),
                ("b", "__end__", false),
                ("c", "__end__", false),
            ]
        );
    }

    #[test]
    fn command_destinations_are_conditional_edges_and_handlers_stand_alone() {
        let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
        for n in ["a", "b", "c"] {
            g.add_node(n, |_s, _c| async { Ok(Map::new()) });
        }
        g.add_edge(START, "a")
            .add_destinations("a", ["b", END])
            .add_labelled_destinations("b", [("c", "go c")])
            .set_error_handler("c", |_s, _c| async { Ok(Map::new()) })
            .add_edge(crate::error_handler_node("c"), "a");
        let t = g.compile().unwrap().topology();
        assert_eq!(
            t.nodes,
            ["__start__", "a", "b", "__error_handler__c", "c", "__end__"]
        );
        assert_eq!(
            drawn(&t),
            [
                ("__start__", "a", false),
                ("a", "__end__", true),
                ("a", "b", true),
                ("b", "c", true),
                ("c", "__end__", false),
            ]
        );
        assert_eq!(t.edges[3].label.as_deref(), Some("go c"));
    }
}
