//! The Agent Server's two renderings of the `messages` stream mode.
//!
//! `messages-tuple` sends each event as the engine streams it: an event `messages` with
//! `[message, metadata]` — a piece of a model's answer as it arrives, or a whole message a
//! node returned. `messages` (the older form) adds the pieces up per message id: on the
//! first sight of an id `messages/metadata` `{id: {"metadata": …}}`, then for a piece
//! `messages/partial` with the answer so far (as an AI message), for a whole message
//! `messages/complete`, each as a one-message list.

use std::collections::HashMap;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::Value;
use stategraph_graph::stream::value_json;
use stategraph_messages::{AiMessageChunk, Message};

/// Which rendering a run's caller asked for (none: `messages` events are not sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rendering {
    /// `messages-tuple`: as streamed.
    Tuple,
    /// `messages`: added up per message.
    Accumulated,
}

impl Rendering {
    /// From the stream mode names a run was created with (`messages-tuple` wins, as in the
    /// reference).
    pub(crate) fn of(names: &[String]) -> Option<Self> {
        if names.iter().any(|n| n == "messages-tuple") {
            Some(Rendering::Tuple)
        } else if names.iter().any(|n| n == "messages") {
            Some(Rendering::Accumulated)
        } else {
            None
        }
    }
}

/// What a `messages` run has seen of each message so far.
#[derive(Default)]
pub(crate) struct Accumulator {
    pieces: HashMap<String, AiMessageChunk>,
    seen: std::collections::HashSet<String>,
}

impl Accumulator {
    /// The events the reference sends for one engine `messages` event (`[message,
    /// metadata]`).
    pub(crate) fn events(&mut self, data: &Json) -> Vec<(String, Json)> {
        let (Some(message), Some(metadata)) = (data.get(0), data.get(1)) else {
            return Vec::new();
        };
        let Ok(parsed) = Message::from_value(&Value::from(message.clone())) else {
            return vec![("messages/complete".into(), json!([message]))];
        };
        let id = parsed.fields().id.clone().unwrap_or_default();
        let mut out = Vec::new();
        if self.seen.insert(id.clone()) {
            out.push((
                "messages/metadata".to_owned(),
                json!({ id.as_str(): { "metadata": metadata } }),
            ));
        }
        match parsed {
            Message::AiChunk(piece) => {
                let sum = match self.pieces.remove(&id) {
                    Some(mut sum) => {
                        if sum.merge(piece.clone()).is_err() {
                            sum = piece;
                        }
                        sum
                    }
                    None => piece,
                };
                let so_far = value_json(&sum.clone().into_message().to_value());
                self.pieces.insert(id, sum);
                out.push(("messages/partial".into(), json!([so_far])));
            }
            whole => out.push((
                "messages/complete".into(),
                json!([value_json(&whole.to_value())]),
            )),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_add_up_and_whole_messages_complete() {
        let mut acc = Accumulator::default();
        let piece = |t: &str| {
            let c = AiMessageChunk::text_piece(t).with_id("m1");
            json!([value_json(&c.to_value()), {"langgraph_node": "agent"}])
        };
        let first = acc.events(&piece("Hel"));
        assert_eq!(first[0].0, "messages/metadata");
        assert_eq!(first[0].1["m1"]["metadata"]["langgraph_node"], "agent");
        assert_eq!(first[1].0, "messages/partial");
        assert_eq!(first[1].1[0]["content"], "Hel");
        assert_eq!(first[1].1[0]["type"], "ai");
        let second = acc.events(&piece("lo"));
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].1[0]["content"], "Hello");
        let tool = Message::tool("sunny", "c1").with_id("t1");
        let done = acc.events(&json!([value_json(&tool.to_value()), {}]));
        assert_eq!(done[1].0, "messages/complete");
        assert_eq!(done[1].1[0]["tool_call_id"], "c1");
    }
}
