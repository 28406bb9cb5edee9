//! Drawing a subgraph into its parent (LangGraph's `get_graph(xray=...)`, with LangChain's
//! `Graph.extend` and first/last-node trimming): the subgraph node is replaced by the
//! subgraph's own nodes, named `node:child`, and the parent's edges to and from it lead to
//! the subgraph's first and from its last node.

use super::{DrawnEdge, Topology};

impl Topology {
    /// The one node no edge leads to (ignoring `exclude` and the edges leaving it), if
    /// exactly one (LangChain's `first_node`; a drawing's origin).
    pub(super) fn first_node(&self, exclude: Option<&str>) -> Option<String> {
        self.only_end(exclude, |e| (&e.source, &e.target))
    }

    /// The one node no edge leaves (ignoring `exclude` and the edges reaching it), if
    /// exactly one (LangChain's `last_node`; a drawing's destination).
    pub(super) fn last_node(&self, exclude: Option<&str>) -> Option<String> {
        self.only_end(exclude, |e| (&e.target, &e.source))
    }

    /// The one node (but `exclude`) no edge reaches, an edge's ends read by `ends` as
    /// (from, to) and edges from `exclude` ignored; `None` unless exactly one.
    fn only_end(
        &self,
        exclude: Option<&str>,
        ends: impl Fn(&DrawnEdge) -> (&String, &String),
    ) -> Option<String> {
        let reached: Vec<&str> = self
            .edges
            .iter()
            .map(&ends)
            .filter(|(from, _)| Some(from.as_str()) != exclude)
            .map(|(_, to)| to.as_str())
            .collect();
        let mut found = self
            .nodes
            .iter()
            .filter(|n| Some(n.as_str()) != exclude && !reached.contains(&n.as_str()));
        let one = found.next()?;
        found.next().is_none().then(|| one.clone())
    }

    /// Drops `id` and every edge touching it.
    fn remove_node(&mut self, id: &str) {
        self.nodes.retain(|n| n != id);
        self.edges.retain(|e| e.source != id && e.target != id);
        self.metadata.remove(id);
    }

    /// Drops the first node (`__start__`) when another node would be first without it and
    /// it has one edge.
    fn trim_first_node(&mut self) {
        if let Some(first) = self.first_node(None)
            && self.first_node(Some(&first)).is_some()
            && self.edges.iter().filter(|e| e.source == first).count() == 1
        {
            self.remove_node(&first);
        }
    }

    /// Drops the last node (`__end__`) when another node would be last without it and one
    /// edge reaches it.
    fn trim_last_node(&mut self) {
        if let Some(last) = self.last_node(None)
            && self.last_node(Some(&last)).is_some()
            && self.edges.iter().filter(|e| e.target == last).count() == 1
        {
            self.remove_node(&last);
        }
    }

    /// Replaces node `name` by `sub`, a drawing of the subgraph it runs: `sub`'s nodes,
    /// edges and notes go last, prefixed `name:`, and the edges to and from `name` now lead
    /// to its first and from its last node. A subgraph without one first and one last node,
    /// or of one node, stays a single node.
    pub(super) fn draw_into(&mut self, name: &str, mut sub: Topology) {
        if sub.nodes.len() <= 1
            || !self.nodes.iter().any(|n| n == name)
            || sub.first_node(None).is_none()
            || sub.last_node(None).is_none()
        {
            return;
        }
        sub.trim_first_node();
        sub.trim_last_node();
        let prefixed = |id: &str| format!("{name}:{id}");
        let first = sub.first_node(None).map(|f| prefixed(&f));
        let last = sub.last_node(None).map(|l| prefixed(&l));
        self.nodes.retain(|n| n != name);
        self.metadata.remove(name);
        self.nodes.extend(sub.nodes.iter().map(|n| prefixed(n)));
        self.edges.extend(sub.edges.into_iter().map(|mut e| {
            e.source = prefixed(&e.source);
            e.target = prefixed(&e.target);
            e
        }));
        self.metadata.extend(
            sub.metadata
                .into_iter()
                .map(|(id, notes)| (prefixed(&id), notes)),
        );
        for e in &mut self.edges {
            if e.source == name
                && let Some(last) = &last
            {
                e.source.clone_from(last);
            }
            if e.target == name
                && let Some(first) = &first
            {
                e.target.clone_from(first);
            }
        }
    }
}
