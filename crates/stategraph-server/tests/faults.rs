//! Faults over a real socket: a client that drops a run's stream mid-run leaves the run going
//! (LangGraph's default `on_disconnect: "continue"`), or cancels it with `"cancel"`; quiet
//! streams and waits send keep-alives; a handler that panics answers 500 with a request id.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{DynState, END, Reducer, START, Schema, StateGraph};
use stategraph_server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Serves a graph `gate`: `first`, then `wait`, which waits until `gate` is notified.
async fn serve(gate: Arc<Notify>) -> SocketAddr {
    serve_with(gate, stategraph_server::DEFAULT_KEEP_ALIVE).await
}

async fn serve_with(gate: Arc<Notify>, keep_alive: Duration) -> SocketAddr {
    let mut g =
        StateGraph::<DynState>::with_schema(Schema::new().reducer("bar", Reducer::append()));
    g.add_node("first", |_s, _c| async {
        Ok(Map::from_iter([("bar", value!(["first"]))]))
    });
    g.add_node("wait", move |_s, _c| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            Ok(Map::from_iter([("bar", value!(["done"]))]))
        }
    });
    g.add_edge(START, "first")
        .add_edge("first", "wait")
        .add_edge("wait", END);
    let server = Server::builder()
        .graph("gate", g.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .keep_alive(keep_alive)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server.serve(listener));
    addr
}

fn request(method: &str, path: &str, body: Option<&Json>) -> Vec<u8> {
    let body = body.map(Json::to_string).unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One request on its own connection; the answer's JSON body (`Content-Length` answers).
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<Json>) -> Json {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(&request(method, path, body.as_ref()))
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{method} {path}: {head}");
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return serde_json::from_str(unchunk(body).trim()).unwrap();
    }
    serde_json::from_str(body).unwrap()
}

