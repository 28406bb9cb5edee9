//! [`Client`]: the Agent Server API's routes the Python SDK uses, typed.

use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde::de::DeserializeOwned;
use serde_json::{Value as Json, json};
use stategraph_graph::{Topology, Xray};

use crate::error::{ClientError, Result};
use crate::types::{Assistant, RunRequest, StreamPart, Thread, ThreadState};

/// The events of a streamed run, in order; an `error` event ends it as
/// [`ClientError::Run`].
pub type RunEvents = BoxStream<'static, Result<StreamPart>>;

/// A client of one Agent Server (stategraph's or LangGraph's): cheap to clone, its
/// connections shared.
///
/// ```no_run
/// # async fn demo() -> stategraph_client::Result<()> {
/// use futures_util::StreamExt;
/// use serde_json::json;
/// use stategraph_client::{Client, RunRequest};
///
/// let client = Client::new("http://127.0.0.1:2024")?;
/// let thread = client.create_thread(None).await?;
/// let run = RunRequest::input("seed", json!({"foo": "", "bar": []})).stream_modes(["updates"]);
/// let mut events = client.stream_run(Some(&thread.thread_id), &run);
/// while let Some(part) = events.next().await {
///     let part = part?;
///     println!("{}: {}", part.event, part.data);
/// }
/// println!("{:?}", client.thread_state(&thread.thread_id).await?.values);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    api_key: Option<Arc<str>>,
}

impl Client {
    /// A client of the server at `url` (`http://…` or `https://…`).
    pub fn new(url: impl Into<String>) -> Result<Self> {
        let url = url.into();
        let base = url.trim_end_matches('/');
        let bad = |problem: &str| ClientError::Url {
            url: url.clone(),
            problem: problem.to_owned(),
        };
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
            .ok_or_else(|| bad("it must start with http:// or https://"))?;
        if rest.is_empty() {
            return Err(bad("it names no host"));
        }
        Ok(Self {
            http: reqwest::Client::new(),
            base: Arc::from(base),
            api_key: None,
        })
    }

    /// The same client, sending `key` in header `x-api-key` (as the SDKs do).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Arc::from(key.into()));
        self
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// `GET /assistants/{id}`: an assistant, by its id or a graph id.
    pub async fn assistant(&self, assistant_id: &str) -> Result<Assistant> {
        self.get(&format!("/assistants/{assistant_id}"), &[]).await
    }

    /// `GET /assistants/{id}/graph?xray=…`: the drawing of an assistant's graph.
    pub async fn assistant_graph(&self, assistant_id: &str, xray: Xray) -> Result<Topology> {
        let depth;
        let query: &[(&str, &str)] = match xray {
            Xray::Off | Xray::Depth(0) => &[],
            Xray::Depth(n) => {
                depth = n.to_string();
                &[("xray", depth.as_str())]
            }
            Xray::All => &[("xray", "true")],
        };
        let path = format!("/assistants/{assistant_id}/graph");
        let json: Json = self.get(&path, query).await?;
        Topology::from_json(&json).map_err(|e| ClientError::Decode {
            url: self.url_of(&path),
            at: e.at.clone(),
            problem: e.problem.clone(),
        })
    }

    /// `POST /threads`: a new thread (with id `thread_id`, if given; an existing one is
    /// returned as it is).
    pub async fn create_thread(&self, thread_id: Option<&str>) -> Result<Thread> {
        let mut body = json!({ "if_exists": "do_nothing" });
        if let Some(id) = thread_id {
            body["thread_id"] = json!(id);
        }
        self.post("/threads", &body).await
    }

    /// `GET /threads/{id}/state`: the thread's latest state.
    pub async fn thread_state(&self, thread_id: &str) -> Result<ThreadState> {
        self.get(&format!("/threads/{thread_id}/state"), &[]).await
    }

    /// `POST /threads/{id}/history`: its states, newest first (at most `limit`).
    pub async fn thread_history(&self, thread_id: &str, limit: usize) -> Result<Vec<ThreadState>> {
        let body = json!({ "limit": limit });
        self.post(&format!("/threads/{thread_id}/history"), &body)
            .await
    }

    /// `POST /threads/{id}/state`: writes `values` as if node `as_node` (if given) had
    /// returned them; the new checkpoint's address.
    pub async fn update_thread_state(
        &self,
        thread_id: &str,
        values: Json,
        as_node: Option<&str>,
    ) -> Result<Json> {
        let mut body = json!({ "values": values });
        if let Some(node) = as_node {
            body["as_node"] = json!(node);
        }
        self.post(&format!("/threads/{thread_id}/state"), &body)
            .await
    }

    /// `POST /threads/{id}/runs/wait` (or `/runs/wait` without a thread): runs and returns
    /// the final values (with `__interrupt__` when it stopped on interrupts).
    pub async fn wait_run(&self, thread_id: Option<&str>, run: &RunRequest) -> Result<Json> {
        let path = match thread_id {
            Some(t) => format!("/threads/{t}/runs/wait"),
            None => "/runs/wait".to_owned(),
        };
        let body = serde_json::to_value(run).map_err(|e| self.decode(&path, "request", e))?;
        self.post(&path, &body).await
    }

    /// `POST /threads/{id}/runs/stream` (or `/runs/stream` without a thread): the run's
    /// server-sent events as they come. The request is sent when the stream is first read.
    pub fn stream_run(&self, thread_id: Option<&str>, run: &RunRequest) -> RunEvents {
        let path = match thread_id {
            Some(t) => format!("/threads/{t}/runs/stream"),
            None => "/runs/stream".to_owned(),
        };
        let url = self.url_of(&path);
        let request = self.request(reqwest::Method::POST, &path).json(run);
        crate::sse::events(request, url)
    }

    fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, self.url_of(path));
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key.as_ref());
        }
        request
    }

    fn decode(&self, path: &str, at: &str, e: impl std::fmt::Display) -> ClientError {
        ClientError::Decode {
            url: self.url_of(path),
            at: at.to_owned(),
            problem: e.to_string(),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, &str)]) -> Result<T> {
        let request = self.request(reqwest::Method::GET, path).query(query);
        self.send("GET", path, request).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &Json) -> Result<T> {
        let request = self.request(reqwest::Method::POST, path).json(body);
        self.send("POST", path, request).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<T> {
        let url = self.url_of(path);
        let response = crate::sse::checked(method, &url, request).await?;
        let body = response
            .bytes()
            .await
            .map_err(|e| crate::sse::connect_error(method, &url, &e))?;
        serde_json::from_slice(&body).map_err(|e| {
            let at = format!("line {} column {}", e.line(), e.column());
            self.decode(path, &at, e)
        })
    }
}

/// The stream of a run that could not be sent: its one error.
pub(crate) fn failed(error: ClientError) -> RunEvents {
    futures_util::stream::once(async move { Err(error) }).boxed()
}
