//! The built-in middleware and structured output of `create_agent`, on scripted models: a
//! malformed structured answer retried with LangChain's text, the call limits' texts and
//! jumps, retries that give up with LangChain's message, context editing that changes what
//! the model is sent but not the state — and a model fallback from a provider that is down to
//! another provider's wire format (Anthropic Messages on the real llama-server).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph_agent::agent::{AgentUpdate, ToolStrategy, create_agent};
use stategraph_agent::middleware::{
    Backoff, ClearToolUsesEdit, ContextEditingMiddleware, ExitBehavior, ModelCallLimitMiddleware,
    ModelFallbackMiddleware, ModelRetryMiddleware, ToolCallLimitMiddleware,
};
use stategraph_agent::{
    AnthropicConfig, ChatModel, ChatRequest, ChunkStream, Error, OpenAiConfig, Tool, tool,
};
use stategraph_checkpoint::{InMemorySaver, value};
use stategraph_graph::RunConfig;
use stategraph_messages::{Message, ToolCall};

/// Answers its i-th call with the i-th answer (the last one after that), recording every
/// request; an `Err` answer is a failed call.
#[derive(Debug)]
struct Scripted {
    answers: Vec<Result<Message, String>>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(answers: Vec<Result<Message, String>>) -> Arc<Self> {
        Arc::new(Self {
            answers,
            seen: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl ChatModel for Scripted {
    async fn invoke(&self, request: &ChatRequest) -> Result<Message, Error> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(request.clone());
        let i = (seen.len() - 1).min(self.answers.len() - 1);
        self.answers[i].clone().map_err(Error::InvalidRequest)
    }
    async fn stream(&self, _: &ChatRequest) -> Result<ChunkStream, Error> {
        Err(Error::InvalidRequest("not streamed".into()))
    }
}

fn call(name: &str, args: serde_json::Value, id: &str) -> Message {
    Message::ai(
        "",
        vec![ToolCall {
            name: name.into(),
            args: stategraph_checkpoint::Value::from(args),
            id: Some(id.into()),
        }],
    )
}

fn ask(text: &str) -> AgentUpdate {
    AgentUpdate::new().messages([Message::human(text)])
}

/// A city's weather report.
#[derive(Debug, Deserialize, JsonSchema)]
struct Weather {
    city: String,
    degrees: i64,
}

#[tokio::test]
async fn a_malformed_structured_answer_is_retried_with_langchains_text() {
    let model = Scripted::new(vec![
        Ok(call("Weather", serde_json::json!({"city": "Paris"}), "c1")),
        Ok(call(
            "Weather",
            serde_json::json!({"city": "Paris", "degrees": 21}),
            "c2",
        )),
    ]);
    let agent = create_agent(Arc::clone(&model), [])
        .response_format(ToolStrategy::of::<Weather>())
        .build()
        .unwrap();
    let state = agent
        .invoke(ask("Weather in Paris?"), RunConfig::default())
        .await
        .unwrap();
    let weather: Weather = state.structured().unwrap().unwrap();
    assert_eq!((weather.city.as_str(), weather.degrees), ("Paris", 21));
    // human, bad call, its error, good call, its answer.
    assert_eq!(state.messages.len(), 5);
    let error = state.messages[2].text().unwrap();
    assert!(
        error.starts_with("Error: Failed to parse structured output for tool 'Weather': Failed to parse data to Weather: missing field `degrees`"),
        "{error}"
    );
    assert!(error.ends_with("\n Please fix your mistakes."), "{error}");
    assert_eq!(
        state.messages[4].text(),
        Some("Returning structured response: {'city': 'Paris', 'degrees': 21}")
    );
    // The structured tool was offered, and the model had to call a tool.
    let first = &model.seen.lock().unwrap()[0];
    assert_eq!(first.tools[0].name, "Weather");
    assert_eq!(
        first.tool_choice,
        Some(stategraph_agent::ToolChoice::Required)
    );
}

#[derive(Deserialize, JsonSchema)]
struct Query {
    q: String,
}

fn search() -> Arc<dyn Tool> {
    Arc::new(tool("search", "Searches.", |a: Query, _ctx| async move {
        Ok::<_, std::convert::Infallible>(format!("found {}", a.q))
    }))
}

#[tokio::test]
async fn the_call_limits_end_the_run_with_langchains_texts() {
    // Every answer calls `search`; the model may be called twice a run.
    let model = Scripted::new(vec![Ok(call("search", serde_json::json!({"q": "x"}), "c"))]);
    let agent = create_agent(model, [search()])
        .middleware(ModelCallLimitMiddleware::new().run_limit(2))
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let state = agent
        .invoke(ask("go"), RunConfig::thread("m"))
        .await
        .unwrap();
    assert_eq!(
        state.messages.last().unwrap().text(),
        Some("Model call limits exceeded: run limit (2/2)")
    );
    // The run's count is not checkpointed: the next run may call the model again.
    let snapshot = agent.get_state(&RunConfig::thread("m")).await.unwrap();
    assert!(snapshot.values.contains_key("thread_model_call_count"));
    assert!(!snapshot.values.contains_key("run_model_call_count"));

    let model = Scripted::new(vec![Ok(call("search", serde_json::json!({"q": "x"}), "c"))]);
    let agent = create_agent(model, [search()])
        .middleware(
            ToolCallLimitMiddleware::for_tool("search")
                .run_limit(1)
                .exit_behavior(ExitBehavior::End),
        )
        .build()
        .unwrap();
    let state = agent.invoke(ask("go"), RunConfig::default()).await.unwrap();
    let texts: Vec<&str> = state.messages.iter().filter_map(Message::text).collect();
    assert_eq!(
        texts[texts.len() - 2..],
        [
            "Tool call limit exceeded. Do not call 'search' again.",
            "'search' tool call limit reached: run limit exceeded (2/1 calls)."
        ]
    );
}

#[tokio::test]
async fn a_model_that_keeps_failing_is_answered_for() {
    let model = Scripted::new(vec![Err("boom".into())]);
    let agent = create_agent(Arc::clone(&model), [])
        .middleware(ModelRetryMiddleware::new().max_retries(2).backoff(Backoff {
            initial: std::time::Duration::from_millis(1),
            factor: 2.0,
            max: std::time::Duration::from_millis(5),
            jitter: false,
        }))
        .build()
        .unwrap();
    let state = agent.invoke(ask("hi"), RunConfig::default()).await.unwrap();
    assert_eq!(model.seen.lock().unwrap().len(), 3);
    assert_eq!(
        state.messages.last().unwrap().text(),
        Some("Model call failed after 3 attempts with Error: invalid request: boom")
    );
}

#[tokio::test]
async fn context_editing_clears_old_tool_results_in_what_the_model_is_sent_only() {
    let model = Scripted::new(vec![
        Ok(call("search", serde_json::json!({"q": "a"}), "c1")),
        Ok(call("search", serde_json::json!({"q": "b"}), "c2")),
        Ok(Message::ai("done", Vec::new())),
    ]);
    let agent = create_agent(Arc::clone(&model), [search()])
        .middleware(ContextEditingMiddleware::new().edits([ClearToolUsesEdit {
            trigger: 0,
            keep: 1,
            ..ClearToolUsesEdit::default()
        }]))
        .build()
        .unwrap();
    let state = agent.invoke(ask("go"), RunConfig::default()).await.unwrap();
    // The state keeps every result …
    assert_eq!(state.messages[2].text(), Some("found a"));
    // … the model's last request had the older one cleared.
    let last = model.seen.lock().unwrap().last().unwrap().clone();
    let tools: Vec<&str> = last
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .filter_map(Message::text)
        .collect();
    assert_eq!(tools, ["[cleared]", "found b"]);
}

#[tokio::test]
async fn a_model_that_is_down_falls_back_to_another_providers_wire_format() {
    // Nothing listens on port 9 (discard): the OpenAI-format model fails to connect.
    let down = OpenAiConfig::new("down")
        .base_url("http://127.0.0.1:9/v1")
        .max_retries(0)
        .build()
        .unwrap();
    // The fallback speaks Anthropic's Messages API to the real llama-server.
    let anthropic = AnthropicConfig::new("smollm2")
        .base_url(stategraph_testkit::services::llm_url())
        .temperature(0.0)
        .max_tokens(16)
        .max_retries(0)
        .build()
        .unwrap();
    let agent = create_agent(down, [])
        .middleware(ModelFallbackMiddleware::new(anthropic))
        .build()
        .unwrap();
    let state = agent
        .invoke(ask("What is the capital of France?"), RunConfig::default())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the fallback answers (llama-server at {}; scripts/llm-server.sh start): {e}",
                stategraph_testkit::services::llm_url()
            )
        });
    let Some(Message::Ai { fields, .. }) = state.messages.last() else {
        panic!("{:?}", state.messages)
    };
    assert_eq!(
        fields.response_metadata.get("model_provider"),
        Some(&value!("anthropic")),
        "{fields:?}"
    );
}
