//! A [`Topology`] as Mermaid flowchart text, written exactly as LangChain's
//! `Graph.draw_mermaid()` writes it (frontmatter, node shapes, edge arrows and labels,
//! subgraph blocks for `parent:child` node names, class definitions), so that a drawing
//! compares equal to Python's and renders with the Mermaid CLI or any Markdown viewer.

use super::{DrawnEdge, Topology};

/// Node names that start and end with one of these are wrapped in `<p>` (Markdown would
/// read them as emphasis).
const MARKDOWN_SPECIAL: [char; 3] = ['*', '_', '`'];
/// Edge labels are broken into lines of this many words.
const WRAP_WORDS: usize = 9;

/// `label` as a Mermaid node id: letters, digits, `_` and `-` kept, every other character
/// as a backslash and its lowercase hex code point (unique, and always valid).
fn safe_id(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.push_str(&format!("\\{:x}", u32::from(c)));
        }
    }
    out
}

/// The nodes of one subgraph block (or of the top level), in order.
type Group<'a> = Vec<&'a str>;

/// Adds `item` to `key`'s entry of an insertion-ordered list (a new entry goes last).
fn push_to<T: Clone>(list: &mut Vec<(String, Vec<T>)>, key: &str, item: T) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some((_, items)) => items.push(item),
        None => list.push((key.to_owned(), vec![item])),
    }
}

/// A metadata line as a Mermaid label shows it: `#` and the characters Mermaid reads as
/// syntax written as entities.
fn escape_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '#' => out.push_str("#35;"),
            '[' => out.push_str("#91;"),
            ']' => out.push_str("#93;"),
            '(' => out.push_str("#40;"),
            ')' => out.push_str("#41;"),
            '{' => out.push_str("#123;"),
            '}' => out.push_str("#125;"),
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#60;"),
            '>' => out.push_str("#62;"),
            '|' => out.push_str("#124;"),
            c => out.push(c),
        }
    }
    out
}

/// A note's value as LangChain writes it into a node's label: a scalar as Python's `str()`
/// shows it (`True`, `1.0`), a list of scalars joined by `, `; anything else (null, a map, a
/// nested list) leaves the note out.
fn note_value(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(true) => Some("True".to_owned()),
        Value::Bool(false) => Some("False".to_owned()),
        Value::Number(n) => Some(py_number(n)),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Array(_) | Value::Object(_) | Value::Null => None,
                scalar => note_value(scalar),
            })
            .collect::<Option<Vec<String>>>()
            .map(|items| items.join(", ")),
        Value::Null | Value::Object(_) => None,
    }
}

/// A JSON number as Python's `str()` shows it: integers as they are, floats in Python's
/// shortest form (`1.0`, `0.1`, `1e+16`, `1.5e-05`).
fn py_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let magnitude = f.abs();
    if f != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        // Rust writes `1.5e-5`; Python `1.5e-05`.
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exponent),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    if f.fract() == 0.0 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

