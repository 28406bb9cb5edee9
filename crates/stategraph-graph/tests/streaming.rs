//! Stream modes: the same events, in the same order, as Python LangGraph streams for the
//! seeds' 2-node graph with every mode on (recorded from langgraph 1.2.22); the stream as an
//! owned, bounded `futures::Stream` of typed events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{InMemorySaver, Map, Value, value};
use stategraph_graph::{
    DynState, END, GraphError, Reducer, RunConfig, START, STREAM_CAPACITY, Schema, StateGraph,
    StreamEvent, StreamMode, TaskEvent, UpdatesEvent,
};
use stategraph_messages::Message;

fn field<'a>(v: &'a Json, key: &str) -> &'a Json {
    v.get(key).unwrap_or(&Json::Null)
}

/// Reads a stream to its end; every item must be an event.
async fn events<S>(stream: &mut stategraph_graph::RunStream<S>) -> Vec<StreamEvent<S>> {
    let mut out = Vec::new();
    while let Some(event) = stream.next().await {
        out.push(event.unwrap());
    }
    out
}

#[tokio::test]
async fn all_modes_in_langgraph_order() {
    let schema = Schema::new()
        .last_value("foo")
        .reducer("bar", Reducer::append());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("node_a", |_s, ctx| async move {
        ctx.write_custom(value!({"progress": 1})).await;
        Ok(Map::from_iter([
            ("foo", value!("a")),
            ("bar", value!(["a"])),
        ]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(Map::from_iter([
            ("foo", value!("b")),
            ("bar", value!(["b"])),
        ]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    use StreamMode::*;
    let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
    let mut stream = g.stream(
        input,
        RunConfig::thread("1"),
        &[Values, Updates, Checkpoints, Tasks, Debug, Custom],
    );
    let parts = events(&mut stream).await;
    let out = stream.result().await.unwrap();
    assert_eq!(out["bar"], value!(["a", "b"]));

    let modes: Vec<&str> = parts.iter().map(|p| p.mode().as_str()).collect();
    assert_eq!(
        modes,
        [
            "checkpoints",
            "debug",
            "values", // input checkpoint; __start__ runs
            "checkpoints",
            "debug",
            "tasks",
            "debug",
            "custom",
            "updates",
            "tasks",
            "debug",
            "values", // node_a
            "checkpoints",
            "debug",
            "tasks",
            "debug",
            "updates",
            "tasks",
            "debug",
            "values", // node_b
            "checkpoints",
            "debug", // final checkpoint
        ]
    );
    // Payloads, as LangGraph's JSON.
    let data: Vec<Json> = parts.iter().map(StreamEvent::to_json).collect();
    let first = &data[0];
    assert_eq!(field(first, "values"), &json!({"bar": []}));
    assert_eq!(field(first, "next"), &json!(["__start__"]));
    assert_eq!(field(first, "parent_config"), &Json::Null);
    assert_eq!(field(field(first, "metadata"), "source"), &json!("input"));
    assert_eq!(data[2], json!({"bar": [], "foo": ""}));
    assert_eq!(field(&data[5], "name"), &json!("node_a"));
    assert_eq!(field(&data[5], "triggers"), &json!(["branch:to:node_a"]));
    assert_eq!(field(&data[5], "input"), &json!({"bar": [], "foo": ""}));
    assert_eq!(field(&data[6], "type"), &json!("task"));
    assert_eq!(field(&data[6], "step"), &json!(1));
    assert_eq!(field(&data[6], "payload"), &data[5]);
    assert_eq!(data[7], json!({"progress": 1}));
    assert_eq!(data[8], json!({"node_a": {"foo": "a", "bar": ["a"]}}));
    assert_eq!(
        field(&data[9], "result"),
        &json!({"foo": "a", "bar": ["a"]})
    );
    assert_eq!(field(&data[9], "error"), &Json::Null);
    let last = &data[20];
    assert_eq!(field(last, "next"), &json!([]));
    assert_eq!(field(field(last, "metadata"), "step"), &json!(2));
    // The same events, typed.
    let StreamEvent::Tasks(TaskEvent::Start(start)) = &parts[5] else {
        panic!("not a task start: {:?}", parts[5]);
    };
    assert_eq!(
        (start.name.as_str(), start.triggers.as_slice()),
        ("node_a", &["branch:to:node_a".to_owned()][..])
    );
    let StreamEvent::Updates(UpdatesEvent::Node { node, update, .. }) = &parts[8] else {
        panic!("not an update: {:?}", parts[8]);
    };
    assert_eq!(node, "node_a");
    assert_eq!(update.as_ref().unwrap()["foo"], value!("a"));
    let StreamEvent::Values(values) = &parts[19] else {
        panic!("not values: {:?}", parts[19]);
    };
    assert_eq!(values.state().unwrap().get("foo"), Some(&value!("b")));
}

#[tokio::test]
async fn only_requested_modes_are_sent() {
    let schema = Schema::new().reducer("n", Reducer::add());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("inc", |_s, ctx| async move {
        ctx.write_custom("ignored").await;
        Ok(Map::from_iter([("n", value!(1))]))
    });
    g.add_edge(START, "inc");
    let g = g.compile().unwrap();
    let mut stream = g.stream(
        Map::from_iter([("n", value!(1))]),
        RunConfig::default(),
        &[StreamMode::Updates],
    );
    let parts: Vec<Json> = events(&mut stream)
        .await
        .iter()
        .map(StreamEvent::to_json)
        .collect();
    assert_eq!(parts, [json!({"inc": {"n": 1}})]);
    assert_eq!(stream.result().await.unwrap()["n"], value!(2));
}

fn counter_graph(
    writes: usize,
    written: Arc<AtomicUsize>,
) -> stategraph_graph::CompiledGraph<DynState> {
    let schema = Schema::new().reducer("n", Reducer::add());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("chatty", move |_s, ctx| {
        let written = Arc::clone(&written);
        async move {
            for i in 0..writes {
                ctx.write_custom(i as i64).await;
                written.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Map::from_iter([("n", value!(1))]))
        }
    });
    g.add_edge(START, "chatty");
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
}

#[tokio::test]
async fn a_stream_is_owned_and_read_from_a_spawned_task() {
    let graph = counter_graph(3, Arc::default());
    let mut stream = graph.stream(
        Map::from_iter([("n", value!(1))]),
        RunConfig::thread("spawned"),
        &[StreamMode::Custom, StreamMode::Values],
    );
    drop(graph); // the stream holds what it needs
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await {
            seen.push(event?.to_json());
        }
        Ok::<_, GraphError>(seen)
    });
    let seen = reader.await.unwrap().unwrap();
    assert_eq!(
        seen,
        [
            json!({"n": 1}),
            json!(0),
            json!(1),
            json!(2),
            json!({"n": 2})
        ]
    );
}

#[tokio::test]
async fn a_slow_reader_holds_the_run_back() {
    let written = Arc::new(AtomicUsize::new(0));
    let total = STREAM_CAPACITY * 4;
    let graph = counter_graph(total, Arc::clone(&written));
    let mut stream = graph.stream(
        Map::from_iter([("n", value!(1))]),
        RunConfig::thread("slow"),
        &[StreamMode::Custom],
    );
    // Read one event, then let the run go as far as it can without the reader.
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.to_json(), json!(0));
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let ahead = written.load(Ordering::SeqCst);
    assert!(
        ahead <= STREAM_CAPACITY + 2,
        "the run got {ahead} events ahead of a reader that stopped"
    );
    // Reading on lets it finish, with nothing lost.
    let rest = events(&mut stream).await;
    assert_eq!(rest.len(), total - 1);
    assert_eq!(rest.last().unwrap().to_json(), json!(total as i64 - 1));
    assert_eq!(stream.result().await.unwrap()["n"], value!(2));
}

#[tokio::test]
async fn a_failed_run_ends_its_stream_with_the_error() {
    let schema = Schema::new().last_value("x");
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("fails", |_s, _ctx| async {
        Err::<Map, _>(stategraph_graph::NodeError::new("boom"))
    });
    g.add_edge(START, "fails");
    let g = g.compile().unwrap();
    let mut stream = g.stream(
        Map::from_iter([("x", value!(1))]),
        RunConfig::default(),
        &[StreamMode::Updates],
    );
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    let last = items.pop().unwrap();
    assert!(
        matches!(last, Err(GraphError::NodeFailed { ref node, .. }) if node == "fails"),
        "{last:?}"
    );
    assert!(items.iter().all(Result::is_ok));
    // An input the state cannot take is the stream's only item.
    let mut bad = g.stream(
        Map::from_iter([("nope", value!(1))]),
        RunConfig::default(),
        &[StreamMode::Updates],
    );
    let only = bad.next().await.unwrap();
    assert!(
        matches!(only, Err(GraphError::InvalidUpdate { ref channel, .. }) if channel == "nope"),
        "{only:?}"
    );
    assert!(bad.next().await.is_none());
}

#[tokio::test]
async fn messages_mode_shows_each_returned_message_once() {
    let schema = Schema::new().reducer("messages", Reducer::add_messages());
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("bot", |_s, _ctx| async {
        let reply = Message::ai("hello there", Vec::new()).with_id("ai-1");
        Ok(Map::from_iter([(
            "messages",
            Value::List(vec![reply.to_value()].into()),
        )]))
    });
    g.add_node("echo", |s, _ctx| async move {
        // Returns the whole list again: only news is shown.
        let all = s.get("messages").cloned().unwrap_or_default();
        let extra = Message::ai("and more", Vec::new()).with_id("ai-2");
        let mut list: Vec<Value> = all.as_list().map(|l| l.to_vec()).unwrap_or_default();
        list.push(extra.to_value());
        Ok(Map::from_iter([("messages", Value::List(list.into()))]))
    });
    g.add_edge(START, "bot")
        .add_edge("bot", "echo")
        .add_edge("echo", END);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()));
    let question = Message::human("hi").with_id("human-1");
    let mut stream = g.stream(
        Map::from_iter([("messages", Value::List(vec![question.to_value()].into()))]),
        RunConfig::thread("chat"),
        &[StreamMode::Messages],
    );
    let shown: Vec<Json> = events(&mut stream)
        .await
        .iter()
        .map(StreamEvent::to_json)
        .collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    assert_eq!(shown[0][0]["content"], json!("hello there"));
    assert_eq!(shown[0][0]["type"], json!("ai"));
    let meta = &shown[0][1];
    assert_eq!(meta["langgraph_node"], json!("bot"));
    assert_eq!(meta["langgraph_step"], json!(1));
    assert_eq!(meta["langgraph_triggers"], json!(["branch:to:bot"]));
    assert_eq!(meta["thread_id"], json!("chat"));
    assert!(
        meta["langgraph_checkpoint_ns"]
            .as_str()
            .unwrap()
            .starts_with("bot:")
    );
    assert_eq!(shown[1][0]["content"], json!("and more"));
    assert_eq!(shown[1][1]["langgraph_node"], json!("echo"));
}

/// A parent whose node `sub` is a subgraph `inner_a → inner_b`, over `log` (appended).
fn nested() -> stategraph_graph::CompiledGraph<DynState> {
    let schema = || Schema::new().reducer("log", Reducer::append());
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    for n in ["inner_a", "inner_b"] {
        inner.add_node(n, move |_s, ctx| async move {
            ctx.write_custom(format!("in {n}")).await;
            Ok(Map::from_iter([("log", value!([n]))]))
        });
    }
    inner
        .add_edge(START, "inner_a")
        .add_edge("inner_a", "inner_b");
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_subgraph("sub", inner.compile().unwrap());
    outer.add_node("after", |_s, _c| async {
        Ok(Map::from_iter([("log", value!(["after"]))]))
    });
    outer.add_edge(START, "sub").add_edge("sub", "after");
    outer
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
}

#[tokio::test]
async fn subgraph_events_carry_their_namespace_when_asked_for() {
    let g = nested();
    let modes = [StreamMode::Updates, StreamMode::Custom];
    let input = || Map::from_iter([("log", value!([]))]);
    // Not asked for: only the parent's own events.
    let mut plain = g.stream(input(), RunConfig::thread("plain"), &modes);
    let got = events(&mut plain).await;
    assert!(got.iter().all(|e| e.namespace().is_empty()));
    let nodes: Vec<Json> = got.iter().map(|e| e.to_json()).collect();
    assert_eq!(
        nodes,
        [
            json!({"sub": {"log": ["inner_a", "inner_b"]}}),
            json!({"after": {"log": ["after"]}})
        ]
    );
    // Asked for: the subgraph's updates and custom writes too, under `sub:<task_id>`.
    let config = RunConfig::thread("nested").with_subgraph_events();
    let mut all = g.stream(input(), config, &modes);
    let got = events(&mut all).await;
    let inner: Vec<(Vec<String>, &'static str, Json)> = got
        .iter()
        .filter(|e| !e.namespace().is_empty())
        .map(|e| (e.namespace().to_vec(), e.mode().as_str(), e.to_json()))
        .collect();
    assert_eq!(inner.len(), 4, "{inner:?}");
    let ns = &inner[0].0;
    assert_eq!(ns.len(), 1);
    assert!(ns[0].starts_with("sub:"), "{ns:?}");
    // The namespace is the subgraph's checkpoint namespace.
    let history = g
        .get_state_history(&RunConfig::thread("nested"), Default::default())
        .await
        .unwrap();
    let sub_task = history
        .iter()
        .flat_map(|s| s.tasks.iter())
        .find(|t| t.name == "sub")
        .unwrap();
    assert_eq!(ns[0], format!("sub:{}", sub_task.id));
    assert!(inner.iter().all(|(n, _, _)| n == ns));
    assert_eq!(
        inner
            .iter()
            .map(|(_, mode, data)| (*mode, data.clone()))
            .collect::<Vec<_>>(),
        [
            ("custom", json!("in inner_a")),
            ("updates", json!({"inner_a": {"log": ["inner_a"]}})),
            ("custom", json!("in inner_b")),
            ("updates", json!({"inner_b": {"log": ["inner_b"]}})),
        ]
    );
    // The parent's own events are unchanged.
    let own: Vec<Json> = got
        .iter()
        .filter(|e| e.namespace().is_empty())
        .map(|e| e.to_json())
        .collect();
    assert_eq!(own, nodes);
}

/// START → chat → review → check → END: `chat` appends a message (a delta channel, so the
/// saver's copy is rebuilt from writes), `review` asks when `ask` is set, `check` fails when
/// `fail` is set.
fn reviewed_chat() -> stategraph_graph::CompiledGraph<DynState> {
    let schema = Schema::new()
        .delta("messages", Reducer::add_messages(), 2)
        .reducer("n", Reducer::add())
        .last_value("ask")
        .last_value("fail")
        .last_value("answer");
    let mut g = StateGraph::<DynState>::with_schema(schema);
    g.add_node("chat", |s: Arc<DynState>, _c| async move {
        let n = s.get("n").and_then(Value::as_i64).unwrap_or(0);
        let reply = Message::ai(format!("reply {n}"), Vec::new()).with_id(format!("m{n}"));
        Ok(Map::from_iter([
            ("messages", Value::from(vec![reply.to_value()])),
            ("n", value!(1)),
        ]))
    });
    g.add_node("review", |s: Arc<DynState>, ctx| async move {
        if s.get("ask") != Some(&value!(true)) {
            return Ok(Map::new());
        }
        let answer = ctx.interrupt("ok?")?;
        Ok(Map::from_iter([("answer", answer), ("ask", value!(false))]))
    });
    g.add_node("check", |s: Arc<DynState>, _c| async move {
        if s.get("fail") == Some(&value!(true)) {
            return Err(stategraph_graph::NodeError::new("asked to fail"));
        }
        Ok(Map::new())
    });
    g.add_edge(START, "chat")
        .add_edge("chat", "review")
        .add_edge("review", "check")
        .add_edge("check", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(InMemorySaver::new()))
}

/// Reads `stream` to its end (an error item included) and returns what it says the run
/// completed with.
async fn completed_of(mut stream: stategraph_graph::RunStream<DynState>) -> Option<Map> {
    while stream.next().await.is_some() {}
    stream.completed().cloned().map(|v| v.into_iter().collect())
}

#[tokio::test]
async fn a_completed_run_reports_the_state_it_left_and_no_other_run_does() {
    let g = reviewed_chat();
    let config = RunConfig::thread("done");
    let latest = |g: &stategraph_graph::CompiledGraph<DynState>| {
        let g = g.clone();
        async move { g.get_state(&RunConfig::thread("done")).await.unwrap() }
    };
    let input =
        |ask: bool, fail: bool| Map::from_iter([("ask", value!(ask)), ("fail", value!(fail))]);

    // Runs that complete, one after another on the thread (the delta channel's stored
    // form changes between snapshots and writes): each reports exactly the latest state.
    for _ in 0..4 {
        let done = completed_of(g.stream_values(input(false, false), config.clone(), &[]))
            .await
            .expect("a run with nothing left to do completed");
        let state = latest(&g).await;
        assert!(state.next.is_empty() && state.tasks.is_empty());
        assert_eq!(done, state.values.into_iter().collect::<Map>());
    }
    // Still nothing is reported before the stream ends.
    let mut stream = g.stream_values(input(false, false), config.clone(), &[StreamMode::Values]);
    assert!(stream.completed().is_none());
    stream.next().await.unwrap().unwrap();
    assert!(stream.completed().is_none());
    assert!(completed_of(stream).await.is_some());

    // Stopped on an interrupt a node raised: not completed, the thread waits.
    let asked = completed_of(g.stream_values(input(true, false), config.clone(), &[])).await;
    assert_eq!(asked, None);
    assert_eq!(latest(&g).await.next, ["review"]);
    // Resumed to the end: completed, with the answer in the state.
    let resumed = completed_of(g.stream_resume(
        stategraph_graph::Resume::Value(value!("yes")),
        config.clone(),
        &[],
    ))
    .await
    .expect("the resumed run completed");
    assert_eq!(resumed.get("answer"), Some(&value!("yes")));
    assert_eq!(
        resumed,
        latest(&g).await.values.into_iter().collect::<Map>()
    );

    // Failed in a node: not completed.
    let failed = completed_of(g.stream_values(input(false, true), config.clone(), &[])).await;
    assert_eq!(failed, None);
    assert_eq!(latest(&g).await.next, ["check"]);

    // Stopped before a node (`interrupt_before`): not completed; carried on: completed.
    let before = RunConfig::thread("before").with_interrupt_before(["check"]);
    let stopped = completed_of(g.stream_values(input(false, false), before.clone(), &[])).await;
    assert_eq!(stopped, None);
    let carried_on = completed_of(g.stream_continue(RunConfig::thread("before"), &[]))
        .await
        .expect("carried on to the end");
    let state = g.get_state(&RunConfig::thread("before")).await.unwrap();
    assert!(state.next.is_empty());
    assert_eq!(carried_on, state.values.into_iter().collect::<Map>());
    // Continued with nothing left to do: completed at once, on the same state.
    let again = completed_of(g.stream_continue(RunConfig::thread("before"), &[])).await;
    assert_eq!(again, Some(carried_on));
}
