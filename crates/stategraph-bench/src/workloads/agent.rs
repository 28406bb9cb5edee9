//! `create_agent_20x`: LangChain's `create_agent` with three middleware (model and tool call
//! limits that never trigger, and a summarization whose token trigger never fires but counts
//! the conversation before every model call), a scripted in-process model that asks for n
//! tool calls (each with a ~3.6 KB query) and then answers, and one tool. What an agent turn
//! costs beyond the model and the tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph::agent::agent::{AgentUpdate, create_agent};
use stategraph::agent::middleware::{
    ContextSize, ModelCallLimitMiddleware, SummarizationMiddleware, ToolCallLimitMiddleware,
};
use stategraph::agent::{
    ChatModel, ChatRequest, ChunkStream, Error as AgentError, Tool, ToolContext, ToolOutput,
};
use stategraph::{Message, ToolCall, Value, uuid4};

use super::{attach, failed, fresh_config, unexpected};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

/// Answers its i-th call with the i-th scripted message, starting over after the last.
#[derive(Debug)]
struct Scripted {
    responses: Vec<Message>,
    next: AtomicUsize,
}

#[async_trait::async_trait]
impl ChatModel for Scripted {
    async fn invoke(&self, _request: &ChatRequest) -> Result<Message, AgentError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.responses.len();
        Ok(self.responses[i].clone())
    }

    async fn stream(&self, _request: &ChatRequest) -> Result<ChunkStream, AgentError> {
        Err(AgentError::InvalidRequest(
            "the scripted model is not streamed".into(),
        ))
    }
}

/// `search`: "result for query: {query}" ten times.
struct Search;

#[async_trait::async_trait]
impl Tool for Search {
    fn name(&self) -> &str {
        "search"
    }
    fn description(&self) -> &str {
        ""
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<ToolOutput, AgentError> {
        let query = args
            .as_map()
            .and_then(|a| a.get("query"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(ToolOutput::text(
            format!("result for query: {query}").repeat(10),
        ))
    }
}

/// `create_agent_20x`.
pub(super) struct CreateAgent;

#[async_trait::async_trait]
impl Workload for CreateAgent {
    fn spec(&self) -> Spec {
        Spec::new("create_agent_20x", 20, 5, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let responses: Vec<Message> = (0..n)
            .map(|_| {
                let call = ToolCall {
                    name: "search".into(),
                    args: Value::Map(stategraph::Map::from_iter([("query", uuid4().repeat(100))])),
                    id: Some(uuid4()),
                };
                Message::ai("", vec![call]).with_id(uuid4())
            })
            .chain([Message::ai("answer".repeat(100), Vec::new()).with_id(uuid4())])
            .collect();
        let model = Arc::new(Scripted {
            responses,
            next: AtomicUsize::new(0),
        });
        let never = 1_000_000_000;
        let agent = create_agent(Arc::clone(&model), [Arc::new(Search) as Arc<dyn Tool>])
            .middleware(ModelCallLimitMiddleware::new().thread_limit(never))
            .middleware(ToolCallLimitMiddleware::new().thread_limit(never))
            .middleware(
                SummarizationMiddleware::new(model).trigger(ContextSize::Tokens(1_000_000_000)),
            )
            .build()
            .map_err(failed("create_agent_20x"))?;
        let graph = Arc::new(attach(agent, backend));
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            async move {
                let input = AgentUpdate::new().messages([Message::human("hi?")]);
                let out = graph
                    .invoke(input, fresh_config(backend))
                    .await
                    .map_err(failed("create_agent_20x"))?;
                match out.messages.len() {
                    len if len == 2 * n + 2 => Ok(()),
                    len => Err(unexpected(
                        "create_agent_20x",
                        format!("{len} messages, not {}", 2 * n + 2),
                    )),
                }
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            ..Measurement::default()
        })
    }
}
