//! `#[derive(State)]`: typed states store exactly what the dynamic state (and Python) stores.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Map, Value};

#[derive(State, Clone, Debug, Default)]
struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
struct Doc {
    title: String,
    score: i64,
}

fn longest(a: String, b: String) -> String {
    if b.len() > a.len() { b } else { a }
}

#[derive(State, Clone, Debug, Default)]
struct Rich {
    #[reducer(add)]
    count: i64,
    #[reducer(custom = longest)]
    longest: String,
    doc: Option<Doc>,
    #[reducer(add_messages)]
    messages: Vec<Value>,
}

async fn stored_values(saver: &Arc<InMemorySaver>, thread: &str) -> Vec<Value> {
    let mut tuples = saver.list(&ListOptions::thread(thread)).await.unwrap();
    tuples.reverse();
    tuples
        .into_iter()
        .map(|t| Value::Map(t.checkpoint.channel_values.clone().into_iter().collect()))
        .collect()
}

#[tokio::test]
async fn typed_and_dynamic_states_store_the_same_checkpoints() {
    let saver = Arc::new(InMemorySaver::new());
    let mut typed = StateGraph::<Seed>::new();
    typed.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    typed.add_node("node_b", |s, _c| async move {
        assert_eq!(s.bar, ["a"], "node_b sees node_a's update");
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
    });
    typed
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let typed = typed.compile().unwrap().with_checkpointer(saver.clone());
    typed
        .invoke_values(
            SeedUpdate::default().foo("").bar(Vec::<String>::new()),
            RunConfig::thread("typed"),
        )
        .await
        .unwrap();

    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut dynamic = StateGraph::<DynState>::with_schema(schema);
    dynamic.add_node("node_a", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    dynamic.add_node("node_b", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    dynamic
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let dynamic = dynamic.compile().unwrap().with_checkpointer(saver.clone());
    let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    dynamic
        .invoke_values(input, RunConfig::thread("dyn"))
        .await
        .unwrap();

    assert_eq!(
        stored_values(&saver, "typed").await,
        stored_values(&saver, "dyn").await
    );
}

#[tokio::test]
async fn reducers_custom_types_and_messages() {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Rich>::new();
    g.add_node("one", |_s, _c| async {
        Ok(RichUpdate::default()
            .count(2)
            .longest("abc")
            .doc(Some(Doc {
                title: "t".into(),
                score: 7,
            }))
            .messages([value!({"type": "human", "content": "hi", "id": "m1"})]))
    });
    g.add_node("two", |s, _c| async move {
        assert_eq!(s.doc.as_ref().map(|d| d.score), Some(7));
        Ok(RichUpdate::default().count(3).longest("ab").messages([
            value!({"type": "human", "content": "hi, edited", "id": "m1"}),
            value!({"type": "ai", "content": "hello", "id": "m2"}),
        ]))
    });
    g.add_edge(START, "one").add_edge("one", "two");
    let g = g.compile().unwrap().with_checkpointer(saver.clone());
    let out = g
        .invoke_values(RichUpdate::default().count(1), RunConfig::thread("r"))
        .await
        .unwrap();
    assert_eq!(out["count"], value!(6));
    assert_eq!(out["longest"], value!("abc"));
    assert_eq!(
        out["doc"],
        value!({"title": "t", "score": 7}),
        "structs are stored as maps"
    );
    // Message maps are stored as the LangChain messages they describe (as Python's
    // `add_messages` coerces them), merged by id.
    let messages: Vec<stategraph::Message> = out["messages"]
        .as_list()
        .unwrap()
        .iter()
        .map(|m| stategraph::Message::from_value(m).unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            stategraph::Message::human("hi, edited").with_id("m1"),
            stategraph::Message::ai("hello", Vec::new()).with_id("m2"),
        ]
    );
}

#[tokio::test]
async fn conditional_edges_and_joins() {
    #[derive(State, Clone, Debug, Default)]
    struct Route {
        #[reducer(append)]
        log: Vec<String>,
        go_left: bool,
    }
    let mut g = StateGraph::<Route>::new();
    for name in ["decide", "left", "right", "a", "b", "join"] {
        g.add_node(name, move |_s, _c| async move {
            Ok(RouteUpdate::default().log([name]))
        });
    }
    g.add_edge(START, "decide");
    g.add_conditional_edges("decide", |s: &Route| {
        Ok(vec![if s.go_left { "l".into() } else { "r".into() }])
    })
    .path_map([("l", "left"), ("r", "right")]);
    g.add_edge("left", "a")
        .add_edge("left", "b")
        .add_join(["a", "b"], "join");
    g.add_edge("right", END).add_edge("join", END);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let out = g
        .invoke_values(RouteUpdate::default().go_left(true), RunConfig::thread("l"))
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["decide", "left", "a", "b", "join"]));
    let out = g
        .invoke_values(
            RouteUpdate::default().go_left(false),
            RunConfig::thread("r"),
        )
        .await
        .unwrap();
    assert_eq!(out["log"], value!(["decide", "right"]));
}

