//! The ReAct agent, the tool node and the client's failure handling, against a
//! chat-completions server on loopback that answers in OpenAI's wire format what each test
//! scripts (`stategraph_testkit::chat`): a model that calls a tool on cue. The client
//! against a real model is in `openai_llama.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use stategraph_agent::{
    AgentVersion, ChatModel, ChatOpenAi, ChatRequest, Error, MessagesState, MessagesUpdate,
    OpenAiConfig, Tool, ToolErrors, ToolNode, create_react_agent, tool,
};
use stategraph_checkpoint::{InMemorySaver, Value};
use stategraph_graph::stream::StreamEvent;
use stategraph_graph::{CompiledGraph, RunConfig, StreamMode};
use stategraph_messages::Message;
use stategraph_testkit::chat::{Answer, Call, ChatServer, last_role};
use stategraph_testkit::net::bounded;

/// A city.
#[derive(Deserialize, JsonSchema)]
struct City {
    /// Its name.
    city: String,
}

fn weather() -> Arc<dyn Tool> {
    Arc::new(tool(
        "get_weather",
        "Today's weather in a city.",
        |c: City, _ctx| async move { Ok::<_, std::convert::Infallible>(format!("Sunny in {}", c.city)) },
    ))
}

fn model(server: &ChatServer) -> ChatOpenAi {
    OpenAiConfig::new("replay")
        .base_url(server.base_url())
        .api_key("test-key")
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .build()
        .unwrap()
}

/// A model that calls `get_weather` for Paris after the user speaks and answers with the
/// tool's words after the tool does.
async fn weather_model() -> ChatServer {
    ChatServer::start(|r| {
        if last_role(r) == "tool" {
            let said = r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned();
            Answer::text(&format!("The tool says: {said}."))
        } else {
            Answer::calls(vec![Call::new(
                "call_1",
                "get_weather",
                json!({"city": "Paris"}),
            )])
        }
    })
    .await
}

fn agent(server: &ChatServer) -> CompiledGraph<MessagesState> {
    create_react_agent(model(server), [weather()])
        .prompt("You answer weather questions.")
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap()
}

fn ask(text: &str) -> MessagesUpdate {
    MessagesUpdate::messages([Message::human(text)])
}

