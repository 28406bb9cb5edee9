//! The seed graph (and the scenario's other graphs) served over the Agent Server API on a
//! free loopback port, for the SDK tests. The same graphs in Python are the reference
//! server's: `bench/agent-server/reference/graphs.py`.

use std::time::Duration;

use stategraph::graph::Send;
use stategraph::prelude::*;
use stategraph::server::{Server, ServerBuilder};
use stategraph::{Map, Message};

#[derive(State, Clone, Debug, Default)]
pub(crate) struct Seed {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

/// START → node_a (`foo: "a"`, `bar: ["a"]`) → node_b (`foo: "b"`, `bar: ["b"]`) → END.
pub(crate) fn seed_graph() -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("node_a", |_s, _c| async {
        Ok(SeedUpdate::default().foo("a").bar(["a"]))
    });
    g.add_node("node_b", |_s, _c| async {
        Ok(SeedUpdate::default().foo("b").bar(["b"]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap()
}

/// The text of the last message of a `messages` state, and how many messages it has.
fn last_text(s: &DynState) -> (String, usize) {
    let messages = s
        .get("messages")
        .and_then(Value::as_list)
        .unwrap_or_default();
    let text = messages
        .last()
        .and_then(|m| Message::from_value(m).ok())
        .and_then(|m| m.text().map(str::to_owned))
        .unwrap_or_default();
    (text, messages.len())
}

/// An AI message `text` (id `ai-<n>`) as a `messages` update.
fn reply(text: &str, n: usize) -> Map {
    let message = Message::ai(text, Vec::new()).with_id(format!("ai-{n}"));
    Map::from_iter([("messages", Value::from(vec![message.to_value()]))])
}

/// A graph over `messages` with node `agent`, which answers `echo: <last message>` (id
/// `ai-<n>`).
fn echoing() -> StateGraph<DynState> {
    let mut g = StateGraph::<DynState>::with_schema(
        Schema::new().reducer("messages", Reducer::add_messages()),
    );
    g.add_node("agent", |s, _c| async move {
        let (text, n) = last_text(&s);
        Ok(reply(&format!("echo: {text}"), n))
    });
    g
}

/// `echo`: START → agent (`echo: <last message>`, id `ai-<n>`) → END, over `messages`.
pub(crate) fn echo_graph() -> CompiledGraph<DynState> {
    let mut g = echoing();
    g.add_edge(START, "agent").add_edge("agent", END);
    g.compile().unwrap()
}

/// `chat`: START → agent (`echo: <last message>`, id `ai-<n>`) → approve (asks
/// `{"question": "send?", "draft": …}`, then `sent` or `dropped`) → END, over `messages`.
pub(crate) fn chat_graph() -> CompiledGraph<DynState> {
    let mut g = echoing();
    g.add_node("approve", |s, ctx| async move {
        let (draft, n) = last_text(&s);
        let answer = ctx.interrupt(value!({"question": "send?", "draft": draft.as_str()}))?;
        Ok(reply(
            if answer.as_str() == Some("yes") {
                "sent"
            } else {
                "dropped"
            },
            n,
        ))
    });
    g.add_edge(START, "agent")
        .add_edge("agent", "approve")
        .add_edge("approve", END);
    g.compile().unwrap()
}

/// `fanout`: one `Send("worker", {"item": i})` per item of `items`; each worker adds
/// `[item * 10]` to `done`.
pub(crate) fn fanout_graph() -> CompiledGraph<DynState> {
    let mut g = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("items")
            .reducer("done", Reducer::append()),
    );
    g.add_node("worker", |s, _c| async move {
        let item = s.get("item").and_then(Value::as_i64).unwrap_or_default();
        Ok(Map::from_iter([("done", value!([item * 10]))]))
    });
    g.add_conditional_edges(START, |s: &DynState| {
        let items = s.get("items").and_then(Value::as_list).unwrap_or_default();
        Ok(items
            .iter()
            .map(|i| Send::new("worker", Map::from_iter([("item", i.clone())])).into())
            .collect())
    })
    .path_map(["worker"]);
    g.add_edge("worker", END);
    g.compile().unwrap()
}

/// `slow`: START → wait (1 s, then `bar: ["slow"]`) → END over the seed state.
pub(crate) fn slow_graph() -> CompiledGraph<Seed> {
    let mut g = StateGraph::<Seed>::new();
    g.add_node("wait", |_s, _c| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(SeedUpdate::default().bar(["slow"]))
    });
    g.add_edge(START, "wait").add_edge("wait", END);
    g.compile().unwrap()
}

/// `nested`: START → sub (a subgraph inner_a → inner_b) → after → END over `log`
/// (appended); each node adds its name.
pub(crate) fn nested_graph() -> CompiledGraph<DynState> {
    let schema = || Schema::new().reducer("log", Reducer::append());
    let logger = |g: &mut StateGraph<DynState>, name: &'static str| {
        g.add_node(name, move |_s, _c| async move {
            Ok(Map::from_iter([("log", value!([name]))]))
        });
    };
    let mut inner = StateGraph::<DynState>::with_schema(schema());
    logger(&mut inner, "inner_a");
    logger(&mut inner, "inner_b");
    inner
        .add_edge(START, "inner_a")
        .add_edge("inner_a", "inner_b")
        .add_edge("inner_b", END);
    let mut outer = StateGraph::<DynState>::with_schema(schema());
    outer.add_subgraph("sub", inner.compile().unwrap());
    logger(&mut outer, "after");
    outer
        .add_edge(START, "sub")
        .add_edge("sub", "after")
        .add_edge("after", END);
    outer.compile().unwrap()
}

/// What `workflow` takes: the topics to write about.
#[derive(serde::Deserialize, serde::Serialize)]
pub(crate) struct Topics {
    topics: Vec<String>,
}

/// The Functional API workflow `workflow`: drafts each topic in parallel (task `draft`),
/// asks `interrupt({"question": "publish?", "drafts": …})`, and on `"yes"` polishes each
/// draft (task `polish`, upper case) and returns `{"published", "count"}`, saving `count`
/// (1 + the thread's previous count); on any other answer returns no drafts and the
/// previous count, which it saves again.
pub(crate) fn workflow() -> stategraph::functional::Entrypoint<Topics, serde_json::Value> {
    use stategraph::functional::{Final, entrypoint_final, task};
    let draft = task("draft", |topic: String, _ctx| async move {
        Ok::<_, NodeError>(format!("draft about {topic}"))
    });
    let polish = task("polish", |text: String, _ctx| async move {
        Ok::<_, NodeError>(text.to_uppercase())
    });
    entrypoint_final("workflow", move |request: Topics, ctx| {
        let drafting: Vec<_> = request
            .topics
            .into_iter()
            .map(|t| draft.call(&ctx, t))
            .collect();
        let polish = polish.clone();
        async move {
            let mut drafts = Vec::new();
            for d in drafting {
                drafts.push(d.await?);
            }
            let answer =
                ctx.interrupt(value!({"question": "publish?", "drafts": drafts.clone()}))?;
            let count: i64 = ctx.previous()?.unwrap_or(0);
            if answer.as_str() != Some("yes") {
                let value = serde_json::json!({"published": [], "count": count});
                return Ok(Final::new(value, count));
            }
            let polishing: Vec<_> = drafts.into_iter().map(|d| polish.call(&ctx, d)).collect();
            let mut published = Vec::new();
            for p in polishing {
                published.push(p.await?);
            }
            let value = serde_json::json!({"published": published, "count": count + 1});
            Ok(Final::new(value, count + 1))
        }
    })
}

/// The seed graph served as `seed` on a fresh SQLite file (checkpoints and the server's
/// records), listening on a free loopback port: its base URL, the serving task (abort it to
/// stop) and the directory to keep alive.
pub(crate) async fn serve_seed() -> (
    String,
    tokio::task::JoinHandle<std::io::Result<()>>,
    tempfile::TempDir,
) {
    serve(|b| {
        b.graph("seed", seed_graph())
            .graph("chat", chat_graph())
            .graph("fanout", fanout_graph())
            .graph("slow", slow_graph())
            .graph("nested", nested_graph())
            .entrypoint("workflow", workflow())
    })
    .await
}

/// The graphs `graphs` registers served on a fresh SQLite file (checkpoints and the server's
/// records), listening on a free loopback port: its base URL, the serving task (abort it to
/// stop) and the directory to keep alive.
pub(crate) async fn serve(
    graphs: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (
    String,
    tokio::task::JoinHandle<std::io::Result<()>>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("server.sqlite").display());
    let (base, serving) = serve_on(&url, graphs).await;
    (base, serving, dir)
}

/// The graphs `graphs` registers served on the database `url` (checkpoints and the server's
/// records), listening on a free loopback port: its base URL and the serving task.
pub(crate) async fn serve_on(
    url: &str,
    graphs: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    use stategraph::server::Database;
    let server = graphs(Server::builder())
        .database(url)
        .await
        .unwrap()
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    (base, tokio::spawn(server.serve(listener)))
}

/// Runs the SDK script `crates/stategraph-tests/tests/sdk/NAME` with `args` (off the async
/// threads) and returns the JSON it prints.
pub(crate) async fn run_sdk_script(name: &str, args: Vec<String>) -> serde_json::Value {
    let script = stategraph_testkit::python::repo_root()
        .join("crates/stategraph-tests/tests/sdk")
        .join(name);
    tokio::task::spawn_blocking(move || {
        let mut all = vec![script.into_os_string()];
        all.extend(args.into_iter().map(Into::into));
        stategraph_testkit::python::run_python_json(all, "")
    })
    .await
    .unwrap()
}
