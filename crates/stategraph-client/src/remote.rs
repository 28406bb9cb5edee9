//! [`RemoteGraph`]: a graph deployed on an Agent Server, used as a graph or as a node of a
//! local graph (LangGraph's `RemoteGraph`).

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Map as JsonMap, Value as Json, json};
use stategraph_checkpoint::Value;
use stategraph_graph::stream::values_json;
use stategraph_graph::{NodeContext, NodeError, NodeFuture, NodeOutput, State, StreamMode};

use crate::client::{Client, RunEvents};
use crate::error::{ClientError, Result};
use crate::types::{RemoteInterrupt, RunRequest, StreamPart, ThreadState};

/// What a remote run ended on: its last values and the interrupts it stopped on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoteOutput {
    /// The last `values` event (the state, or an entrypoint's output).
    pub values: Json,
    /// The interrupts the run stopped on (empty when it finished).
    pub interrupts: Vec<RemoteInterrupt>,
}

/// A graph (an assistant, or a graph id for its default assistant) of an Agent Server —
/// stategraph's or LangGraph's — run as if it were local: [`invoke`](Self::invoke),
/// [`stream`](Self::stream), its threads' [state](Self::get_state), and as a node of a
/// local graph ([`node`](Self::node)).
///
/// A run on a thread creates the thread on the server if it does not exist (as Python's
/// `RemoteGraph`, `if_not_exists: "create"`).
///
/// ```no_run
/// # async fn demo() -> stategraph_client::Result<()> {
/// use serde_json::json;
/// use stategraph_client::{Client, RemoteGraph};
///
/// let remote = RemoteGraph::new("chat", Client::new("http://127.0.0.1:2024")?);
/// let out = remote.invoke(json!({"messages": [{"type": "human", "content": "hi"}]}), Some("t1")).await?;
/// if let Some(ask) = out.interrupts.first() {
///     println!("the graph asks {}", ask.value);
///     let out = remote.resume(json!("yes"), "t1").await?;
///     println!("{}", out.values);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RemoteGraph {
    client: Client,
    assistant_id: Arc<str>,
}

impl RemoteGraph {
    /// The graph `assistant_id` (an assistant's id, or a graph id) of `client`'s server.
    pub fn new(assistant_id: impl Into<String>, client: Client) -> Self {
        Self {
            client,
            assistant_id: Arc::from(assistant_id.into()),
        }
    }

    /// The assistant it runs.
    pub fn assistant_id(&self) -> &str {
        &self.assistant_id
    }

    /// Its server's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A run of it on `input` (new input) or `command` (`{"resume": …}`, …), streaming
    /// `modes`: the request the Python `RemoteGraph` sends.
    pub fn request(
        &self,
        input: Option<Json>,
        command: Option<Json>,
        modes: &[&str],
    ) -> RunRequest {
        let mut run = RunRequest {
            assistant_id: self.assistant_id.to_string(),
            input,
            command,
            ..RunRequest::default()
        }
        .stream_modes(modes.iter().copied());
        run.if_not_exists = Some("create".into());
        run
    }

    /// Streams a run on `input` (on thread `thread_id`, or without a thread), in `modes`
    /// (`values`, `updates`, `messages-tuple`, `custom`, `events`, …).
    pub fn stream(&self, input: Json, thread_id: Option<&str>, modes: &[&str]) -> RunEvents {
        let run = self.request(Some(input), None, modes);
        self.client.stream_run(thread_id, &run)
    }

    /// Runs on `input` to its end: the last values, and the interrupts it stopped on.
    pub async fn invoke(&self, input: Json, thread_id: Option<&str>) -> Result<RemoteOutput> {
        let run = self.request(Some(input), None, &["values", "updates"]);
        collect(self.client.stream_run(thread_id, &run), None).await
    }

    /// Answers the interrupt thread `thread_id` waits on with `answer` (or, given a map
    /// of interrupt ids to answers, each by id) and runs on to the end.
    pub async fn resume(&self, answer: Json, thread_id: &str) -> Result<RemoteOutput> {
        let run = self.request(
            None,
            Some(json!({ "resume": answer })),
            &["values", "updates"],
        );
        collect(self.client.stream_run(Some(thread_id), &run), None).await
    }

    /// The latest state of its thread `thread_id`.
    pub async fn get_state(&self, thread_id: &str) -> Result<ThreadState> {
        self.client.thread_state(thread_id).await
    }

