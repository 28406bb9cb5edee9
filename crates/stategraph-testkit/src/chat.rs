//! A chat-completions server on loopback that answers in OpenAI's documented wire format
//! what the test tells it to — text, tool calls (several at once too), streamed as
//! `chat.completion.chunk` server-sent events with tool-call argument deltas, token usage —
//! or fails as told (an error status with `retry-after`, a stream that breaks, silence). For
//! the agent flows that need a model to call a tool on cue; the client's tests against a
//! real model run on `llama-server` (`scripts/llm-server.sh`).
//!
//! It is not a model: each request is handed to the test's responder, which decides the
//! answer (typically from the last message: call a tool after a user's message, answer in
//! text after the tool's).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value as Json, json};
use tokio::task::JoinHandle;

/// One tool call of a scripted answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (sent as JSON text, streamed in fragments).
    pub args: Json,
}

impl Call {
    /// A call of `name` with `args`, id `id`.
    pub fn new(id: &str, name: &str, args: Json) -> Self {
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            args,
        }
    }
}

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// An assistant message: text and tool calls.
    Reply {
        /// The text (may be empty).
        text: String,
        /// The tool calls.
        calls: Vec<Call>,
    },
    /// An error status with OpenAI's error body, and `retry-after-ms` if given.
    Status {
        /// The HTTP status.
        code: u16,
        /// `error.message`.
        message: String,
        /// `retry-after-ms`.
        retry_after_ms: Option<u64>,
    },
    /// A streamed reply whose connection is cut after this many events.
    BrokenStream {
        /// The reply that starts streaming.
        text: String,
        /// Events sent before the cut.
        after: usize,
    },
    /// Streams the first event of a reply, then says nothing for this long.
    Stall(Duration),
}

impl Answer {
    /// A text answer.
    pub fn text(text: &str) -> Self {
        Answer::Reply {
            text: text.to_owned(),
            calls: Vec::new(),
        }
    }

    /// An answer calling tools.
    pub fn calls(calls: Vec<Call>) -> Self {
        Answer::Reply {
            text: String::new(),
            calls,
        }
    }
}

type Responder = Arc<dyn Fn(&Json) -> Answer + Send + Sync>;

#[derive(Clone)]
struct Shared {
    responder: Responder,
    requests: Arc<Mutex<Vec<Json>>>,
}

/// The server; stops when dropped.
pub struct ChatServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Json>>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ChatServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl ChatServer {
    /// Starts on a free loopback port; `responder` decides each answer from the request's
    /// JSON body.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[allow(clippy::expect_used)] // test support: failing to bind fails the test
    pub async fn start(responder: impl Fn(&Json) -> Answer + Send + Sync + 'static) -> Self {
        let shared = Shared {
            responder: Arc::new(responder),
            requests: Arc::default(),
        };
        let requests = Arc::clone(&shared.requests);
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            requests,
            task,
        }
    }

    /// The base URL clients use (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request bodies received so far, in order.
    pub fn requests(&self) -> Vec<Json> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The role of a request's last message (`user`, `tool`, …).
pub fn last_role(request: &Json) -> &str {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["role"].as_str())
        .unwrap_or_default()
}

async fn complete(State(shared): State<Shared>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Json>(&body) else {
        return error(400, "the body is not JSON", None);
    };
    shared
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(request.clone());
    let stream = request["stream"].as_bool().unwrap_or(false);
    let usage = request["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false);
    let model = request["model"].as_str().unwrap_or("replay").to_owned();
    match (shared.responder)(&request) {
        Answer::Status {
            code,
            message,
            retry_after_ms,
        } => error(code, &message, retry_after_ms),
        Answer::Reply { text, calls } if !stream => {
            Json_(completion(&model, &text, &calls)).into_response()
        }
        Answer::Reply { text, calls } => sse(events(&model, &text, &calls, usage), None, None),
        Answer::BrokenStream { text, after } => {
            sse(events(&model, &text, &[], usage), Some(after), None)
        }
        Answer::Stall(d) => sse(events(&model, "stalled", &[], usage), Some(1), Some(d)),
    }
}

struct Json_(Json);

impl IntoResponse for Json_ {
    fn into_response(self) -> Response {
        let mut r = Response::new(Body::from(self.0.to_string()));
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

fn error(code: u16, message: &str, retry_after_ms: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": "replay_error", "code": code}});
    let mut r = (status, Json_(body).into_response()).into_response();
    if let Some(ms) = retry_after_ms
        && let Ok(v) = HeaderValue::from_str(&ms.to_string())
    {
        r.headers_mut().insert("retry-after-ms", v);
    }
    r
}

fn usage(text: &str, calls: &[Call]) -> Json {
    let completion = text.split_whitespace().count() + calls.len() * 5;
    json!({"prompt_tokens": 12, "completion_tokens": completion, "total_tokens": 12 + completion})
}

fn completion(model: &str, text: &str, calls: &[Call]) -> Json {
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Json::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args.to_string()}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-replay", "object": "chat.completion", "created": 1_700_000_000,
        "model": model, "system_fingerprint": "fp_replay",
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": usage(text, calls),
    })
}

/// The `data:` payloads of a streamed answer, as OpenAI streams them.
fn events(model: &str, text: &str, calls: &[Call], with_usage: bool) -> Vec<String> {
    let chunk = |delta: Json, finish: Json| {
        let mut c = json!({
            "id": "chatcmpl-replay", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "system_fingerprint": "fp_replay",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if with_usage {
            c["usage"] = Json::Null;
        }
        c.to_string()
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Json::Null,
    )];
    // Text in small pieces (a word and its space each).
    let mut piece = String::new();
    for ch in text.chars() {
        piece.push(ch);
        if ch == ' ' {
            out.push(chunk(json!({"content": piece}), Json::Null));
            piece.clear();
        }
    }
    if !piece.is_empty() {
        out.push(chunk(json!({"content": piece}), Json::Null));
    }
    for (i, c) in calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": ""}}]}),
            Json::Null,
        ));
        // The arguments' JSON text in fragments of 7 bytes (at char boundaries).
        let args = c.args.to_string();
        let mut frag = String::new();
        for ch in args.chars() {
            frag.push(ch);
            if frag.len() >= 7 {
                out.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}),
                    Json::Null,
                ));
                frag.clear();
            }
        }
        if !frag.is_empty() {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}),
                Json::Null,
            ));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(chunk(json!({}), json!(finish)));
    if with_usage {
        out.push(
            json!({"id": "chatcmpl-replay", "object": "chat.completion.chunk",
                   "created": 1_700_000_000, "model": model, "choices": [],
                   "usage": usage(text, calls)})
            .to_string(),
        );
    }
    out.push("[DONE]".to_owned());
    out
}

fn sse(events: Vec<String>, cut_after: Option<usize>, stall: Option<Duration>) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(16);
    tokio::spawn(async move {
        for (i, e) in events.into_iter().enumerate() {
            if cut_after.is_some_and(|n| i >= n) {
                if let Some(d) = stall {
                    tokio::time::sleep(d).await;
                }
                // Ending the body with an error cuts the connection mid-stream.
                let _ = tx.send(Err(std::io::Error::other("cut by the test"))).await;
                return;
            }
            if tx.send(Ok(format!("data: {e}\n\n"))).await.is_err() {
                return;
            }
        }
    });
    let body = Body::from_stream(tokio_stream(rx));
    let mut r = Response::new(body);
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::Receiver<Result<String, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<String, std::io::Error>> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