#[tokio::test]
async fn the_agent_calls_the_tool_then_answers() {
    let server = weather_model().await;
    let agent = agent(&server);
    let out = agent
        .invoke(ask("Weather in Paris?"), RunConfig::thread("t1"))
        .await
        .unwrap();
    let m = &out.messages;
    assert_eq!(m.len(), 4, "{m:#?}");
    let Message::Ai { tool_calls, .. } = &m[1] else {
        panic!("{:?}", m[1])
    };
    assert_eq!(tool_calls[0].name, "get_weather");
    assert_eq!(
        tool_calls[0].args,
        stategraph_checkpoint::value!({"city": "Paris"})
    );
    let Message::Tool {
        fields,
        tool_call_id,
        status,
        ..
    } = &m[2]
    else {
        panic!("{:?}", m[2])
    };
    assert_eq!(fields.name.as_deref(), Some("get_weather"));
    assert_eq!(
        (tool_call_id.as_str(), status.as_str()),
        ("call_1", "success")
    );
    assert_eq!(m[2].text(), Some("Sunny in Paris"));
    assert_eq!(m[3].text(), Some("The tool says: Sunny in Paris."));

    // What the model was sent: the prompt first, the tool's schema, then the tool's answer.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role": "system", "content": "You answer weather questions."})
    );
    assert_eq!(
        requests[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    assert_eq!(
        requests[1]["messages"][3],
        json!({"role": "tool", "content": "Sunny in Paris", "tool_call_id": "call_1", "name": "get_weather"})
    );
    // Not streamed: nobody streamed `messages`.
    assert!(requests.iter().all(|r| r.get("stream").is_none()));

    // The conversation goes on in the same thread.
    let out = agent
        .invoke(ask("And tomorrow?"), RunConfig::thread("t1"))
        .await
        .unwrap();
    assert_eq!(out.messages.len(), 8);
}

#[tokio::test]
async fn approval_stops_before_the_tools_and_resumes() {
    for version in [AgentVersion::V2, AgentVersion::V1] {
        let server = weather_model().await;
        let agent = create_react_agent(model(&server), [weather()])
            .interrupt_before(["tools"])
            .version(version)
            .checkpointer(Arc::new(InMemorySaver::new()))
            .build()
            .unwrap();
        let config = RunConfig::thread("approve");
        let out = agent
            .invoke(ask("Weather in Paris?"), config.clone())
            .await
            .unwrap();
        assert_eq!(
            out.messages.len(),
            2,
            "{version:?}: stopped before the tools"
        );
        let state = agent.get_state(&config).await.unwrap();
        assert_eq!(state.next, ["tools"], "{version:?}");
        let Message::Ai { tool_calls, .. } = out.messages.last().unwrap() else {
            panic!("no AI message")
        };
        assert_eq!(
            tool_calls[0].args,
            stategraph_checkpoint::value!({"city": "Paris"})
        );
        // Approved: carry on from the checkpoint.
        let out = agent.continue_run(config.clone()).await.unwrap();
        assert_eq!(out.messages.len(), 4, "{version:?}");
        assert_eq!(
            out.messages[3].text(),
            Some("The tool says: Sunny in Paris.")
        );
        assert!(agent.get_state(&config).await.unwrap().next.is_empty());
    }
}

#[tokio::test]
async fn a_new_question_instead_of_an_approval_is_refused_as_langgraph_refuses_it() {
    let server = weather_model().await;
    let agent = create_react_agent(model(&server), [weather()])
        .interrupt_before(["tools"])
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let config = RunConfig::thread("x");
    agent
        .invoke(ask("Weather in Paris?"), config.clone())
        .await
        .unwrap();
    let err = agent
        .invoke(ask("Never mind"), config.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("do not have a corresponding ToolMessage"),
        "{err}"
    );
}

#[tokio::test]
async fn parallel_tool_calls_run_at_the_same_time() {
    // Two calls in one answer; each tool waits for the other at a barrier, so the node only
    // finishes if they run concurrently.
    let server = ChatServer::start(|r| {
        if last_role(r) == "tool" {
            Answer::text("done")
        } else {
            Answer::calls(vec![
                Call::new("a", "meet", json!({"city": "Paris"})),
                Call::new("b", "meet", json!({"city": "Rome"})),
            ])
        }
    })
    .await;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet: Arc<dyn Tool> = Arc::new(tool(
        "meet",
        "Meets the other call.",
        move |c: City, _ctx| {
            let barrier = Arc::clone(&barrier);
            async move {
                barrier.wait().await;
                Ok::<_, std::convert::Infallible>(format!("met in {}", c.city))
            }
        },
    ));
    for version in [AgentVersion::V2, AgentVersion::V1] {
        let agent = create_react_agent(model(&server), [Arc::clone(&meet)])
            .version(version)
            .build()
            .unwrap();
        let out = bounded(agent.invoke(ask("go"), RunConfig::default()))
            .await
            .unwrap();
        let tools: Vec<_> = out.messages[2..4]
            .iter()
            .map(|m| m.text().unwrap())
            .collect();
        assert_eq!(tools, ["met in Paris", "met in Rome"], "{version:?}");
    }
}

#[tokio::test]
async fn the_messages_stream_carries_the_models_tokens_once() {
    let server = weather_model().await;
    let agent = agent(&server);
    let mut stream = agent.stream(
        ask("Weather in Paris?"),
        RunConfig::thread("s"),
        &[StreamMode::Messages],
    );
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        let StreamEvent::Messages(m) = e.unwrap() else {
            panic!("only messages were asked for")
        };
        events.push(m);
    }
    // The model streamed (it was asked to), piece by piece.
    assert!(server.requests().iter().all(|r| r["stream"] == json!(true)));
    let node = |e: &stategraph_graph::MessageEvent| {
        e.metadata
            .get("langgraph_node")
            .and_then(Value::as_str)
            .unwrap()
            .to_owned()
    };
    let chunks: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.message, Message::AiChunk(_)))
        .collect();
    let answer: String = chunks
        .iter()
        .filter_map(|e| match &e.message {
            Message::AiChunk(c) => Some(c.text()),
            _ => None,
        })
        .collect();
    assert_eq!(answer, "The tool says: Sunny in Paris.");
    assert!(
        chunks.len() > 5,
        "pieces, not one message: {}",
        chunks.len()
    );
    for c in &chunks {
        assert_eq!(node(c), "agent");
        assert_eq!(c.metadata.get("ls_provider"), Some(&Value::from("openai")));
        assert_eq!(
            c.metadata.get("ls_model_name"),
            Some(&Value::from("replay"))
        );
        assert_eq!(c.metadata.get("thread_id"), Some(&Value::from("s")));
        assert!(c.metadata.get("langgraph_step").is_some());
    }
    // The tool's answer is a whole message from the tools node; the AI messages the agent
    // node returned were already streamed as pieces and are not sent again.
    let whole: Vec<_> = events
        .iter()
        .filter(|e| !matches!(e.message, Message::AiChunk(_)))
        .collect();
    assert_eq!(whole.len(), 1, "{whole:#?}");
    assert!(matches!(whole[0].message, Message::Tool { .. }));
    assert_eq!(node(whole[0]), "tools");
    // The tool call streamed in pieces too: its arguments add up.
    let mut first: Option<stategraph_messages::AiMessageChunk> = None;
    for e in &chunks {
        if let Message::AiChunk(c) = &e.message
            && e.metadata.get("langgraph_step") == Some(&Value::from(1))
        {
            match &mut first {
                Some(f) => f.merge(c.clone()).unwrap(),
                None => first = Some(c.clone()),
            }
        }
    }
    let (calls, _) = first.unwrap().tool_calls();
    assert_eq!(
        calls[0].args,
        stategraph_checkpoint::value!({"city": "Paris"})
    );
    // The stored answer is the same message the pieces made.
    let state = agent.get_state(&RunConfig::thread("s")).await.unwrap();
    let stored: MessagesState = state.state().unwrap();
    let ids: Vec<_> = chunks
        .iter()
        .filter_map(|e| e.message.fields().id.clone())
        .collect();
    assert!(ids.contains(stored.messages[3].fields().id.as_ref().unwrap()));
    assert!(matches!(&stored.messages[3], Message::Ai { .. }));
}

