//! A [`Topology`] as LangChain's drawing JSON (`Graph.to_json()`, as the Agent Server's
//! `GET /assistants/{id}/graph` returns it), and back: what lets a drawing fetched from any
//! Agent Server, Python's included, be drawn here.

use serde_json::{Value, json};

use super::{DrawnEdge, NodeNotes, Topology};
use crate::graph::END;

/// A drawing JSON that is not LangChain's shape, naming the field that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a graph drawing: {at} {problem}")]
pub struct DrawingJsonError {
    /// Where: `nodes[2].id`, `edges[0].target`, ...
    pub at: String,
    /// What is wrong there.
    pub problem: String,
}

fn wrong(at: impl Into<String>, problem: &str) -> DrawingJsonError {
    DrawingJsonError {
        at: at.into(),
        problem: problem.to_owned(),
    }
}

impl Topology {
    /// The drawing as the Agent Server returns it (LangChain's `Graph.to_json()` without the
    /// Python class ids): `{"nodes": [...], "edges": [...]}`. A node is
    /// `{"id", "type": "runnable", "data": {"name"}}` with its `metadata` when it has notes;
    /// an end node (`__end__`, or a subgraph's) is only its `id`. An edge is
    /// `{"source", "target"}`, with `"data"` (its label) and `"conditional": true` when set.
    ///
    /// ```
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, END, START, Schema, StateGraph, Topology};
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    /// g.add_edge(START, "a").add_edge("a", END);
    /// let json = g.compile().unwrap().topology().to_json();
    /// assert_eq!(json["nodes"][1], serde_json::json!({"id": "a", "type": "runnable", "data": {"name": "a"}}));
    /// assert_eq!(Topology::from_json(&json).unwrap(), g.compile().unwrap().topology());
    /// ```
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|id| {
                if super::node_name(id) == END {
                    return json!({ "id": id });
                }
                let mut node = json!({ "id": id, "type": "runnable", "data": { "name": id } });
                if let (Some(notes), Some(o)) = (self.metadata.get(id), node.as_object_mut()) {
                    o.insert("metadata".into(), Value::Object(notes.clone()));
                }
                node
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|e| {
                let mut edge = serde_json::Map::new();
                edge.insert("source".into(), e.source.clone().into());
                edge.insert("target".into(), e.target.clone().into());
                if let Some(label) = &e.label {
                    edge.insert("data".into(), label.clone().into());
                }
                if e.conditional {
                    edge.insert("conditional".into(), true.into());
                }
                Value::Object(edge)
            })
            .collect();
        json!({ "nodes": nodes, "edges": edges })
    }

    /// Reads a drawing JSON as [`to_json`](Self::to_json) writes it, or as any Agent Server
    /// returns it: node ids and `metadata`, edges' ends, `data` and `conditional`. Other
    /// fields are ignored; a label that is not a string is kept as its JSON text.
    pub fn from_json(json: &Value) -> Result<Topology, DrawingJsonError> {
        let list = |key: &str| {
            json.get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| wrong(key, "is not a list"))
        };
        let mut topology = Topology::default();
        for (i, node) in list("nodes")?.iter().enumerate() {
            let id = node
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| wrong(format!("nodes[{i}].id"), "is not a string"))?;
            match node.get("metadata") {
                None | Some(Value::Null) => {}
                Some(Value::Object(notes)) if notes.is_empty() => {}
                Some(Value::Object(notes)) => {
                    let notes: NodeNotes = notes.clone();
                    topology.metadata.insert(id.to_owned(), notes);
                }
                Some(_) => return Err(wrong(format!("nodes[{i}].metadata"), "is not an object")),
            }
            topology.nodes.push(id.to_owned());
        }
        for (i, edge) in list("edges")?.iter().enumerate() {
            let end = |key: &str| {
                edge.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| wrong(format!("edges[{i}].{key}"), "is not a string"))
            };
            let conditional = match edge.get("conditional") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(wrong(format!("edges[{i}].conditional"), "is not a boolean"));
                }
            };
            let label = match edge.get("data") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            };
            topology.edges.push(DrawnEdge {
                source: end("source")?,
                target: end("target")?,
                conditional,
                label,
            });
        }
        if topology.nodes.is_empty() && !topology.edges.is_empty() {
            return Err(wrong("nodes", "is empty while there are edges"));
        }
        let known = |id: &str| topology.nodes.iter().any(|n| n == id);
        for (i, e) in topology.edges.iter().enumerate() {
            for (key, id) in [("source", &e.source), ("target", &e.target)] {
                if !known(id) {
                    return Err(wrong(format!("edges[{i}].{key}"), "names no node"));
                }
            }
        }
        Ok(topology)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Topology;

    #[test]
    fn a_wrong_field_is_named() {
        let bad = json!({"nodes": [{"id": "a"}], "edges": [{"source": "a", "target": 3}]});
        let err = Topology::from_json(&bad).unwrap_err();
        assert_eq!(err.at, "edges[0].target");
        let bad = json!({"nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "b"}]});
        assert_eq!(Topology::from_json(&bad).unwrap_err().at, "edges[0].target");
        assert_eq!(Topology::from_json(&json!({})).unwrap_err().at, "nodes");
    }
}