/// A chunked body's content.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Starts streaming a run of `gate`, reads until the `values` event after `first`, then drops
/// the connection; the run's id.
async fn stream_and_drop(addr: SocketAddr, thread_id: &str, extra: Json) -> String {
    let mut body = json!({"assistant_id": "gate", "input": {}, "stream_mode": ["values"]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(&request(
        "POST",
        &format!("/threads/{thread_id}/runs/stream"),
        Some(&body),
    ))
    .await
    .unwrap();
    let mut seen = Vec::new();
    let marker = "\"run_id\":\"";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(at) = text.find(marker)
            && text.contains(r#"{"bar":["first"]}"#)
        {
            let start = at + marker.len();
            drop(conn);
            return text[start..start + 36].to_owned();
        }
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout_at(deadline.into(), conn.read(&mut buf))
            .await
            .expect("no metadata event")
            .unwrap();
        assert!(n > 0, "the stream closed early: {text}");
        seen.extend_from_slice(&buf[..n]);
    }
}

/// Polls the run until it is neither `pending` nor `running`; its status.
async fn settled(addr: SocketAddr, thread_id: &str, run_id: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let run = call(
            addr,
            "GET",
            &format!("/threads/{thread_id}/runs/{run_id}"),
            None,
        )
        .await;
        let status = run["status"].as_str().unwrap().to_owned();
        if !matches!(status.as_str(), "pending" | "running") {
            return status;
        }
        assert!(Instant::now() < deadline, "the run is still {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_does_not_stop_the_run_by_default() {
    let gate = Arc::new(Notify::new());
    let addr = serve(Arc::clone(&gate)).await;
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let run_id = stream_and_drop(addr, &thread_id, json!({})).await;
    // Let the server see the connection gone before the node may finish.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let run = call(
        addr,
        "GET",
        &format!("/threads/{thread_id}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(run["status"], "running");
    gate.notify_one();
    assert_eq!(settled(addr, &thread_id, &run_id).await, "success");

    let state = call(addr, "GET", &format!("/threads/{thread_id}/state"), None).await;
    assert_eq!(state["values"]["bar"], json!(["first", "done"]));
    assert_eq!(state["next"], json!([]));
    let history = call(
        addr,
        "POST",
        &format!("/threads/{thread_id}/history"),
        Some(json!({"limit": 10})),
    )
    .await;
    // input, first, wait, and the run's start: every step checkpointed.
    assert_eq!(history.as_array().unwrap().len(), 4, "{history}");
    let thread = call(addr, "GET", &format!("/threads/{thread_id}"), None).await;
    assert_eq!(thread["status"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_disconnect_cancel_interrupts_the_run() {
    let gate = Arc::new(Notify::new());
    let addr = serve(Arc::clone(&gate)).await;
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let run_id = stream_and_drop(addr, &thread_id, json!({"on_disconnect": "cancel"})).await;
    // The node never finishes on its own: only the cancel ends the run.
    assert_eq!(settled(addr, &thread_id, &run_id).await, "interrupted");
    let state = call(addr, "GET", &format!("/threads/{thread_id}/state"), None).await;
    // What the run checkpointed before the cancel stays.
    assert_eq!(state["values"]["bar"], json!(["first"]));
    assert_eq!(state["next"], json!(["wait"]));
    let thread = call(addr, "GET", &format!("/threads/{thread_id}"), None).await;
    assert_ne!(thread["status"], "busy");
}

/// Reads from `conn` until what was read contains `needle` (within 5 seconds).
async fn read_until(conn: &mut TcpStream, seen: &mut Vec<u8>, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(seen).contains(needle) {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout_at(deadline.into(), conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in {}", String::from_utf8_lossy(seen)))
            .unwrap();
        assert!(
            n > 0,
            "closed before {needle:?}: {}",
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_streams_and_waits_send_keep_alives() {
    let gate = Arc::new(Notify::new());
    let addr = serve_with(Arc::clone(&gate), Duration::from_millis(50)).await;
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();

    // A stream whose run waits: `: heartbeat`-style comments, then the run's events.
    let body = json!({"assistant_id": "gate", "input": {}, "stream_mode": ["values"]});
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let path = format!("/threads/{thread_id}/runs/stream");
    conn.write_all(&request("POST", &path, Some(&body)))
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut conn, &mut seen, r#"{"bar":["first"]}"#).await;
    let before = seen.len();
    read_until(&mut conn, &mut seen, ": heartbeat\n\n").await;
    assert!(String::from_utf8_lossy(&seen[before..]).contains(": heartbeat"));
    gate.notify_one();
    read_until(&mut conn, &mut seen, r#"{"bar":["first","done"]}"#).await;

    // `runs/wait`: newlines before the JSON answer, which parses once they are skipped.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let path = format!("/threads/{thread_id}/runs/wait");
    conn.write_all(&request("POST", &path, Some(&body)))
        .await
        .unwrap();
    let mut seen = Vec::new();
    // A chunk of one newline (chunked transfer encoding).
    read_until(&mut conn, &mut seen, "\r\n1\r\n\n\r\n").await;
    gate.notify_one();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    seen.extend_from_slice(&rest);
    let text = String::from_utf8(seen).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    // De-chunk: the chunks' payloads in order.
    let mut payload = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            break;
        }
        payload.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    assert!(payload.starts_with('\n'), "{payload:?}");
    let out: Json = serde_json::from_str(&payload).unwrap();
    assert_eq!(
        out["bar"],
        json!(["first", "done", "first", "done"]),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_intervals_out_of_range_are_clamped() {
    // Zero would send keep-alives without end; the largest duration would overflow the
    // stream's timer once an event went out.
    for every in [Duration::ZERO, Duration::MAX] {
        let gate = Arc::new(Notify::new());
        let addr = serve_with(Arc::clone(&gate), every).await;
        let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
        let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
        let body = json!({"assistant_id": "gate", "input": {}, "stream_mode": ["values"]});
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let path = format!("/threads/{thread_id}/runs/stream");
        conn.write_all(&request("POST", &path, Some(&body)))
            .await
            .unwrap();
        let mut seen = Vec::new();
        read_until(&mut conn, &mut seen, r#"{"bar":["first"]}"#).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.notify_one();
        read_until(&mut conn, &mut seen, r#"{"bar":["first","done"]}"#).await;
        let text = String::from_utf8_lossy(&seen);
        // At most one keep-alive per 10 ms the stream stayed quiet.
        assert!(
            text.matches(": heartbeat").count() < 50,
            "{every:?}: {} keep-alives",
            text.matches(": heartbeat").count()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_cancels_only_when_asked() {
    let gate = Arc::new(Notify::new());
    let addr = serve(Arc::clone(&gate)).await;
    for (on_disconnect, want) in [("cancel", "interrupted"), ("continue", "success")] {
        let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
        let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
        let body = json!({"assistant_id": "gate", "input": {}, "on_disconnect": on_disconnect});
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let path = format!("/threads/{thread_id}/runs/wait");
        conn.write_all(&request("POST", &path, Some(&body)))
            .await
            .unwrap();
        // Wait until the run is past `first`, then go away.
        let deadline = Instant::now() + Duration::from_secs(5);
        let run_id = loop {
            let runs = call(addr, "GET", &format!("/threads/{thread_id}/runs"), None).await;
            let state = call(addr, "GET", &format!("/threads/{thread_id}/state"), None).await;
            if let Some(run) = runs.as_array().unwrap().first()
                && state["next"] == json!(["wait"])
            {
                break run["run_id"].as_str().unwrap().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the run did not get past `first`"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        drop(conn);
        if on_disconnect == "continue" {
            tokio::time::sleep(Duration::from_millis(100)).await;
            gate.notify_one();
        }
        assert_eq!(
            settled(addr, &thread_id, &run_id).await,
            want,
            "{on_disconnect}"
        );
    }
}

/// The `id:` values of the server-sent events in `text`, in order.
fn event_ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|id| id.split_once('-').unwrap().1.parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_resumable_stream_is_resumed_after_its_last_event_id() {
    let gate = Arc::new(Notify::new());
    let addr = serve(Arc::clone(&gate)).await;
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();

    // `runs/stream` of a resumable run, dropped after the `values` event of node `first`.
    let body = json!({"assistant_id": "gate", "input": {}, "stream_mode": ["values", "updates"],
                      "stream_resumable": true});
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let path = format!("/threads/{thread_id}/runs/stream");
    conn.write_all(&request("POST", &path, Some(&body)))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let needle = r#"data: {"bar":["first"]}"#;
    read_until(&mut conn, &mut seen, needle).await;
    // The rest of that event: its id, then the blank line.
    let ended = |seen: &[u8]| {
        let text = String::from_utf8_lossy(seen);
        text.find(needle)
            .is_some_and(|at| text[at..].contains("\n\n"))
    };
    while !ended(&seen) {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    drop(conn);
    let text = String::from_utf8_lossy(&seen).into_owned();
    let marker = "\"run_id\":\"";
    let start = text.find(marker).unwrap() + marker.len();
    let run_id = text[start..start + 36].to_owned();
    // metadata, updates (first), values (first).
    let before = event_ids(&text);
    assert_eq!(before, [1, 2, 3], "{text}");
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .unwrap()
        .to_owned();

    // Reconnect with the last id seen; the run goes on meanwhile.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let join = format!(
        "GET /threads/{thread_id}/runs/{run_id}/stream HTTP/1.1\r\nhost: localhost\r\n\
         connection: close\r\nlast-event-id: {last}\r\n\r\n"
    );
    conn.write_all(join.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    read_until(&mut conn, &mut seen, "HTTP/1.1 200").await;
    gate.notify_one();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut seen))
        .await
        .unwrap()
        .unwrap();
    let rest = String::from_utf8_lossy(&seen).into_owned();
    // The rest only: updates (wait), values (wait), each once.
    assert_eq!(event_ids(&rest), [4, 5], "{rest}");
    assert!(
        rest.contains(r#"data: {"wait":{"bar":["done"]}}"#),
        "{rest}"
    );
    assert!(rest.contains(r#"data: {"bar":["first","done"]}"#), "{rest}");
    assert!(!rest.contains("event: metadata"), "{rest}");
    assert_eq!(settled(addr, &thread_id, &run_id).await, "success");
}

/// A store with faults: a get of key [`PANIC_KEY`] panics (a bug), a put under key
/// [`FAIL_KEY`] fails.
#[derive(Debug, Default)]
struct FaultyStore(stategraph_store::InMemoryStore);

const PANIC_KEY: &str = "9d5ed678-fe57-4cca-b8e4-e4f08e5e6d5c";

#[async_trait::async_trait]
impl stategraph_store::Store for FaultyStore {
    async fn batch(
        &self,
        ops: Vec<stategraph_store::Op>,
    ) -> Result<Vec<stategraph_store::OpResult>, stategraph_store::StoreError> {
        use stategraph_store::Op;
        if ops
            .iter()
            .any(|op| matches!(op, Op::Get(get) if get.key == PANIC_KEY))
        {
            panic!("a bug in the store");
        }
        if ops
            .iter()
            .any(|op| matches!(op, Op::Put(put) if put.key == FAIL_KEY))
        {
            return Err(stategraph_store::StoreError::backend(
                "test",
                "the disk is full",
            ));
        }
        self.0.batch(ops).await
    }

    fn ttl_config(&self) -> &stategraph_store::TtlConfig {
        self.0.ttl_config()
    }

    fn index_config(&self) -> Option<&stategraph_store::IndexConfig> {
        self.0.index_config()
    }

    async fn sweep_ttl(&self) -> Result<usize, stategraph_store::StoreError> {
        self.0.sweep_ttl().await
    }

    fn process_local(&self) -> bool {
        self.0.process_local()
    }
}

/// The status line, headers (lower-cased names) and body of `GET path` with `headers`.
async fn get_raw(addr: SocketAddr, path: &str, headers: &str) -> (String, String, String) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{headers}\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_owned(), headers.to_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_500_with_a_request_id() {
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    g.add_edge(START, "a").add_edge("a", END);
    let server = Server::builder()
        .graph("g", g.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(FaultyStore::default()))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server.serve(listener));

    // Reading thread PANIC_KEY makes the store panic under the handler.
    let path = format!("/threads/{PANIC_KEY}");
    let (status, headers, body) = get_raw(addr, &path, "").await;
    assert!(status.starts_with("HTTP/1.1 500"), "{status}");
    assert!(
        headers.contains("content-type: application/json"),
        "{headers}"
    );
    let body: Json = serde_json::from_str(&body).unwrap();
    let id = body["request_id"].as_str().unwrap();
    assert!(uuid_like(id), "{body}");
    assert!(body["detail"].as_str().unwrap().contains(id), "{body}");
    assert!(
        headers.contains(&format!("x-request-id: {id}")),
        "{headers}"
    );

    // The caller's own request id is the one answered.
    let (status, headers, body) = get_raw(addr, &path, "x-request-id: my-req-42\r\n").await;
    assert!(status.starts_with("HTTP/1.1 500"), "{status}");
    assert!(headers.contains("x-request-id: my-req-42"), "{headers}");
    assert_eq!(
        serde_json::from_str::<Json>(&body).unwrap()["request_id"],
        "my-req-42"
    );

    // The server goes on answering.
    let ok = call(addr, "GET", "/ok", None).await;
    assert_eq!(ok, json!({"ok": true}));
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    assert_eq!(thread["status"], "idle");
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// A layer whose loading of a stored checkpoint panics while `armed` (a bug in a saver, say).
#[derive(Debug, Default)]
struct PanicOnLoad {
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl stategraph_checkpoint::layer::SaverLayer for PanicOnLoad {
    fn load_tuple(
        &self,
        tuple: stategraph_checkpoint::CheckpointTuple,
    ) -> stategraph_checkpoint::Result<stategraph_checkpoint::CheckpointTuple> {
        if self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("the saver broke while loading a checkpoint");
        }
        Ok(tuple)
    }
}

/// A panic in a run's task (here: the checkpointer's, as the run loads its thread) ends the
/// run in `error` with the panic's message, settles its thread in `error`, and leaves the
/// server serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_task_panics_ends_in_error_and_its_thread_settles() {
    use std::sync::atomic::Ordering;
    let layer = PanicOnLoad::default();
    let armed = Arc::clone(&layer.armed);
    let saver = stategraph_checkpoint::layer::Layered::wrap(Arc::new(InMemorySaver::new()), layer);
    let mut g =
        StateGraph::<DynState>::with_schema(Schema::new().reducer("bar", Reducer::append()));
    g.add_node("a", |_s, _c| async {
        Ok(Map::from_iter([("bar", value!(["a"]))]))
    });
    g.add_edge(START, "a").add_edge("a", END);
    let server = Server::builder()
        .graph("g", g.compile().unwrap())
        .checkpointer(Arc::new(saver))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server.serve(listener));
    let thread = call(addr, "POST", "/threads", Some(json!({}))).await;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let wait = format!("/threads/{thread_id}/runs/wait");
    let run = json!({"assistant_id": "g", "input": {"bar": []}});
    let first = call(addr, "POST", &wait, Some(run.clone())).await;
    assert_eq!(first["bar"], json!(["a"]), "{first}");

    armed.store(true, Ordering::SeqCst);
    let broken = call(addr, "POST", &wait, Some(run.clone())).await;
    armed.store(false, Ordering::SeqCst);
    let error = &broken["__error__"];
    assert_eq!(error["error"], "RuntimeError", "{broken}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("the saver broke while loading a checkpoint"),
        "{broken}"
    );
    let runs = call(addr, "GET", &format!("/threads/{thread_id}/runs"), None).await;
    assert_eq!(runs[0]["status"], "error", "{runs}");
    assert_eq!(runs[1]["status"], "success", "{runs}");
    let thread = call(addr, "GET", &format!("/threads/{thread_id}"), None).await;
    assert_eq!(thread["status"], "error", "{thread}");
    assert_eq!(thread["error"], *error, "{thread}");
    // The server goes on: the thread takes the next run.
    let again = call(addr, "POST", &wait, Some(run)).await;
    assert_eq!(again["bar"], json!(["a", "a"]), "{again}");
    let thread = call(addr, "GET", &format!("/threads/{thread_id}"), None).await;
    assert_eq!(thread["status"], "idle", "{thread}");
}

/// The key whose puts [`FaultyStore`] fails (a thread's document that cannot be written, as
/// on a full disk).
const FAIL_KEY: &str = "5b0c1f0e-31a4-4a53-9a52-2f6f3a0c9e11";

/// A run on a new thread whose document cannot be written fails, and leaves no run behind
/// in the queue (the document and the run are written together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_new_thread_cannot_be_stored_leaves_no_run() {
    use stategraph_runs::{InMemoryRunQueue, RunQuery, RunQueue};
    let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    g.add_edge(START, "a").add_edge("a", END);
    let queue = Arc::new(InMemoryRunQueue::new());
    let server = Server::builder()
        .graph("g", g.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(FaultyStore::default()))
        .run_queue_arc(Arc::clone(&queue) as Arc<dyn RunQueue>)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server.serve(listener));

    for (path, follow) in [("runs/wait", "waited"), ("runs", "background")] {
        let body = json!({"assistant_id": "g", "input": {"foo": "x"}, "if_not_exists": "create"})
            .to_string();
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "POST /threads/{FAIL_KEY}/{path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 500"), "{follow}: {text}");
        let runs = queue.list(&RunQuery::thread(FAIL_KEY)).await.unwrap();
        assert!(runs.is_empty(), "{follow}: {runs:?}");
    }
}