    /// The states of its thread `thread_id`, newest first (at most `limit`).
    pub async fn get_state_history(
        &self,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<ThreadState>> {
        self.client.thread_history(thread_id, limit).await
    }

    /// Writes `values` to thread `thread_id` as node `as_node` (if given) would.
    pub async fn update_state(
        &self,
        thread_id: &str,
        values: Json,
        as_node: Option<&str>,
    ) -> Result<Json> {
        self.client
            .update_thread_state(thread_id, values, as_node)
            .await
    }

    /// The graph as a node of a local graph: `graph.add_node("remote", remote.node())`.
    ///
    /// The node sends its state to the remote graph, on the local run's thread id (the
    /// remote thread is created if missing; without a thread the run is stateless), and
    /// returns the remote's final values as its writes (keys the local state lacks are
    /// ignored). When the remote run stops on interrupts, the local run stops on them too —
    /// same values, same ids. Resuming the local run answers them: the node then sends the
    /// answers to the remote thread as `{"resume": …}` instead of its state again, and the
    /// remote graph goes on from where it stopped. (Python LangGraph 1.2's `RemoteGraph`
    /// sends the state again, and the remote graph asks again.)
    pub fn node<S: State>(
        &self,
    ) -> impl Fn(Arc<S>, NodeContext) -> NodeFuture<S::Update> + Send + Sync + 'static {
        let remote = self.clone();
        move |_state: Arc<S>, ctx: NodeContext| {
            let remote = remote.clone();
            Box::pin(async move { remote.run_as_node(&ctx).await })
        }
    }

    async fn run_as_node<U>(
        &self,
        ctx: &NodeContext,
    ) -> std::result::Result<NodeOutput<U>, NodeError> {
        let thread = ctx.thread_id().map(str::to_owned);
        // A resumed run answers what the remote thread waits on, if it waits.
        let mut command = None;
        if ctx.is_resuming()
            && let Some(thread) = &thread
        {
            let waiting = self.client.thread_state(thread).await.map_err(failed)?;
            let pending = waiting.interrupts();
            if !pending.is_empty() {
                command = Some(answers(ctx, &pending)?);
            }
        }
        let mut input = match command {
            Some(_) => None,
            None => Some(values_json(ctx.input_values())),
        };
        // The local run's subgraph events: the remote's are passed on (with subgraphs').
        let forward: Vec<StreamMode> = ctx
            .subgraph_modes()
            .into_iter()
            .filter(|m| crate::forward::FORWARDED.contains(m))
            .collect();
        let mut modes = vec!["values", "updates"];
        for m in &forward {
            let name = match m {
                StreamMode::Messages => "messages-tuple",
                other => other.as_str(),
            };
            if !modes.contains(&name) {
                modes.push(name);
            }
        }
        loop {
            let mut run = self.request(input.take(), command.take(), &modes);
            run.stream_subgraphs = !forward.is_empty();
            let events = self.client.stream_run(thread.as_deref(), &run);
            let out = collect(events, Some((ctx, &forward)))
                .await
                .map_err(failed)?;
            if out.interrupts.is_empty() {
                let writes = match out.values {
                    Json::Object(values) => values
                        .into_iter()
                        .map(|(k, v)| (k, Value::from(v)))
                        .collect(),
                    _ => Vec::new(),
                };
                return Ok(NodeOutput::Writes(writes));
            }
            // Stops the local run on them, unless an answer is already at hand.
            command = Some(answers(ctx, &out.interrupts)?);
        }
    }
}

/// The answers to `pending` the local run has (asking each as an interrupt with its remote
/// id), as a remote command: one answer as it is, several by interrupt id.
fn answers(ctx: &NodeContext, pending: &[RemoteInterrupt]) -> std::result::Result<Json, NodeError> {
    let mut by_id = JsonMap::new();
    for i in pending {
        let answer = ctx.interrupt_with_id(Value::from(i.value.clone()), i.id.clone())?;
        by_id.insert(i.id.clone(), answer.to_json());
    }
    Ok(match by_id.len() {
        1 => json!({ "resume": by_id.into_iter().next().map(|(_, v)| v) }),
        _ => json!({ "resume": by_id }),
    })
}

/// A client error as the node's failure (`ClientError('…')`, its source kept).
fn failed(e: ClientError) -> NodeError {
    NodeError::from(e)
}

/// Reads a run's events to the end: its last `values` and the interrupts its `updates`
/// reported; each event of the `forward` modes is passed on to the node's run as a
/// subgraph event.
async fn collect(
    mut events: RunEvents,
    forward: Option<(&NodeContext, &[StreamMode])>,
) -> Result<RemoteOutput> {
    let mut out = RemoteOutput::default();
    while let Some(part) = events.next().await {
        let part: StreamPart = part?;
        if let Some((ctx, modes)) = forward
            && let Some(event) = crate::forward::event(&part, modes)
        {
            ctx.send_subgraph_event(&part.namespace(), event).await;
        }
        if !part.namespace().is_empty() {
            continue;
        }
        match part.mode() {
            "values" => out.values = part.data,
            "updates" => out.interrupts.extend(part.interrupts()),
            _ => {}
        }
    }
    // A values event may carry the interrupts too (LangGraph 1.2); they are reported once.
    if let Json::Object(values) = &mut out.values {
        values.remove("__interrupt__");
    }
    Ok(out)
}
