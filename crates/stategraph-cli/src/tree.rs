//! `tree`: the branch tree of a thread's checkpoints (a replay or `update_state` on a past
//! checkpoint starts a branch), as indented text, Mermaid or Graphviz dot.

use std::collections::{BTreeMap, BTreeSet};

use crate::read::Entry;
use serde_json::{Value as Json, json};
use stategraph::CheckpointId;

/// One checkpoint of the tree.
pub(crate) struct Node {
    id: CheckpointId,
    parent: Option<CheckpointId>,
    step: Option<i64>,
    source: String,
}

/// The checkpoints of one namespace, any order (a damaged one has no known parent: it is a
/// root, labelled with its error).
pub(crate) fn nodes(listed: &[Entry]) -> Vec<Node> {
    let mut nodes: Vec<Node> = listed
        .iter()
        .map(|e| match e {
            Entry::Readable(t) => Node {
                id: t.checkpoint.id.clone(),
                parent: t
                    .parent_config
                    .as_ref()
                    .and_then(|p| p.checkpoint_id.clone()),
                step: t.metadata.step,
                source: t.metadata.source.map(|s| s.to_string()).unwrap_or_default(),
            },
            Entry::Damaged { id, error, .. } => Node {
                id: id.clone(),
                parent: None,
                step: None,
                source: format!("DAMAGED: {error}"),
            },
        })
        .collect();
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    nodes
}

/// The parent a node hangs from in the tree: its stored parent if that is listed and older.
/// A parent outside the listed checkpoints (pruned) makes the node a root; so does a parent
/// that is not older than the node (ids are time-ordered: a self-parented checkpoint, or a
/// loop made by editing rows), so every checkpoint is shown and the tree has no cycle.
fn tree_parent<'a>(n: &'a Node, ids: &BTreeSet<&str>) -> Option<&'a str> {
    n.parent
        .as_deref()
        .filter(|p| ids.contains(p) && *p < n.id.as_str())
}

fn children(nodes: &[Node]) -> BTreeMap<Option<&str>, Vec<&Node>> {
    let ids: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let mut by_parent: BTreeMap<Option<&str>, Vec<&Node>> = BTreeMap::new();
    for n in nodes {
        by_parent.entry(tree_parent(n, &ids)).or_default().push(n);
    }
    by_parent
}

fn label(n: &Node) -> String {
    let step = n.step.map_or_else(|| "?".to_owned(), |s| s.to_string());
    let note = match n.parent.as_deref() {
        Some(p) if p >= n.id.as_str() => format!(", parent {p} is not older: the chain loops"),
        _ => String::new(),
    };
    format!("{} (step {step}, {}{note})", n.id, n.source)
}

/// Text: a line of history runs straight down; where a checkpoint has several children, each
/// branch hangs off it (`├─`, `└─`).
pub(crate) fn text(nodes: &[Node]) -> String {
    let kids = children(nodes);
    let mut out = Vec::new();
    fn walk<'a>(
        mut n: &'a Node,
        first: &str,
        rest: &str,
        kids: &BTreeMap<Option<&str>, Vec<&'a Node>>,
        out: &mut Vec<String>,
    ) {
        out.push(format!("{first}{}", label(n)));
        // A straight line of history is a loop, not a recursion (threads run long).
        let mut next = kids
            .get(&Some(n.id.as_str()))
            .map_or(&[][..], Vec::as_slice);
        while let [only] = next {
            n = only;
            out.push(format!("{rest}{}", label(n)));
            next = kids
                .get(&Some(n.id.as_str()))
                .map_or(&[][..], Vec::as_slice);
        }
        for (i, c) in next.iter().enumerate() {
            let last = i + 1 == next.len();
            let (head, tail) = if last {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            walk(
                c,
                &format!("{rest}{head}"),
                &format!("{rest}{tail}"),
                kids,
                out,
            );
        }
    }
    for root in kids.get(&None).map_or(&[][..], Vec::as_slice) {
        walk(root, "", "", &kids, &mut out);
    }
    out.join("\n")
}

/// A Mermaid flowchart, oldest at the top.
pub(crate) fn mermaid(nodes: &[Node]) -> String {
    let mut out = vec!["graph TD".to_owned()];
    for n in nodes {
        out.push(format!("  c{}[\"{}\"]", short(&n.id), label(n)));
    }
    let ids: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    for n in nodes {
        if let Some(p) = n.parent.as_deref().filter(|p| ids.contains(p)) {
            out.push(format!("  c{} --> c{}", short(p), short(&n.id)));
        }
    }
    out.join("\n")
}

/// Graphviz dot.
pub(crate) fn dot(nodes: &[Node]) -> String {
    let mut out = vec![
        "digraph checkpoints {".to_owned(),
        "  rankdir=TB;".to_owned(),
    ];
    for n in nodes {
        out.push(format!("  \"{}\" [label=\"{}\"];", n.id, label(n)));
    }
    let ids: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    for n in nodes {
        if let Some(p) = n.parent.as_deref().filter(|p| ids.contains(p)) {
            out.push(format!("  \"{p}\" -> \"{}\";", n.id));
        }
    }
    out.push("}".to_owned());
    out.join("\n")
}

/// JSON: every checkpoint with its parent and children.
pub(crate) fn json(nodes: &[Node]) -> Json {
    let kids = children(nodes);
    Json::Array(
        nodes
            .iter()
            .map(|n| {
                let children: Vec<&str> = kids
                    .get(&Some(n.id.as_str()))
                    .map(|c| c.iter().map(|k| k.id.as_str()).collect())
                    .unwrap_or_default();
                json!({"checkpoint_id": n.id, "parent_checkpoint_id": n.parent,
                       "step": n.step, "source": n.source, "children": children})
            })
            .collect(),
    )
}

/// A checkpoint id as a Mermaid node name (letters and digits only).
fn short(id: &str) -> String {
    id.chars().filter(char::is_ascii_alphanumeric).collect()
}