struct Writer<'a> {
    out: String,
    metadata: &'a std::collections::BTreeMap<String, super::NodeNotes>,
    first: Option<String>,
    last: Option<String>,
    subgraph_nodes: Vec<(String, Group<'a>)>,
    edge_groups: Vec<(String, Vec<&'a DrawnEdge>)>,
    seen: Vec<String>,
}

impl<'a> Writer<'a> {
    fn node(&mut self, id: &str) {
        let name = super::node_name(id);
        let mut label = if name.starts_with(MARKDOWN_SPECIAL) && name.ends_with(MARKDOWN_SPECIAL) {
            format!("<p>{name}</p>")
        } else {
            name.to_owned()
        };
        let lines: Vec<String> = self
            .metadata
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some(escape_label(&format!("{k} = {}", note_value(v)?))))
            .collect();
        if !lines.is_empty() {
            label = format!("{label}<hr/><small><em>{}</em></small>", lines.join("\n"));
        }
        let safe = safe_id(id);
        let line = if self.first.as_deref() == Some(id) {
            format!("\t{safe}([{label}]):::first\n")
        } else if self.last.as_deref() == Some(id) {
            format!("\t{safe}([{label}]):::last\n")
        } else {
            format!("\t{safe}({label})\n")
        };
        self.out.push_str(&line);
    }

    fn edge(&mut self, e: &DrawnEdge) {
        let arrow = match &e.label {
            Some(data) => {
                let words: Vec<&str> = data.split_whitespace().collect();
                let data = if words.len() > WRAP_WORDS {
                    words
                        .chunks(WRAP_WORDS)
                        .map(|c| c.join(" "))
                        .collect::<Vec<_>>()
                        .join("&nbsp<br>&nbsp")
                } else {
                    data.clone()
                };
                if e.conditional {
                    format!(" -. &nbsp;{data}&nbsp; .-> ")
                } else {
                    format!(" -- &nbsp;{data}&nbsp; --> ")
                }
            }
            None if e.conditional => " -.-> ".to_owned(),
            None => " --> ".to_owned(),
        };
        let line = format!("\t{}{arrow}{};\n", safe_id(&e.source), safe_id(&e.target));
        self.out.push_str(&line);
    }

    /// One block: its nodes and edges, then the blocks nested one level below it.
    fn block(&mut self, edges: &[&'a DrawnEdge], prefix: &str) {
        let self_loop = edges.len() == 1 && edges.first().is_some_and(|e| e.source == e.target);
        let opens = !prefix.is_empty() && !self_loop;
        if opens {
            let name = super::node_name(prefix).to_owned();
            self.out.push_str(&format!("\tsubgraph {name}\n"));
            self.seen.push(name);
            let nodes = self
                .subgraph_nodes
                .iter()
                .find(|(p, _)| p == prefix)
                .map(|(_, n)| n.clone())
                .unwrap_or_default();
            for id in nodes {
                self.node(id);
            }
        }
        for e in edges {
            self.edge(e);
        }
        let nested: Vec<(String, Vec<&'a DrawnEdge>)> = self
            .edge_groups
            .iter()
            .filter(|(p, _)| {
                let Some(rest) = p.strip_prefix(&format!("{prefix}:")) else {
                    return false;
                };
                p != prefix && !rest.contains(':')
            })
            .cloned()
            .collect();
        for (p, edges) in nested {
            self.block(&edges, &p);
        }
        if opens {
            self.out.push_str("\tend\n");
        }
    }
}

impl Topology {
    /// The graph as Mermaid flowchart text, as LangChain's `Graph.draw_mermaid()` writes it
    /// with its defaults (styles on, linear curves, edge labels wrapped every nine words):
    /// `__start__` and `__end__` drawn as the first and last node, conditional edges dotted,
    /// nodes named `parent:child` inside a `subgraph parent` block.
    ///
    /// ```
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, END, START, Schema, StateGraph};
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    /// g.add_edge(START, "a").add_edge("a", END);
    /// let text = g.compile().unwrap().topology().draw_mermaid();
    /// assert!(text.contains("\t__start__ --> a;\n"));
    /// assert!(text.contains("\t__end__([<p>__end__</p>]):::last\n"));
    /// ```
    pub fn draw_mermaid(&self) -> String {
        let mut w = Writer {
            out: String::from("---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n"),
            metadata: &self.metadata,
            first: self.first_node(None),
            last: self.last_node(None),
            subgraph_nodes: Vec::new(),
            edge_groups: Vec::new(),
            seen: Vec::new(),
        };
        let mut regular: Group<'_> = Vec::new();
        for id in &self.nodes {
            match id.rsplit_once(':') {
                Some((prefix, _)) => push_to(&mut w.subgraph_nodes, prefix, id.as_str()),
                None => regular.push(id.as_str()),
            }
        }
        for id in regular {
            w.node(id);
        }
        for e in &self.edges {
            // The segments the two ends share position by position (LangChain's grouping).
            let common: Vec<&str> = e
                .source
                .split(':')
                .zip(e.target.split(':'))
                .filter(|(s, t)| s == t)
                .map(|(s, _)| s)
                .collect();
            push_to(&mut w.edge_groups, &common.join(":"), e);
        }
        let top: Vec<&DrawnEdge> = w
            .edge_groups
            .iter()
            .find(|(p, _)| p.is_empty())
            .map(|(_, e)| e.clone())
            .unwrap_or_default();
        w.block(&top, "");
        let outer: Vec<(String, Vec<&DrawnEdge>)> = w
            .edge_groups
            .iter()
            .filter(|(p, _)| !p.is_empty() && !p.contains(':'))
            .cloned()
            .collect();
        for (prefix, edges) in outer {
            w.block(&edges, &prefix);
            w.seen.push(prefix);
        }
        let empty: Vec<(String, Group<'_>)> = w
            .subgraph_nodes
            .iter()
            .filter(|(p, _)| !p.contains(':') && !w.seen.contains(p))
            .cloned()
            .collect();
        for (prefix, nodes) in empty {
            w.out.push_str(&format!("\tsubgraph {prefix}\n"));
            for id in nodes {
                w.node(id);
            }
            w.out.push_str("\tend\n");
        }
        w.out
            .push_str("\tclassDef default fill:#f2f0ff,line-height:1.2\n");
        w.out.push_str("\tclassDef first fill-opacity:0\n");
        w.out.push_str("\tclassDef last fill:#bfb6fc\n");
        w.out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn notes_read_as_langchain_writes_them() {
        use serde_json::json;
        let note = |v| super::note_value(&v);
        assert_eq!(note(json!(true)).as_deref(), Some("True"));
        assert_eq!(note(json!("before")).as_deref(), Some("before"));
        assert_eq!(note(json!(["a", 2, 1.0])).as_deref(), Some("a, 2, 1.0"));
        assert_eq!(note(json!(1.5e-5)).as_deref(), Some("1.5e-05"));
        assert_eq!(note(json!(2e16)).as_deref(), Some("2e+16"));
        assert_eq!(note(json!(0.1)).as_deref(), Some("0.1"));
        assert_eq!(note(json!(null)), None);
        assert_eq!(note(json!([["nested"]])), None);
        assert_eq!(note(json!({"k": 1})), None);
    }

    #[test]
    fn ids_keep_only_safe_characters() {
        assert_eq!(super::safe_id("a-b_c9"), "a-b_c9");
        assert_eq!(super::safe_id("sub:x y"), "sub\\3ax\\20y");
    }
}
