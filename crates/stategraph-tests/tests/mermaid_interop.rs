//! Mermaid drawings written by stategraph equal LangChain's `Graph.draw_mermaid()` for the
//! same nodes and edges: shapes, arrows, labels (wrapped), ids of names with special
//! characters, and subgraph blocks (nested, empty, with a self-loop). The Python side is
//! `scripts/interop/mermaid.py`; needs the pinned Python environment (`scripts/python-env.sh`)
//! and fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;

use serde_json::{Value as Json, json};
use stategraph::graph::{DrawnEdge, Topology};

fn drawing(nodes: &[&str], edges: &[(&str, &str, bool, Option<&str>)]) -> Topology {
    Topology {
        nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        edges: edges
            .iter()
            .map(|(s, t, c, l)| DrawnEdge {
                source: (*s).to_owned(),
                target: (*t).to_owned(),
                conditional: *c,
                label: l.map(str::to_owned),
            })
            .collect(),
        ..Topology::default()
    }
}

/// `mermaid.py ARGS` fed `stdin`: the JSON it prints.
fn mermaid_py(args: &[&str], stdin: &str) -> Json {
    let mut child = std::process::Command::new(stategraph_testkit::python::python_interpreter())
        .arg(stategraph_testkit::python::repo_root().join("scripts/interop/mermaid.py"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running mermaid.py");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "mermaid.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("mermaid.py printed no JSON")
}

/// LangChain's drawings of `drawings`.
fn python(drawings: &[Topology]) -> Vec<String> {
    let input: Vec<Json> = drawings
        .iter()
        .map(|d| {
            json!({
                "nodes": d.nodes,
                "edges": d.edges.iter().map(|e| json!([e.source, e.target, e.conditional, e.label])).collect::<Vec<_>>(),
                "metadata": d.metadata,
            })
        })
        .collect();
    serde_json::from_value(mermaid_py(&[], &serde_json::to_string(&input).unwrap())).unwrap()
}

#[test]
fn mermaid_text_equals_langchains() {
    let long = "one two three four five six seven eight nine ten eleven twelve";
    let drawings = [
        // Conditional edges, with and without labels; a long label wraps.
        drawing(
            &["__start__", "check", "fix", "done", "__end__"],
            &[
                ("__start__", "check", false, None),
                ("check", "fix", true, Some("retry")),
                ("check", "done", true, None),
                ("fix", "check", false, Some(long)),
                ("done", "__end__", false, None),
            ],
        ),
        // A subgraph (names `parent:child`), one nested in it, and a node whose name needs
        // escaping in ids and a Markdown-looking one.
        drawing(
            &[
                "__start__",
                "plan",
                "sub:a",
                "sub:inner:x",
                "sub:inner:y",
                "sub:b",
                "has space",
                "*bold*",
                "__end__",
            ],
            &[
                ("__start__", "plan", false, None),
                ("plan", "sub:a", false, None),
                ("sub:a", "sub:inner:x", false, None),
                ("sub:inner:x", "sub:inner:y", true, Some("go")),
                ("sub:inner:y", "sub:b", false, None),
                ("sub:b", "has space", false, None),
                ("has space", "*bold*", true, None),
                ("*bold*", "__end__", false, None),
            ],
        ),
        // A subgraph with no edges inside it, and one whose only edge is a self-loop.
        drawing(
            &["__start__", "solo:only", "loop:me", "__end__"],
            &[
                ("__start__", "solo:only", false, None),
                ("solo:only", "loop:me", false, None),
                ("loop:me", "loop:me", true, None),
                ("loop:me", "__end__", false, None),
            ],
        ),
        // No single first or last node.
        drawing(&["a", "b"], &[]),
        // Notes on nodes, escaped.
        {
            let mut d = drawing(
                &["__start__", "a", "__end__"],
                &[
                    ("__start__", "a", false, None),
                    ("a", "__end__", false, None),
                ],
            );
            d.metadata.insert(
                "a".into(),
                vec![
                    ("defer".into(), "True".into()),
                    ("note".into(), "<x> [1] #2".into()),
                ],
            );
            d
        },
    ];
    let ours: Vec<String> = drawings.iter().map(Topology::draw_mermaid).collect();
    let theirs = python(&drawings);
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "drawing {i} differs");
    }
    assert_eq!(ours.len(), theirs.len());
}

/// LangGraph's `get_graph().draw_mermaid()` of `mermaid.py graphs`.
fn python_graphs() -> serde_json::Map<String, Json> {
    serde_json::from_value(mermaid_py(&["graphs"], "")).unwrap()
}

#[test]
fn compiled_graphs_draw_as_langgraph_draws_them() {
    use stategraph::{DynState, END, Map, START, Schema, StateGraph};
    let schema = || {
        Schema::new()
            .last_value("n")
            .reducer("log", stategraph::Reducer::append())
    };
    let mut g = StateGraph::<DynState>::with_schema(schema());
    for n in ["check", "fix", "report"] {
        g.add_node(n, |_s, _c| async { Ok(Map::new()) });
    }
    g.add_edge(START, "check");
    g.add_conditional_edges("check", |_s| Ok(vec!["done".into()]))
        .path_map([("retry", "fix"), ("done", "report"), ("stop", END)]);
    g.add_edge("fix", "check");
    let branches = g.compile().unwrap();

    let mut g = StateGraph::<DynState>::with_schema(schema());
    for n in ["plan", "work", "join"] {
        g.add_node(n, |_s, _c| async { Ok(Map::new()) });
    }
    g.add_edge(START, "plan");
    g.add_conditional_edges("plan", |_s| {
        Ok(vec![stategraph::graph::Goto::Send(
            stategraph::graph::Send::new("work", Map::new()),
        )])
    })
    .path_map(["work"]);
    g.add_edge("work", "join").set_defer("join");
    let send_defer = g.compile().unwrap().with_interrupt_before(["work"]);

    let theirs = python_graphs();
    for (name, ours) in [
        ("branches", branches.topology().draw_mermaid()),
        ("send_defer", send_defer.topology().draw_mermaid()),
    ] {
        assert_eq!(
            Some(&json!(ours)),
            theirs.get(name),
            "{name} is drawn differently"
        );
    }
}
