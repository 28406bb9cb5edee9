//! LangGraph's `react_agent` benchmark: agent ⇄ tools over `add_messages`, with a fake model
//! that asks for n tool calls (each with a ~3.6 KB query) and then answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph::{
    DynState, END, Map, Message, NodeError, Reducer, START, Schema, StateGraph, ToolCall, Value,
    graph::Goto, uuid4,
};

use super::{Shared, attach, expect_len, failed, fresh_config};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

/// The last message of the state, decoded.
fn last_message(s: &DynState) -> Result<Option<Message>, NodeError> {
    match s
        .get("messages")
        .and_then(Value::as_list)
        .and_then(<[Value]>::last)
    {
        Some(v) => Message::from_value(v)
            .map(Some)
            .map_err(|e| NodeError::new(e.to_string())),
        None => Ok(None),
    }
}

fn tool_calls(m: Option<&Message>) -> &[ToolCall] {
    match m {
        Some(Message::Ai { tool_calls, .. }) => tool_calls,
        _ => &[],
    }
}

/// `react_agent_100x`.
pub(super) struct ReactAgent;

#[async_trait::async_trait]
impl Workload for ReactAgent {
    fn spec(&self) -> Spec {
        Spec::new("react_agent_100x", 100, 5, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let tool = uuid4();
        // The fake model's answers, in order, starting over after the last.
        let responses: Arc<Vec<Value>> = Arc::new(
            (0..n)
                .map(|_| {
                    let call = ToolCall {
                        name: tool.clone(),
                        args: Value::Map(Map::from_iter([("query", uuid4().repeat(100))])),
                        id: Some(uuid4()),
                    };
                    Message::ai("", vec![call]).with_id(uuid4()).to_value()
                })
                .chain([Message::ai("answer".repeat(100), Vec::new())
                    .with_id(uuid4())
                    .to_value()])
                .collect(),
        );
        let next = Arc::new(AtomicUsize::new(0));

        let mut g = StateGraph::<DynState>::with_schema(
            Schema::new().reducer("messages", Reducer::add_messages()),
        );
        g.add_node("agent", move |_s, _c| {
            let i = next.fetch_add(1, Ordering::Relaxed) % responses.len();
            let answer = responses[i].clone();
            async move { Ok(Map::from_iter([("messages", Value::from(vec![answer]))])) }
        });
        g.add_node("tools", |s, _c| async move {
            let last = last_message(&s)?;
            let answers = tool_calls(last.as_ref())
                .iter()
                .map(|call| {
                    let query = call
                        .args
                        .as_map()
                        .and_then(|a| a.get("query"))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    Message::tool(
                        format!("result for query: {query}").repeat(10),
                        call.id.clone().unwrap_or_default(),
                    )
                    .to_value()
                })
                .collect();
            Ok(Map::from_iter([("messages", Value::List(answers))]))
        });
        g.add_edge(START, "agent")
            .add_conditional_edges("agent", |s: &DynState| {
                let last = last_message(s)?;
                Ok(vec![Goto::from(if tool_calls(last.as_ref()).is_empty() {
                    END
                } else {
                    "tools"
                })])
            })
            .add_edge("tools", "agent");
        let graph: Shared<DynState> = Arc::new(attach(
            g.compile().map_err(failed(self.spec().name))?,
            backend,
        ));
        let samples = repeat(runs, || {
            let graph = Arc::clone(&graph);
            async move {
                let input = Map::from_iter([(
                    "messages",
                    Value::from(vec![Message::human("hi?").to_value()]),
                )]);
                let out = graph
                    .invoke(input, fresh_config(backend))
                    .await
                    .map_err(failed("react_agent_100x"))?;
                expect_len("react_agent_100x", &out.0, "messages", 2 * n + 2)
            }
        })
        .await?;
        Ok(Measurement {
            samples_ms: samples,
            ..Measurement::default()
        })
    }
}
