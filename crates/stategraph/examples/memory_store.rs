//! Cross-thread memory with semantic search: a chatbot's memory flow.
//!
//! One graph, compiled with a checkpointer (conversation state per thread) and a store
//! (memories shared by every thread of a user). The run's typed context says which user is
//! talking; nodes reach the store and the context through their `NodeContext`.
//!
//! - Thread 1, user 1 says "Hi! I like pizza." — `update_memory` saves it under
//!   `("1", "memories")`.
//! - Thread 2 (a new conversation) of the same user asks "what does the user like to eat?" —
//!   `call_model` finds the pizza memory by meaning (no word in common with the question but
//!   "like"), with the local all-MiniLM-L6-v2 model, ranked above the user's other memories
//!   and never mixing in another user's.
//!
//! Run with `cargo run -p stategraph --example memory_store --features minilm` after
//! `scripts/install-model.sh` (which `scripts/test.sh` runs).

use std::sync::Arc;

use serde_json::json;
use stategraph::embed::MiniLm;
use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Chat {
    /// Stored as deltas (LangGraph's `DeltaChannel`): each checkpoint keeps only the messages
    /// a step added, with a full snapshot every 50 updates.
    #[reducer(append, delta = 50)]
    messages: Vec<String>,
}

/// The run's typed context (LangGraph's `context={"user_id": …}`).
struct UserContext {
    user_id: String,
}

fn user_of(ctx: &NodeContext) -> Result<String, NodeError> {
    ctx.context::<UserContext>()
        .map(|c| c.user_id.clone())
        .ok_or_else(|| NodeError::new("a user_id context is required"))
}

/// Answers from the user's memories: searches them with the latest message.
async fn call_model(state: Arc<Chat>, ctx: NodeContext) -> Result<ChatUpdate, NodeError> {
    let user_id = user_of(&ctx)?;
    let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
    let question = state.messages.last().cloned().unwrap_or_default();
    let memories = store
        .search(
            &[user_id.as_str(), "memories"],
            SearchOptions::new().query(question).limit(3),
        )
        .await?;
    let info: Vec<String> = memories
        .iter()
        .map(|m| {
            format!(
                "{} (score {:.3})",
                m.value["memory"].as_str().unwrap_or_default(),
                m.score.unwrap_or_default()
            )
        })
        .collect();
    let reply = if info.is_empty() {
        "AI: I don't know anything about you yet.".to_owned()
    } else {
        format!("AI: what I remember about you: {}", info.join("; "))
    };
    Ok(ChatUpdate::default().messages([reply]))
}

/// Saves what the user said about themselves. (A real agent would ask a model to extract
/// memories; here every sentence of the user's message starting with "I " is one.)
async fn update_memory(state: Arc<Chat>, ctx: NodeContext) -> Result<ChatUpdate, NodeError> {
    let user_id = user_of(&ctx)?;
    let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
    let said = state
        .messages
        .iter()
        .rev()
        .find(|m| !m.starts_with("AI: "))
        .cloned()
        .unwrap_or_default();
    for sentence in said.split(['.', '!', '?']).map(str::trim) {
        if sentence.starts_with("I ") {
            let key = stategraph::uuid6(None);
            let namespace = [user_id.as_str(), "memories"];
            store
                .put(&namespace, &key, json!({ "memory": sentence }))
                .await?;
        }
    }
    Ok(ChatUpdate::default())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), stategraph::Error> {
    // The store embeds the `memory` field of each value with the local model.
    let model = MiniLm::shared()?;
    let index = IndexConfig::new(384, model).with_fields(["memory"]);
    let store = stategraph::open_store("sqlite::memory:", StoreOptions::new().index(index)).await?;

    // Other memories, so the search has something to rank against.
    store
        .put(
            &["1", "memories"],
            "m-job",
            json!({ "memory": "I work as a nurse" }),
        )
        .await?;
    store
        .put(
            &["1", "memories"],
            "m-pet",
            json!({ "memory": "I have a cat called Tofu" }),
        )
        .await?;
    store
        .put(
            &["2", "memories"],
            "m-food",
            json!({ "memory": "I love sushi" }),
        )
        .await?;

    let mut graph = StateGraph::<Chat>::new();
    graph.add_node("call_model", call_model);
    graph.add_node("update_memory", update_memory);
    graph
        .add_edge(START, "call_model")
        .add_edge("call_model", "update_memory")
        .add_edge("update_memory", END);
    let graph = graph
        .compile()?
        .with_checkpointer(stategraph::open_saver("sqlite::memory:").await?)
        .with_store(store.clone());

    let user = |thread: &str| {
        RunConfig::thread(thread).with_context(UserContext {
            user_id: "1".to_owned(),
        })
    };
    let say = |text: &str| ChatUpdate::default().messages([text]);

    let out = graph.invoke(say("Hi! I like pizza."), user("1")).await?;
    println!("thread 1: {:?}", out.messages);

    let out = graph
        .invoke(say("what does the user like to eat?"), user("2"))
        .await?;
    println!("thread 2: {:?}", out.messages);

    // The best match for the question, searched directly.
    let hits = store
        .search(
            &["1", "memories"],
            SearchOptions::new().query("what does the user like to eat?"),
        )
        .await?;
    assert!(!hits.is_empty(), "no memories found");
    let best = &hits[0];
    println!(
        "best match: {} = {} (score {:.3})",
        best.key,
        best.value,
        best.score.unwrap_or_default()
    );
    assert_eq!(
        best.value["memory"], "I like pizza",
        "expected the pizza memory first"
    );
    assert!(
        hits.iter().all(|h| h.namespace[0] == "1"),
        "a search in user 1's namespace returned another user's memory"
    );
    Ok(())
}