#[tokio::test]
async fn fifty_parallel_nodes_run_concurrently() {
    #[derive(State, Clone, Debug, Default)]
    struct Fan {
        #[reducer(add)]
        done: i64,
    }
    let mut g = StateGraph::<Fan>::new();
    g.add_node("fan", |_s, _c| async { Ok(FanUpdate::default()) });
    g.add_edge(START, "fan");
    let names: Vec<String> = (0..50).map(|i| format!("w{i:02}")).collect();
    for n in &names {
        g.add_node(n.clone(), |_s, _c| async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(FanUpdate::default().done(1))
        });
        g.add_edge("fan", n.clone());
    }
    g.add_join(names.clone(), "end_node");
    g.add_node("end_node", |s, _c| async move {
        assert_eq!(s.done, 50);
        Ok(FanUpdate::default())
    });
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let started = std::time::Instant::now();
    let out = g
        .invoke_values(FanUpdate::default(), RunConfig::thread("f"))
        .await
        .unwrap();
    // Sequential execution would take 2.5 s; only a generous bound is asserted here.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out["done"], value!(50));
}

/// `invoke` returns the typed final state; a snapshot reads back as the same typed state; the
/// LangGraph-shaped output (`invoke_values`) carries the same values.
#[tokio::test]
async fn invoke_returns_the_typed_state() {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Rich>::new();
    g.add_node("bump", |s, _c| async move {
        Ok(RichUpdate::default()
            .count(1)
            .longest(format!("seen {}", s.count))
            .doc(Doc {
                title: "t".into(),
                score: s.count,
            }))
    });
    g.add_edge(START, "bump");
    let g = g.compile().unwrap().with_checkpointer(saver);
    let config = RunConfig::thread("typed");
    let out = g
        .invoke(RichUpdate::default().count(2), config.clone())
        .await
        .unwrap();
    assert_eq!(out.count, 3);
    assert_eq!(out.longest, "seen 2");
    assert_eq!(
        out.doc,
        Some(Doc {
            title: "t".into(),
            score: 2
        })
    );
    let again = g
        .invoke(RichUpdate::default().count(10), config.clone())
        .await
        .unwrap();
    assert_eq!(again.count, 14);
    let snapshot: Rich = g.get_state(&config).await.unwrap().state().unwrap();
    assert_eq!(snapshot.count, again.count);
    assert_eq!(snapshot.doc, again.doc);
    let values = g
        .invoke_values(RichUpdate::default().count(1), config)
        .await
        .unwrap();
    assert_eq!(values["count"], Value::from(16));
}

/// A state that also derives `schemars::JsonSchema`: its JSON Schema is the state's own.
#[derive(State, schemars::JsonSchema, Clone, Debug, Default)]
struct Described {
    /// The question asked.
    question: String,
    #[reducer(append)]
    answers: Vec<String>,
    attempts: Option<u32>,
}

#[test]
fn a_state_deriving_json_schema_has_its_schema_and_one_without_has_none() {
    let schema = <Described as stategraph::graph::State>::json_schema()
        .expect("Described derives JsonSchema");
    assert_eq!(schema["title"], "Described");
    assert_eq!(schema["type"], "object");
    let props = &schema["properties"];
    assert_eq!(props["question"]["type"], "string");
    assert_eq!(props["question"]["description"], "The question asked.");
    assert_eq!(props["answers"]["type"], "array");
    assert_eq!(props["answers"]["items"]["type"], "string");
    assert_eq!(
        props["attempts"]["type"],
        serde_json::json!(["integer", "null"])
    );
    // `Seed` derives State only.
    assert_eq!(<Seed as stategraph::graph::State>::json_schema(), None);
}
