//! A streamed Messages API answer: `message_start`, `content_block_start`,
//! `content_block_delta` (`text_delta`, `input_json_delta`, thinking), `content_block_stop`,
//! `message_delta` and `message_stop` events, as the pieces `ChatAnthropic` streams.

use std::collections::HashMap;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{Value, uuid4};
use stategraph_messages::{AiMessageChunk, ToolCallChunk};

use super::answer::{clean_block, decode, sdk_order, usage_metadata};
use crate::error::Result;
use crate::sse::{EventParser, error_message, event_path};

/// The reading of one answer's events.
pub(super) struct Parser {
    /// Text stays a string (no tools were offered), else content is a list of blocks.
    text_only: bool,
    /// The id every piece carries (LangChain's run id: Anthropic's own stays in the
    /// metadata).
    id: String,
    /// The `message_start` usage (its input counts complete a last usage without them).
    start_usage: Option<Json>,
    /// The type of each content block started, by index.
    blocks: HashMap<i64, String>,
    finished: bool,
}

impl Parser {
    pub(super) fn new(text_only: bool) -> Self {
        Self {
            text_only,
            id: format!("lc_run--{}", uuid4()),
            start_usage: None,
            blocks: HashMap::new(),
            finished: false,
        }
    }

    fn piece(&self, content: Json) -> AiMessageChunk {
        let mut p = AiMessageChunk::text_piece("").with_id(self.id.clone());
        p.fields.content = Value::from(content);
        p.fields
            .response_metadata
            .insert("model_provider", "anthropic");
        p
    }

    /// An empty content of this answer's kind.
    fn empty(&self) -> Json {
        if self.text_only { json!("") } else { json!([]) }
    }
}

impl EventParser for Parser {
    const LAST_EVENT: &'static str = "message_stop";

