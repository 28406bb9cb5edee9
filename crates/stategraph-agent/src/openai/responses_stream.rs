//! A streamed Responses API answer: `response.created`, `response.output_item.added`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`, …,
//! `response.completed` (with the usage) as the pieces langchain-openai streams with its
//! default output version: content blocks with an `index` per output item (and content
//! part), function call pieces by the same index.

use std::collections::HashMap;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{Value, uuid4};
use stategraph_messages::{AiMessageChunk, Message, ToolCallChunk};

use super::responses::py_dumps;
use super::responses_answer::{annotation_to_lc, parse_response};
use super::wire::decode;
use crate::error::Result;
use crate::sse::{EventParser, error_message, event_path};

/// The reading of one answer's events.
pub(super) struct Parser {
    /// The request asked for a JSON schema.
    structured: bool,
    /// The response's id once `response.created` gives it (every piece carries it), else
    /// LangChain's run id.
    id: String,
    /// The content index of the block being streamed, and the output item and content part
    /// it belongs to (langchain-openai's `current_index`, `current_output_index`,
    /// `current_sub_index`).
    index: i64,
    output_index: i64,
    sub_index: i64,
    /// The output index of each item by id: the first one seen, or the order items were
    /// added in when the server sends none (llama-server does not).
    item_indices: HashMap<String, i64>,
    finished: bool,
}

impl Parser {
    pub(super) fn new(structured: bool) -> Self {
        Self {
            structured,
            id: format!("lc_run--{}", uuid4()),
            index: -1,
            output_index: -1,
            sub_index: -1,
            item_indices: HashMap::new(),
            finished: false,
        }
    }

    /// Moves to the block of output item `output` (content part `sub`, if any).
    fn advance(&mut self, output: i64, sub: Option<i64>) {
        match sub {
            None if self.output_index != output => self.index += 1,
            Some(s) if self.output_index != output || self.sub_index != s => self.index += 1,
            _ => {}
        }
        if let Some(s) = sub {
            self.sub_index = s;
        }
        self.output_index = output;
    }

    fn piece(&self, content: Vec<Json>) -> AiMessageChunk {
        let mut p = AiMessageChunk::text_piece("").with_id(self.id.clone());
        p.fields.content = Value::from(Json::Array(content));
        p.fields
            .response_metadata
            .insert("model_provider", "openai");
        p
    }
}

