//! Mermaid drawings written by stategraph equal LangChain's `Graph.draw_mermaid()` for the
//! same nodes and edges: shapes, arrows, labels (wrapped), ids of names with special
//! characters, and subgraph blocks (nested, empty, with a self-loop). Compiled graphs draw as
//! LangGraph's `get_graph(xray=...)` draws the same graphs — conditional edges, `Send`, a
//! deferred node, subgraphs drawn in, command destinations, error handlers — both as Mermaid
//! and as drawing JSON, and the real Mermaid CLI renders each to a PNG image.
//!
//! The Python side is `scripts/interop/mermaid.py`; needs the pinned Python environment
//! (`scripts/python-env.sh`) and the Mermaid CLI (`scripts/mermaid-cli.sh install`), and
//! fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;

use serde_json::{Value as Json, json};
use stategraph::graph::{DrawnEdge, Topology, Xray};

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

/// `drawings` as `mermaid.py` reads them.
fn drawings_json(drawings: &[Topology]) -> String {
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
    serde_json::to_string(&input).unwrap()
}

/// LangChain's drawings of `drawings`.
fn python(drawings: &[Topology]) -> Vec<String> {
    serde_json::from_value(mermaid_py(&[], &drawings_json(drawings))).unwrap()
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
            let notes = json!({
                "defer": true,
                "note": "<x> [1] #2",
                "__tools": ["search", "it's", 2, 1.0],
                "none": null,
                "nested": [["left out"]],
                "small": 1.5e-5,
            });
            d.metadata
                .insert("a".into(), notes.as_object().unwrap().clone());
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

/// A small deterministic generator (an LCG), for graphs of every shape.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// `count` graphs of 1 to 9 nodes, mostly forward edges with some back edges and
/// conditional ones, sometimes unconnected parts; nodes named as LangGraph names them.
fn generated(count: usize) -> Vec<Topology> {
    let mut rng = Lcg(7);
    let names = [
        "__start__",
        "agent",
        "tools",
        "x",
        "summarize",
        "sub:a",
        "sub:b",
        "end",
        "__end__",
    ];
    (0..count)
        .map(|_| {
            let n = 1 + rng.below(9) as usize;
            let nodes: Vec<&str> = names.iter().copied().take(n).collect();
            let mut edges: Vec<(&str, &str, bool, Option<&str>)> = Vec::new();
            for _ in 0..rng.below(2 * n as u64 + 1) {
                let (a, b) = (rng.below(n as u64) as usize, rng.below(n as u64) as usize);
                let (a, b) = if rng.below(5) == 0 {
                    (b, a)
                } else {
                    (a.min(b), a.max(b))
                };
                if a == b || edges.iter().any(|e| e.0 == nodes[a] && e.1 == nodes[b]) {
                    continue;
                }
                edges.push((nodes[a], nodes[b], rng.below(3) == 0, None));
            }
            drawing(&nodes, &edges)
        })
        .collect()
}

#[test]
fn ascii_art_equals_langchains() {
    let mut drawings = vec![
        drawing(&["a"], &[]),
        drawing(
            &["a", "b"],
            &[("a", "b", false, None), ("b", "b", true, None)],
        ),
        drawing(
            &["__start__", "a", "b", "c", "__end__"],
            &[
                ("__start__", "a", false, None),
                ("a", "b", true, None),
                ("a", "c", true, None),
                ("b", "__end__", false, None),
                ("c", "__end__", false, None),
                ("a", "__end__", true, None),
            ],
        ),
    ];
    drawings.extend(generated(200));
    let theirs = mermaid_py(&["ascii"], &drawings_json(&drawings));
    let theirs = theirs.as_array().unwrap();
    assert_eq!(theirs.len(), drawings.len());
    for (i, (d, t)) in drawings.iter().zip(theirs).enumerate() {
        match (d.draw_ascii(), t.as_str()) {
            (Ok(ours), Some(t)) => assert_eq!(ours, t, "drawing {i} differs: {d:?}"),
            (Err(_), None) => {}
            (ours, _) => panic!("drawing {i}: ours {ours:?}, LangChain's {t}: {d:?}"),
        }
    }
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

    let node = |_s, _c| async { Ok(Map::new()) };
    let mut leaf = StateGraph::<DynState>::with_schema(schema());
    leaf.add_node("x", node).add_node("y", node);
    leaf.add_edge(START, "x")
        .add_edge("x", "y")
        .add_edge("y", END);
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    inner.add_node("a", node);
    inner.add_subgraph("deep", leaf.compile().unwrap());
    inner.add_node("b", node);
    inner
        .add_edge(START, "a")
        .add_edge("a", "deep")
        .add_edge("deep", "b")
        .add_edge("b", END);
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_node("plan", node);
    outer.add_subgraph("sub", inner.compile().unwrap());
    outer.add_node("side", node);
    outer.add_edge(START, "plan");
    outer
        .add_conditional_edges("plan", |_s| Ok(vec!["go".into()]))
        .path_map([("go", "sub"), ("skip", "side")]);
    outer.add_edge("sub", "side").add_edge("side", END);
    let nested = outer.compile().unwrap();

    let mut fan = StateGraph::<DynState>::with_schema(schema());
    fan.add_node("p", node).add_node("q", node);
    fan.add_edge(START, "p")
        .add_edge(START, "q")
        .add_edge("p", END)
        .add_edge("q", END);
    let mut forked = StateGraph::<DynState>::with_schema(schema());
    forked.add_subgraph("fan", fan.compile().unwrap());
    forked.add_node("after", node);
    forked
        .add_edge(START, "fan")
        .add_edge("fan", "after")
        .add_edge("after", END);
    let forked = forked.compile().unwrap();

    let mut g = StateGraph::<DynState>::with_schema(schema());
    g.set_default_error_handler(node);
    for n in ["a", "b", "c", "d"] {
        g.add_node(n, node);
    }
    g.add_destinations("a", ["b", END])
        .add_labelled_destinations("b", [("c", "go c"), ("b", "again")])
        .set_error_handler("d", node)
        .add_edge(START, "a")
        .add_edge("c", "d")
        .add_edge("__error_handler__d", "a");
    let commands = g.compile().unwrap().with_interrupt_after(["c"]);

    let theirs = python_graphs();
    for (name, ours) in [
        ("branches", branches.topology()),
        ("send_defer", send_defer.topology()),
        ("nested", nested.drawing(Xray::Off)),
        ("nested@1", nested.drawing(1)),
        ("nested@all", nested.drawing(true)),
        ("forked@all", forked.drawing(Xray::All)),
        ("commands", commands.topology()),
    ] {
        let theirs = &theirs[name];
        assert_eq!(
            json!(ours.draw_mermaid()),
            theirs["mermaid"],
            "{name} is drawn differently"
        );
        assert_eq!(ours.to_json(), theirs["json"], "{name}'s JSON differs");
        // LangChain cannot route a node's edge to itself, and says so; so do we.
        match ours.draw_ascii() {
            Ok(art) => assert_eq!(json!(art), theirs["ascii"], "{name}'s ASCII art differs"),
            Err(e) => assert!(theirs["ascii"].get("error").is_some(), "{name}: {e}"),
        }
        assert_eq!(Topology::from_json(&theirs["json"]).unwrap(), ours);
        render_png(name, &ours.draw_mermaid());
    }
}

/// Renders `mermaid` with the Mermaid CLI (`scripts/mermaid-cli.sh`, on headless Chromium),
/// which fails on text it cannot parse, and checks that a PNG image came out.
fn render_png(name: &str, mermaid: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("g.mmd"), dir.path().join("g.png"));
    std::fs::write(&input, mermaid).unwrap();
    let script = stategraph_testkit::python::repo_root().join("scripts/mermaid-cli.sh");
    let out = std::process::Command::new(script)
        .arg("render")
        .args([&input, &output])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Mermaid CLI could not render {name} (install it with `scripts/mermaid-cli.sh \
         install`; scripts/test.sh does):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&output).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
    // The IHDR chunk's width and height, big-endian, after the signature and chunk header.
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert!(size(16) > 50 && size(20) > 50, "{name}: an empty image");
}