    fn parse(
        &mut self,
        url: &str,
        n: usize,
        name: &str,
        data: &str,
    ) -> Result<Vec<AiMessageChunk>> {
        let json: Json = serde_json::from_str(data)
            .map_err(|e| decode(url, event_path(n, data, &e), format!("not JSON: {e}")))?;
        let path = format!("event {n}");
        if let Some(message) = error_message(&json) {
            return Err(decode(
                url,
                path,
                format!("the server sent an error: {message}"),
            ));
        }
        let kind = json.get("type").and_then(Json::as_str).unwrap_or(name);
        let index = || {
            json.get("index")
                .and_then(Json::as_i64)
                .ok_or_else(|| decode(url, format!("{path}.index"), "missing"))
        };
        let piece = match kind {
            "message_start" => {
                let message = json.get("message");
                self.start_usage = message.and_then(|m| m.get("usage")).cloned();
                let mut p = self.piece(self.empty());
                if let Some(model) = message.and_then(|m| m.get("model")) {
                    let meta = std::mem::take(&mut p.fields.response_metadata);
                    p.fields
                        .response_metadata
                        .insert("model_name", Value::from(model.clone()));
                    for (k, v) in meta {
                        p.fields.response_metadata.insert(k, v);
                    }
                }
                Some(p)
            }
            "content_block_start" => {
                let index = index()?;
                let block = json
                    .get("content_block")
                    .and_then(Json::as_object)
                    .ok_or_else(|| decode(url, format!("{path}.content_block"), "missing"))?;
                let block_type = block
                    .get("type")
                    .and_then(Json::as_str)
                    .ok_or_else(|| decode(url, format!("{path}.content_block.type"), "missing"))?;
                self.blocks.insert(index, block_type.to_owned());
                self.block_start(index, block_type, block)
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = json
                    .get("delta")
                    .and_then(Json::as_object)
                    .ok_or_else(|| decode(url, format!("{path}.delta"), "missing"))?;
                self.block_delta(index, delta)
            }
            "message_delta" => {
                let delta = json.get("delta");
                let field = |k| delta.and_then(|d| d.get(k)).cloned().unwrap_or(Json::Null);
                let stop_reason = field("stop_reason");
                let mut p = self.piece(self.empty());
                let meta = std::mem::take(&mut p.fields.response_metadata);
                let m = &mut p.fields.response_metadata;
                m.insert("stop_reason", Value::from(stop_reason.clone()));
                m.insert("stop_sequence", Value::from(field("stop_sequence")));
                let context = json
                    .get("context_management")
                    .cloned()
                    .unwrap_or(Json::Null);
                for (k, v) in [
                    ("stop_details", field("stop_details")),
                    ("context_management", context),
                    ("container", field("container")),
                ] {
                    if !v.is_null() {
                        m.insert(k, Value::from(v));
                    }
                }
                for (k, v) in meta {
                    m.insert(k, v);
                }
                if let Some(u) = json.get("usage").filter(|u| u.is_object()) {
                    p.usage_metadata = usage_metadata(u, self.start_usage.as_ref());
                }
                if stop_reason.as_str().is_some_and(|s| !s.is_empty()) {
                    p.chunk_position = Some("last".into());
                }
                Some(p)
            }
            "message_stop" => {
                self.finished = true;
                None
            }
            // `content_block_stop`, `ping`, and events added later.
            _ => None,
        };
        Ok(piece.into_iter().collect())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn id(&self) -> String {
        self.id.clone()
    }
}

impl Parser {
    fn block_start(
        &self,
        index: i64,
        block_type: &str,
        block: &serde_json::Map<String, Json>,
    ) -> Option<AiMessageChunk> {
        let with_index = |mut b: serde_json::Map<String, Json>| {
            b.insert("index".into(), json!(index));
            Json::Object(b)
        };
        match block_type {
            "text" => {
                let text = block.get("text").and_then(Json::as_str).unwrap_or_default();
                if text.is_empty() {
                    return None;
                }
                if self.text_only {
                    return Some(self.piece(json!(text)));
                }
                Some(self.piece(json!([with_index(clean_block(block))])))
            }
            "thinking" => {
                let has = |k| {
                    block
                        .get(k)
                        .and_then(Json::as_str)
                        .is_some_and(|s| !s.is_empty())
                };
                if !(has("thinking") || has("signature")) {
                    return None;
                }
                Some(self.piece(json!([with_index(sdk_order(block.iter()))])))
            }
            t if t.contains("tool_use")
                || t.contains("tool_result")
                || t.contains("document")
                || t.contains("redacted_thinking") =>
            {
                let mut p = self.piece(json!([with_index(clean_block(block))]));
                if t == "tool_use" {
                    // Arguments may come whole in the start (then no deltas follow).
                    let args = match block.get("input") {
                        Some(i @ Json::Object(m)) if !m.is_empty() => i.to_string(),
                        _ => String::new(),
                    };
                    let text = |k| block.get(k).and_then(Json::as_str).map(str::to_owned);
                    p.tool_call_chunks.push(ToolCallChunk {
                        name: text("name"),
                        args: Some(args),
                        id: text("id"),
                        index: Some(index),
                    });
                }
                Some(p)
            }
            _ => None,
        }
    }

    fn block_delta(
        &self,
        index: i64,
        delta: &serde_json::Map<String, Json>,
    ) -> Option<AiMessageChunk> {
        let delta_type = delta.get("type").and_then(Json::as_str).unwrap_or_default();
        // The delta's fields in the SDK's order, then `index`; its type is the block's.
        let as_block = |block_type: &str| {
            let mut b = sdk_order(delta.iter());
            b.insert("index".into(), json!(index));
            b.insert("type".into(), json!(block_type));
            b
        };
        match delta_type {
            "text_delta" | "citations_delta" => {
                if self.text_only
                    && let Some(text) = delta.get("text").and_then(Json::as_str)
                {
                    return Some(self.piece(json!(text)));
                }
                let mut b = as_block("text");
                if let Some(c) = b.remove("citation") {
                    b.insert("citations".into(), json!([c]));
                }
                Some(self.piece(json!([b])))
            }
            "thinking_delta" | "signature_delta" => {
                let mut b = as_block("thinking");
                if delta_type == "signature_delta" {
                    b.entry("thinking").or_insert_with(|| json!(""));
                }
                Some(self.piece(json!([b])))
            }
            "input_json_delta" => {
                let mut b = sdk_order(delta.iter());
                b.insert("index".into(), json!(index));
                let mut p = self.piece(json!([b]));
                if self.blocks.get(&index).map(String::as_str) == Some("tool_use") {
                    p.tool_call_chunks.push(ToolCallChunk {
                        name: None,
                        args: delta
                            .get("partial_json")
                            .and_then(Json::as_str)
                            .map(str::to_owned),
                        id: None,
                        index: Some(index),
                    });
                }
                Some(p)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
