//! LangChain's chat messages for stategraph.
//!
//! [`Message`] is LangChain's `HumanMessage`, `AIMessage`, `SystemMessage` and `ToolMessage`
//! (and `RemoveMessage`) as one Rust type, stored exactly as Python LangGraph stores them — a
//! msgpack ext value naming the Python class with `model_dump()`'s fields in their order — so a
//! chat thread can be shared with Python in both directions. [`AiMessageChunk`] is a piece of
//! a model's answer as it streams, with LangChain's rules for adding pieces up (text, tool
//! call fragments by index, usage), and [`parse_partial_json`] reads the arguments of a tool
//! call that is still arriving.
//!
//! ```
//! use stategraph_messages::{AiMessageChunk, Message, ToolCallChunk, parse_partial_json};
//!
//! let question = Message::human("What is the weather in Paris?");
//! let stored = question.to_value();
//! assert_eq!(Message::from_value(&stored)?, question);
//!
//! // A streamed answer, added up piece by piece.
//! let mut answer = AiMessageChunk::text_piece("Let me ");
//! answer.merge(AiMessageChunk::text_piece("check."))?;
//! assert_eq!(answer.text(), "Let me check.");
//! assert_eq!(answer.into_message().text(), Some("Let me check."));
//!
//! // The arguments of a tool call, read while they stream.
//! let args = parse_partial_json(r#"{"city": "Par"#);
//! assert_eq!(args, Some(serde_json::json!({"city": "Par"})));
//! # let _ = ToolCallChunk::default();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod chunk;
mod messages;

pub use chunk::{AiMessageChunk, ChunkMergeError, ToolCallChunk, parse_partial_json};
pub use messages::{Message, MessageFields, ToolCall};
