//! Drawing a subgraph into its parent (LangGraph's `get_graph(xray=...)`, with LangChain's
//! `Graph.extend` and first/last-node trimming): the subgraph node is replaced by the
//! subgraph's own nodes, named `node:child`, and the parent's edges to and from it lead to
//! the subgraph's first and from its last node.

use super::Topology;

impl Topology {
    /// The one node no edge leads to (ignoring `exclude` and the edges leaving it), if
    /// exactly one.
    fn first_node(&self, exclude: Option<&str>) -> Option<String> {
        let targets: Vec<&str> = self
            .edges
            .iter()
            .filter(|e| Some(e.source.as_str()) != exclude)
            .map(|e| e.target.as_str())
            .collect();
        only(
            self.nodes
                .iter()
                .filter(|n| Some(n.as_str()) != exclude && !targets.contains(&n.as_str())),
        )
    }

    /// The one node no edge leaves (ignoring `exclude` and the edges reaching it), if
    /// exactly one.
    fn last_node(&self, exclude: Option<&str>) -> Option<String> {
        let sources: Vec<&str> = self
            .edges
            .iter()
            .filter(|e| Some(e.target.as_str()) != exclude)
            .map(|e| e.source.as_str())
            .collect();
        only(
            self.nodes
                .iter()
                .filter(|n| Some(n.as_str()) != exclude && !sources.contains(&n.as_str())),
        )
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

/// The one item of `found`, if exactly one.
fn only<'a>(mut found: impl Iterator<Item = &'a String>) -> Option<String> {
    let one = found.next()?;
    found.next().is_none().then(|| one.clone())
}
