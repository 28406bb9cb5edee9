//! The chat of the delta-storage tests: `messages` appended to by the user (input) and by a
//! `reply` node, each message ~200 bytes — the same text `scripts/interop/seed_graph.py`'s
//! `dchat` graph makes.

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::{CheckpointSaver, Durability};

#[derive(State, Clone, Debug, Default)]
pub(crate) struct Chat {
    #[reducer(append)]
    pub(crate) messages: Vec<String>,
}

/// The ~200-byte message `who` sends in `turn`.
pub(crate) fn message(who: &str, turn: usize) -> String {
    format!(
        "{who} message of turn {turn}: {}",
        "lorem ipsum ".repeat(20)
    )[..200]
        .to_owned()
}

/// START → reply (answers turn `len / 2`); with `delta`, `messages` is stored as deltas with
/// a snapshot every `delta` updates.
pub(crate) fn chat_graph(
    saver: Arc<dyn CheckpointSaver>,
    delta: Option<u32>,
) -> CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("reply", |s, _c| async move {
        Ok(ChatUpdate::default().messages([message("AI", s.messages.len() / 2)]))
    });
    g.add_edge(START, "reply");
    if let Some(n) = delta {
        g.delta_storage(n);
    }
    g.compile().unwrap().with_checkpointer(saver)
}

/// `n` more turns on `thread`: the user's next message, then the reply.
pub(crate) async fn talk(graph: &CompiledGraph<Chat>, thread: &str, n: usize, d: Durability) {
    for _ in 0..n {
        let mut config = RunConfig::thread(thread);
        config.durability = d;
        let have = graph
            .get_state(&config)
            .await
            .unwrap()
            .values
            .get("messages")
            .and_then(Value::as_list)
            .map_or(0, <[Value]>::len);
        graph
            .invoke(
                ChatUpdate::default().messages([message("user", have / 2)]),
                config,
            )
            .await
            .unwrap();
    }
}

/// The messages of `turns` whole turns.
pub(crate) fn conversation(turns: usize) -> Vec<String> {
    (0..turns)
        .flat_map(|t| [message("user", t), message("AI", t)])
        .collect()
}