#[tokio::test]
async fn the_recursion_limit_ends_with_langgraphs_apology() {
    let server = ChatServer::start(|_| {
        Answer::calls(vec![Call::new("c", "get_weather", json!({"city": "Oslo"}))])
    })
    .await;
    let agent = create_react_agent(model(&server), [weather()])
        .build()
        .unwrap();
    // As LangGraph's: with 4 steps the second answer sees one step left (too few for the
    // tools and another answer) and apologizes; with 5 the third answer does, one step past
    // the limit, and the run fails as LangGraph's does.
    let mut config = RunConfig {
        recursion_limit: 4,
        ..RunConfig::default()
    };
    let out = agent.invoke(ask("loop"), config.clone()).await.unwrap();
    assert_eq!(out.messages.len(), 4);
    assert_eq!(
        out.messages.last().unwrap().text(),
        Some("Sorry, need more steps to process this request.")
    );
    config.recursion_limit = 5;
    let err = agent.invoke(ask("loop"), config).await.unwrap_err();
    assert!(
        matches!(
            err,
            stategraph_graph::GraphError::RecursionLimit { limit: 5 }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn tool_errors_become_messages_or_fail_the_node_as_configured() {
    let boom: Arc<dyn Tool> = Arc::new(tool("boom", "Fails.", |_c: City, _ctx| async move {
        Err::<String, _>("the disk is full")
    }));
    let tools = ToolNode::new([weather(), Arc::clone(&boom)]);
    let call = |name: &str, args| stategraph_messages::ToolCall {
        name: name.into(),
        args,
        id: Some("1".into()),
    };
    // Arguments that do not fit, and an unknown tool: messages for the model.
    let out = tools
        .run(
            &[
                call(
                    "get_weather",
                    stategraph_checkpoint::value!({"town": "Rome"}),
                ),
                call("nope", stategraph_checkpoint::value!({})),
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        out[0].text().unwrap(),
        "Error invoking tool 'get_weather' with kwargs {'town': 'Rome'} with error:\n missing \
         field `city`\n Please fix the error and try again."
    );
    assert_eq!(
        out[1].text().unwrap(),
        "Error: nope is not a valid tool, try one of [get_weather, boom]."
    );
    assert!(matches!(&out[1], Message::Tool { status, .. } if status == "error"));
    // A tool's own failure fails the node by default...
    let err = tools
        .run(
            &[call("boom", stategraph_checkpoint::value!({"city": "x"}))],
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Tool { .. }), "{err}");
    // ...and is a message with `All`.
    let all = tools.clone().handle_tool_errors(ToolErrors::All);
    let out = all
        .run(
            &[call("boom", stategraph_checkpoint::value!({"city": "x"}))],
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        out[0].text().unwrap(),
        "Error: tool `boom` failed: the disk is full\n Please fix your mistakes."
    );
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_with_backoff() {
    let n = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&n);
    let server = ChatServer::start(move |_| match seen.fetch_add(1, Ordering::SeqCst) {
        0 => Answer::Status {
            code: 429,
            message: "slow down".into(),
            retry_after_ms: Some(10),
        },
        1 => Answer::Status {
            code: 503,
            message: "overloaded".into(),
            retry_after_ms: None,
        },
        _ => Answer::text("finally"),
    })
    .await;
    let m = model(&server);
    let req = ChatRequest::new([Message::human("hi")]);
    assert_eq!(m.invoke(&req).await.unwrap().text(), Some("finally"));
    assert_eq!(n.load(Ordering::SeqCst), 3);
    // A stream is retried the same way until it starts.
    n.store(0, Ordering::SeqCst);
    let pieces: Vec<_> = m.stream(&req).await.unwrap().collect().await;
    assert!(pieces.iter().all(Result::is_ok));
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn errors_name_the_endpoint_status_and_attempts() {
    let server = ChatServer::start(|r| {
        if r["model"] == "bad" {
            Answer::Status {
                code: 400,
                message: "unknown model `bad`".into(),
                retry_after_ms: None,
            }
        } else {
            Answer::Status {
                code: 500,
                message: "always down".into(),
                retry_after_ms: None,
            }
        }
    })
    .await;
    let req = ChatRequest::new([Message::human("hi")]);
    let down = model(&server).invoke(&req).await.unwrap_err();
    assert!(
        matches!(
            down,
            Error::Http {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{down:?}"
    );
    assert_eq!(
        down.to_string(),
        format!(
            "{}/chat/completions answered 500 (after 3 attempts): always down",
            server.base_url()
        )
    );
    // A client error is not retried.
    let before = server.requests().len();
    let bad = OpenAiConfig::new("bad")
        .base_url(server.base_url())
        .build()
        .unwrap()
        .invoke(&req)
        .await
        .unwrap_err();
    assert!(
        matches!(
            bad,
            Error::Http {
                status: 400,
                attempts: 1,
                ..
            }
        ),
        "{bad:?}"
    );
    assert!(bad.to_string().contains("unknown model `bad`"));
    assert_eq!(server.requests().len(), before + 1);
    // Nothing listening: a connection error, after the retries.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gone = OpenAiConfig::new("m")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(1)
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .build()
        .unwrap()
        .invoke(&req)
        .await
        .unwrap_err();
    assert!(
        matches!(gone, Error::Connect { attempts: 2, .. }),
        "{gone:?}"
    );
    // Bad settings are refused before any request.
    let e = OpenAiConfig::new("m")
        .base_url("localhost:1")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("must start with http"), "{e}");
}

#[tokio::test]
async fn a_broken_or_stalled_stream_is_an_error_not_a_short_answer() {
    let server = ChatServer::start(|r| {
        if r["messages"][0]["content"] == "break" {
            Answer::BrokenStream {
                text: "one two three four".into(),
                after: 2,
            }
        } else {
            Answer::Stall(Duration::from_secs(20))
        }
    })
    .await;
    let m = OpenAiConfig::new("m")
        .base_url(server.base_url())
        .stream_idle_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let pieces: Vec<_> = m
        .stream(&ChatRequest::new([Message::human("break")]))
        .await
        .unwrap()
        .collect()
        .await;
    let last = pieces.last().unwrap().as_ref().unwrap_err();
    assert!(matches!(last, Error::Connect { .. }), "{last:?}");
    assert!(
        last.to_string().contains("the stream broke after"),
        "{last}"
    );

    let pieces: Vec<_> = bounded(async {
        m.stream(&ChatRequest::new([Message::human("stall")]))
            .await
            .unwrap()
            .collect::<Vec<_>>()
            .await
    })
    .await;
    let last = pieces.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(
            last,
            Error::Timeout {
                what: "the next streamed event",
                ..
            }
        ),
        "{last:?}"
    );
}