impl EventParser for Parser {
    const LAST_EVENT: &'static str = "response.completed";

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
        let kind = json.get("type").and_then(Json::as_str).unwrap_or(name);
        if kind == "error" || (kind.is_empty() && json.get("error").is_some()) {
            let message = error_message(&json).unwrap_or_else(|| {
                let text = |k| json.get(k).and_then(Json::as_str);
                match (text("code"), text("message")) {
                    (Some(code), Some(m)) => format!("{code}: {m}"),
                    (_, Some(m)) => m.to_owned(),
                    _ => json.to_string(),
                }
            });
            return Err(decode(
                url,
                path,
                format!("the server sent an error: {message}"),
            ));
        }
        let item = json.get("item");
        let item_type = item.and_then(|i| i.get("type")).and_then(Json::as_str);
        let item_id = item
            .and_then(|i| i.get("id"))
            .or_else(|| json.get("item_id"))
            .and_then(Json::as_str)
            .map(str::to_owned);
        // The item's output index: pinned to the first seen for its id.
        let sent = json.get("output_index").and_then(Json::as_i64);
        let known = item_id
            .as_ref()
            .and_then(|id| self.item_indices.get(id))
            .copied();
        let output = match (known, sent) {
            (Some(k), _) => k,
            (None, Some(s)) => s,
            (None, None) if kind == "response.output_item.added" => {
                self.item_indices.values().max().map_or(0, |m| m + 1)
            }
            (None, None) => self.output_index.max(0),
        };
        if let Some(id) = &item_id {
            self.item_indices.entry(id.clone()).or_insert(output);
        }
        let sub = json
            .get("content_index")
            .and_then(Json::as_i64)
            .unwrap_or(0);
        let text = |v: Option<&Json>| v.and_then(Json::as_str).unwrap_or_default().to_owned();
        let piece = match (kind, item_type) {
            ("response.created", _) => {
                let response = json.get("response");
                if let Some(id) = response.and_then(|r| r.get("id")).and_then(Json::as_str) {
                    self.id = id.to_owned();
                }
                let mut p = self.piece(Vec::new());
                p.fields.response_metadata.insert("id", self.id.as_str());
                Some(p)
            }
            ("response.output_text.delta", _) => {
                self.advance(output, Some(sub));
                let delta = text(json.get("delta"));
                Some(self.piece(vec![
                    json!({ "type": "text", "text": delta, "index": self.index }),
                ]))
            }
            ("response.output_text.annotation.added", _) => {
                self.advance(output, Some(sub));
                let a = annotation_to_lc(json.get("annotation").unwrap_or(&Json::Null));
                Some(self.piece(vec![
                    json!({ "type": "text", "annotations": [a], "index": self.index }),
                ]))
            }
            ("response.output_text.done", _) => {
                self.advance(output, Some(sub));
                let block =
                    json!({ "type": "text", "text": "", "id": item_id, "index": self.index });
                Some(self.piece(vec![block]))
            }
            ("response.output_item.added", Some("message")) => {
                match item.and_then(|i| i.get("phase")).filter(|p| !p.is_null()) {
                    Some(phase) => {
                        self.advance(output, Some(0));
                        let block = json!({ "type": "text", "text": "", "phase": phase, "index": self.index });
                        Some(self.piece(vec![block]))
                    }
                    // An empty piece, as langchain-openai yields for it.
                    None => Some(self.piece(Vec::new())),
                }
            }
            ("response.output_item.added", Some("function_call")) => {
                self.advance(output, None);
                let field = |k| item.and_then(|i| i.get(k)).cloned().unwrap_or(Json::Null);
                let mut p = self.piece(Vec::new());
                p.tool_call_chunks.push(ToolCallChunk {
                    name: field("name").as_str().map(str::to_owned),
                    args: field("arguments").as_str().map(str::to_owned),
                    id: field("call_id").as_str().map(str::to_owned),
                    index: Some(self.index),
                });
                let mut block = serde_json::Map::new();
                block.insert("type".into(), json!("function_call"));
                for k in ["name", "arguments", "call_id", "id"] {
                    block.insert(k.into(), field(k));
                }
                for k in ["namespace", "async"] {
                    if !field(k).is_null() {
                        block.insert(k.into(), field(k));
                    }
                }
                block.insert("index".into(), json!(self.index));
                p.fields.content = Value::from(json!([block]));
                Some(p)
            }
            ("response.function_call_arguments.delta", _) => {
                self.advance(output, None);
                let delta = text(json.get("delta"));
                let mut p = self.piece(vec![
                    json!({ "type": "function_call", "arguments": delta, "index": self.index }),
                ]);
                p.tool_call_chunks.push(ToolCallChunk {
                    name: None,
                    args: Some(delta),
                    id: None,
                    index: Some(self.index),
                });
                Some(p)
            }
            ("response.output_item.added", Some("reasoning")) => {
                self.advance(output, None);
                self.sub_index = 0;
                let mut block = non_null_object(item);
                block.remove("encrypted_content");
                block.insert("index".into(), json!(self.index));
                Some(self.piece(vec![Json::Object(block)]))
            }
            ("response.output_item.done", Some("reasoning")) => {
                let encrypted = item
                    .and_then(|i| i.get("encrypted_content"))
                    .and_then(Json::as_str)
                    .filter(|e| !e.is_empty());
                match encrypted {
                    Some(e) => {
                        self.advance(output, None);
                        let block = json!({ "type": "reasoning", "id": item_id, "summary": [],
                                            "encrypted_content": e, "index": self.index });
                        Some(self.piece(vec![block]))
                    }
                    None => None,
                }
            }
            ("response.reasoning_summary_part.added", _)
            | ("response.reasoning_summary_text.delta", _) => {
                self.advance(output, None);
                let part = json!({
                    "index": json.get("summary_index").cloned().unwrap_or(json!(0)),
                    "type": "summary_text",
                    "text": text(json.get("delta")),
                });
                let mut block =
                    json!({ "summary": [part], "index": self.index, "type": "reasoning" });
                if kind == "response.reasoning_summary_part.added"
                    && let Some(b) = block.as_object_mut()
                {
                    b.insert("id".into(), json!(item_id));
                }
                Some(self.piece(vec![block]))
            }
            ("response.output_item.done", Some(t)) if BUILT_IN.contains(&t) => {
                self.advance(output, None);
                let mut block = non_null_object(item);
                block.insert("index".into(), json!(self.index));
                let mut p = self.piece(vec![Json::Object(block)]);
                if t == "custom_tool_call" {
                    let field = |k| item.and_then(|i| i.get(k)).and_then(Json::as_str);
                    let input = json!({ "__arg1": field("input").unwrap_or_default() });
                    p.tool_call_chunks.push(ToolCallChunk {
                        name: field("name").map(str::to_owned),
                        args: Some(py_dumps(&input)),
                        id: field("call_id").map(str::to_owned),
                        index: Some(self.index),
                    });
                }
                Some(p)
            }
            ("response.refusal.done", _) => {
                let refusal = json.get("refusal").cloned().unwrap_or(Json::Null);
                Some(self.piece(vec![json!({ "type": "refusal", "refusal": refusal })]))
            }
            ("response.failed", _) => {
                let response = json.get("response");
                let why = response
                    .and_then(|r| r.get("error"))
                    .filter(|e| !e.is_null())
                    .map_or_else(|| "the response failed".to_owned(), Json::to_string);
                return Err(decode(url, path, why));
            }
            ("response.completed" | "response.incomplete", _) => {
                self.finished = true;
                let response = json
                    .get("response")
                    .ok_or_else(|| decode(url, format!("{path}.response"), "missing"))?;
                let whole =
                    parse_response(url, response, self.structured).map_err(|e| match e {
                        crate::Error::Decode {
                            path: p, message, ..
                        } => decode(url, format!("{path}.response.{p}"), message),
                        other => other,
                    })?;
                let Message::Ai {
                    fields,
                    usage_metadata,
                    ..
                } = whole
                else {
                    return Ok(Vec::new());
                };
                let mut p = self.piece(Vec::new());
                p.usage_metadata = usage_metadata;
                p.fields.response_metadata = fields.response_metadata;
                p.fields.response_metadata.remove("id");
                if let Some(parsed) = fields.additional_kwargs.get("parsed") {
                    p.fields.additional_kwargs.insert("parsed", parsed.clone());
                }
                p.chunk_position = Some("last".into());
                Some(p)
            }
            // `response.in_progress`, content part events, other `done` events, ….
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

/// The output items of built-in tools langchain-openai keeps as blocks when they are done.
const BUILT_IN: &[&str] = &[
    "compaction",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "image_generation_call",
    "tool_search_call",
    "tool_search_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "custom_tool_call",
];

fn non_null_object(item: Option<&Json>) -> serde_json::Map<String, Json> {
    item.and_then(Json::as_object)
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "responses_stream_tests.rs"]
mod tests;
