//! Checking a declared graph before it compiles: names, edges, policies and reachability,
//! each mistake an [`InvalidGraph`](GraphError::InvalidGraph) error naming what is wrong.

use std::collections::BTreeSet;

use super::{END, START, StateGraph};
use crate::error::GraphError;
use crate::state::State;

impl<S: State> StateGraph<S> {
    /// Checks the declared graph: `names` are its nodes in order, `known` the same as a set.
    pub(super) fn validate(
        &self,
        names: &[&str],
        known: &BTreeSet<&str>,
    ) -> Result<(), GraphError> {
        let invalid = |m: String| Err(GraphError::InvalidGraph(m));
        for (node, handler) in &self.handlers {
            if !self.nodes.iter().any(|n| n.name == *node) {
                return invalid(format!("error handler for unknown node `{node}`"));
            }
            if self.nodes.iter().any(|n| n.name == handler.name) {
                return invalid(format!(
                    "node name `{}` is taken by the error handler of `{node}`",
                    handler.name
                ));
            }
        }
        if let Some(d) = &self.default_handler
            && self.nodes.iter().any(|n| n.name == d.name)
        {
            return invalid(format!(
                "node name `{}` is taken by the default error handler",
                d.name
            ));
        }
        let mut seen = BTreeSet::new();
        for n in names {
            if *n == START || *n == END {
                return invalid(format!("`{n}` is reserved and cannot be a node name"));
            }
            if n.is_empty() || n.contains([':', '|']) {
                return invalid(format!(
                    "node name `{n}` must be non-empty and contain neither `:` nor `|` \
                     (they separate checkpoint namespaces)"
                ));
            }
            if self.schema.contains(n) {
                return invalid(format!(
                    "`{n}` is already a state key; node names must differ"
                ));
            }
            if !seen.insert(*n) {
                return invalid(format!("node `{n}` is added twice"));
            }
        }
        let is_source = |s: &str| s == START || known.contains(s);
        let is_target = |t: &str| t == END || known.contains(t);
        for (from, to) in &self.edges {
            if !is_source(from) {
                return invalid(format!("edge {from} → {to}: unknown source node `{from}`"));
            }
            if !is_target(to) {
                return invalid(format!("edge {from} → {to}: unknown target node `{to}`"));
            }
            if to == START {
                return invalid(format!("edge {from} → {START}: START cannot be a target"));
            }
        }
        for (from, to) in &self.joins {
            for f in from {
                if !known.contains(f.as_str()) {
                    return invalid(format!("join into `{to}`: unknown source node `{f}`"));
                }
            }
            if !known.contains(to.as_str()) {
                return invalid(format!("join edge: unknown target node `{to}`"));
            }
        }
        if let Some((n, p)) = self
            .policies
            .iter()
            .find(|(n, _)| !known.contains(n.as_str()))
        {
            let what = if p.retry.is_some() {
                "retry"
            } else if p.timeout.is_some() {
                "timeout"
            } else {
                "cache"
            };
            return invalid(format!("{what} policy for unknown node `{n}`"));
        }
        if let Some(n) = self.deferred.iter().find(|n| !known.contains(n.as_str())) {
            return invalid(format!("`set_defer` names unknown node `{n}`"));
        }
        for (from, to) in &self.destinations {
            if !known.contains(from.as_str()) {
                return invalid(format!("destinations of unknown node `{from}`"));
            }
            if let Some((t, _)) = to.iter().find(|(t, _)| !is_target(t)) {
                return invalid(format!("node `{from}` declares unknown destination `{t}`"));
            }
        }
        for (from, branch) in &self.branches {
            if !is_source(from) {
                return invalid(format!("conditional edge from unknown node `{from}`"));
            }
            for target in branch.path_map.iter().flat_map(|m| m.values()) {
                if !is_target(target) {
                    return invalid(format!(
                        "conditional edge from `{from}`: unknown target node `{target}`"
                    ));
                }
            }
        }
        // Entry point and reachability.
        let mut reach: BTreeSet<&str> = BTreeSet::new();
        let mut frontier = vec![START];
        while let Some(n) = frontier.pop() {
            let mut next: Vec<&str> = Vec::new();
            // A node's failures lead to its error handler.
            if n != START {
                next.extend(self.handler_of(n));
            }
            next.extend(
                self.edges
                    .iter()
                    .filter(|(f, _)| f == n)
                    .map(|(_, t)| t.as_str()),
            );
            next.extend(
                self.joins
                    .iter()
                    .filter(|(f, _)| f.iter().any(|x| x == n))
                    .map(|(_, t)| t.as_str()),
            );
            for (f, to) in &self.destinations {
                if f == n {
                    next.extend(to.iter().map(|(t, _)| t.as_str()));
                }
            }
            for (f, b) in &self.branches {
                if f == n {
                    match &b.path_map {
                        Some(m) => next.extend(m.values().map(String::as_str)),
                        // Without a path map any node may be chosen.
                        None => next.extend(names.iter().copied()),
                    }
                }
            }
            for t in next {
                if t != END && reach.insert(t) {
                    frontier.push(t);
                }
            }
        }
        let has_entry = self.edges.iter().any(|(f, _)| f == START)
            || self.branches.iter().any(|(f, _)| f == START);
        if !has_entry {
            return invalid(format!(
                "the graph has no entry point: add an edge from START (`{START}`) to a node"
            ));
        }
        if let Some(n) = names.iter().find(|n| !reach.contains(**n)) {
            return invalid(format!(
                "node `{n}` can never run: no edge from START leads to it"
            ));
        }
        for (what, schema) in [("input", &self.io.input), ("output", &self.io.output)] {
            let mut keys = schema.iter().flat_map(|s| s.keys.iter());
            if let Some(k) = keys.find(|k| !self.schema.contains(k)) {
                return invalid(format!(
                    "the {what} schema's key `{k}` is not a key of the graph's state"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{DynState, GraphError, IoSchema, START, Schema, StateGraph};

    #[test]
    fn io_schema_keys_must_be_state_keys() {
        let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("a"));
        g.add_node("n", |_s, _c| async {
            Ok(stategraph_checkpoint::Map::new())
        });
        g.add_edge(START, "n")
            .set_output_schema(IoSchema::keys(["a", "b"]));
        let Err(GraphError::InvalidGraph(message)) = g.compile() else {
            panic!("compiled with an unknown output key")
        };
        assert_eq!(
            message,
            "the output schema's key `b` is not a key of the graph's state"
        );
    }
}
