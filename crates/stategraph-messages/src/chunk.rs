//! LangChain's `AIMessageChunk`: a piece of a chat model's answer as it streams, and the
//! rules for adding pieces up (`chunk + chunk` in Python) into the whole message.

use crate::messages::{Message, MessageFields, ToolCall};
use stategraph_value::{Ext, ExtCode, Map, PyObject, Value};

/// A piece of a tool call as it streams: the name comes first, the arguments as JSON text in
/// fragments; pieces with the same `index` belong to the same call.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ToolCallChunk {
    /// The tool's name (in the first piece of a call).
    pub name: Option<String>,
    /// A fragment of the arguments' JSON text.
    pub args: Option<String>,
    /// The call's id (in the first piece of a call).
    pub id: Option<String>,
    /// Which call of the message the piece belongs to.
    pub index: Option<i64>,
}

impl ToolCallChunk {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("name", self.name.clone());
        m.insert("args", self.args.clone());
        m.insert("id", self.id.clone());
        m.insert("index", self.index);
        m.insert("type", "tool_call_chunk");
        Value::Map(m)
    }

    fn from_value(v: &Value) -> Self {
        let text = |k: &str| v.as_map()?.get(k)?.as_str().map(str::to_owned);
        Self {
            name: text("name"),
            args: text("args"),
            id: text("id"),
            index: v
                .as_map()
                .and_then(|m| m.get("index"))
                .and_then(Value::as_i64),
        }
    }
}

/// A piece of an AI message as a chat model streams it (LangChain's `AIMessageChunk`).
///
/// Pieces add up with [`merge`](Self::merge) as LangChain adds them (text concatenated, tool
/// call pieces joined by index, metadata merged, token counts summed), and the sum becomes
/// the stored message with [`into_message`](Self::into_message). While it streams, its
/// [`tool_calls`](Self::tool_calls) are read from the partial JSON received so far.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AiMessageChunk {
    /// Content, extras, metadata, name and id.
    pub fields: MessageFields,
    /// The tool call pieces.
    pub tool_call_chunks: Vec<ToolCallChunk>,
    /// Token usage, as LangChain's `usage_metadata` (`input_tokens`, `output_tokens`,
    /// `total_tokens`, …), or null.
    pub usage_metadata: Value,
    /// `Some("last")` on the last piece of a message.
    pub chunk_position: Option<String>,
}

/// Why two pieces could not be added up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot merge message chunks: {0}")]
pub struct ChunkMergeError(pub String);

impl AiMessageChunk {
    /// A piece of text.
    pub fn text_piece(text: impl Into<String>) -> Self {
        Self {
            fields: MessageFields {
                content: Value::from(text.into()),
                ..MessageFields::default()
            },
            ..Self::default()
        }
    }

    /// The text of the content (the text blocks of a list content, joined).
    pub fn text(&self) -> String {
        content_text(&self.fields.content)
    }

    /// Adds `other` after this piece, as LangChain's `AIMessageChunk.__add__`.
    pub fn merge(&mut self, other: AiMessageChunk) -> Result<(), ChunkMergeError> {
        let content = std::mem::take(&mut self.fields.content);
        self.fields.content = merge_content(content, other.fields.content);
        merge_maps(
            &mut self.fields.additional_kwargs,
            other.fields.additional_kwargs,
        )?;
        merge_maps(
            &mut self.fields.response_metadata,
            other.fields.response_metadata,
        )?;
        for piece in other.tool_call_chunks {
            let same = self.tool_call_chunks.iter_mut().find(|c| {
                piece.index.is_some()
                    && c.index == piece.index
                    && (c.id.as_deref().is_none_or(str::is_empty)
                        || piece.id.as_deref().is_none_or(str::is_empty)
                        || c.id == piece.id)
            });
            match same {
                Some(c) => {
                    concat_opt(&mut c.name, piece.name);
                    concat_opt(&mut c.args, piece.args);
                    if c.id.as_deref().is_none_or(str::is_empty) {
                        c.id = piece.id;
                    }
                }
                None => self.tool_call_chunks.push(piece),
            }
        }
        if !other.usage_metadata.is_null() {
            let left = std::mem::take(&mut self.usage_metadata);
            self.usage_metadata = add_usage(left, other.usage_metadata);
        }
        self.fields.id = best_id(self.fields.id.take(), other.fields.id);
        if other.chunk_position.as_deref() == Some("last") {
            self.chunk_position = Some("last".into());
        }
        if self.fields.name.is_none() {
            self.fields.name = other.fields.name;
        }
        Ok(())
    }

    /// The tool calls the pieces so far describe, and those whose arguments are not a JSON
    /// object (as LangChain's `invalid_tool_calls`): arguments still streaming are read as
    /// far as they go (`{"city": "Par` reads as `{"city": "Par"}`).
    pub fn tool_calls(&self) -> (Vec<ToolCall>, Vec<Value>) {
        let mut calls = Vec::new();
        let mut invalid = Vec::new();
        for c in &self.tool_call_chunks {
            let args = match c.args.as_deref() {
                None | Some("") => Some(Value::Map(Map::new())),
                Some(text) => parse_partial_json(text)
                    .filter(serde_json::Value::is_object)
                    .map(Value::from),
            };
            match args {
                Some(args) => calls.push(ToolCall {
                    name: c.name.clone().unwrap_or_default(),
                    args,
                    id: c.id.clone(),
                }),
                None => {
                    let mut m = Map::new();
                    m.insert("name", c.name.clone());
                    m.insert("args", c.args.clone());
                    m.insert("id", c.id.clone());
                    m.insert("error", Value::Null);
                    m.insert("type", "invalid_tool_call");
                    invalid.push(Value::Map(m));
                }
            }
        }
        (calls, invalid)
    }

    /// The whole message (LangChain's `message_chunk_to_message`): an AI message with the
    /// tool calls parsed from the pieces.
    pub fn into_message(self) -> Message {
        let (tool_calls, invalid_tool_calls) = self.tool_calls();
        Message::Ai {
            fields: self.fields,
            tool_calls,
            invalid_tool_calls,
            usage_metadata: self.usage_metadata,
        }
    }

    /// The fields of the stored form, in `model_dump` order.
    pub(crate) fn data(&self) -> Map {
        let f = &self.fields;
        let (calls, invalid) = self.tool_calls();
        let mut m = Map::new();
        m.insert("content", f.content.clone());
        m.insert("additional_kwargs", Value::Map(f.additional_kwargs.clone()));
        m.insert("response_metadata", Value::Map(f.response_metadata.clone()));
        m.insert("type", "AIMessageChunk");
        m.insert("name", f.name.clone());
        m.insert("id", f.id.clone());
        m.insert(
            "tool_calls",
            Value::List(calls.iter().map(ToolCall::to_value).collect()),
        );
        m.insert("invalid_tool_calls", Value::from(invalid));
        m.insert("usage_metadata", self.usage_metadata.clone());
        m.insert(
            "tool_call_chunks",
            Value::List(
                self.tool_call_chunks
                    .iter()
                    .map(ToolCallChunk::to_value)
                    .collect(),
            ),
        );
        m.insert("chunk_position", self.chunk_position.clone());
        for (k, v) in &f.extra {
            m.insert(k.as_str(), v.clone());
        }
        m
    }

    /// The stored form: what Python stores for the same `AIMessageChunk`.
    pub fn to_value(&self) -> Value {
        Value::Ext(Ext::from_py_object(
            ExtCode::PydanticV2,
            &PyObject::new(
                "langchain_core.messages.ai",
                "AIMessageChunk",
                Value::Map(self.data()),
            )
            .with_method("model_validate_json"),
        ))
    }

    /// The same piece with an id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.fields.id = Some(id.into());
        self
    }

    /// A stored chunk from its common fields, whose `extra` still holds the chunk's own.
    pub(crate) fn from_fields(mut fields: MessageFields) -> Self {
        let mut rest = std::mem::take(&mut fields.extra);
        let mut chunk = Self {
            fields,
            ..Self::default()
        };
        rest.retain(|(k, v)| {
            match k.as_str() {
                "tool_call_chunks" => {
                    chunk.tool_call_chunks = v
                        .as_list()
                        .unwrap_or_default()
                        .iter()
                        .map(ToolCallChunk::from_value)
                        .collect()
                }
                "usage_metadata" => chunk.usage_metadata = v.clone(),
                "chunk_position" => chunk.chunk_position = v.as_str().map(str::to_owned),
                // Derived from the pieces.
                "tool_calls" | "invalid_tool_calls" => {}
                _ => return true,
            }
            false
        });
        chunk.fields.extra = rest;
        chunk
    }
}

/// The text of a content: a string, or the `text` of a list's text blocks (and its strings).
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::Str(s) => s.to_string(),
        Value::List(items) => items
            .iter()
            .filter_map(|b| match b {
                Value::Str(s) => Some(s.to_string()),
                Value::Map(m) if m.get("type").and_then(Value::as_str) == Some("text") => {
                    m.get("text").and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

fn concat_opt(left: &mut Option<String>, right: Option<String>) {
    match (left.as_mut(), right) {
        (Some(l), Some(r)) => l.push_str(&r),
        (None, r) => *left = r,
        (Some(_), None) => {}
    }
}

/// LangChain's id choice when pieces add up: a provider's id, else a run id (`lc_run-`),
/// else any other.
fn best_id(left: Option<String>, right: Option<String>) -> Option<String> {
    let rank = |id: &Option<String>| match id.as_deref() {
        None | Some("") => -1,
        Some(s) if s.starts_with("lc_run-") => 1,
        Some(s) if s.starts_with("lc_") => 0,
        Some(_) => 2,
    };
    if rank(&right) > rank(&left) {
        right
    } else {
        left
    }
}

/// LangChain's `merge_content`.
fn merge_content(left: Value, right: Value) -> Value {
    match (left, right) {
        (Value::Null, r) => r,
        (l, Value::Null) => l,
        (Value::Str(l), Value::Str(r)) => Value::from(format!("{l}{r}")),
        (Value::Str(l), Value::List(r)) => {
            let mut items = vec![Value::Str(l)];
            items.extend(r.iter().cloned());
            Value::from(items)
        }
        (Value::List(l), Value::List(r)) => Value::from(merge_lists(l.to_vec(), r.to_vec())),
        (Value::List(l), Value::Str(r)) => {
            let mut items = l.to_vec();
            match items.last_mut() {
                Some(Value::Str(last)) => *last = format!("{last}{r}").into(),
                _ if r.is_empty() => {}
                _ => items.push(Value::Str(r)),
            }
            Value::from(items)
        }
        (_, r) => r,
    }
}

/// LangChain's `merge_lists`: items with the same `index` merge, others are appended.
fn merge_lists(mut left: Vec<Value>, right: Vec<Value>) -> Vec<Value> {
    for item in right {
        let index = item.as_map().and_then(|m| m.get("index")).cloned();
        let slot = index.as_ref().and_then(|i| {
            left.iter_mut().find(|l| {
                l.as_map().and_then(|m| m.get("index")) == Some(i)
                    && ids_agree(l.as_map(), item.as_map())
            })
        });
        match (slot, item) {
            (Some(Value::Map(l)), Value::Map(r)) => {
                // As LangChain's `merge_lists`: the block keeps the first piece's `type`.
                let mut rest = r.clone();
                rest.remove("type");
                if merge_maps(l, rest).is_err() {
                    left.push(Value::Map(r));
                }
            }
            (_, item) => left.push(item),
        }
    }
    left
}

fn map_id(m: Option<&Map>) -> Option<&str> {
    m.and_then(|m| m.get("id")).and_then(Value::as_str)
}

fn ids_agree(l: Option<&Map>, r: Option<&Map>) -> bool {
    match (map_id(l), map_id(r)) {
        (None | Some(""), _) | (_, None | Some("")) => true,
        (a, b) => a == b,
    }
}

/// LangChain's `merge_dicts` of `right` into `left`.
fn merge_maps(left: &mut Map, right: Map) -> Result<(), ChunkMergeError> {
    for (k, r) in right {
        let Some(key) = k.as_str().map(str::to_owned) else {
            continue;
        };
        let merged = match (left.get(&key).cloned(), r) {
            (None | Some(Value::Null), r) => r,
            (Some(l), Value::Null) => l,
            (Some(Value::Str(l)), Value::Str(r)) => {
                let keep = (key == "index" && l.starts_with("lc_"))
                    || (matches!(key.as_str(), "id" | "output_version" | "model_provider")
                        && l == r);
                if keep {
                    Value::Str(l)
                } else {
                    Value::from(format!("{l}{r}"))
                }
            }
            (Some(Value::Map(mut l)), Value::Map(r)) => {
                merge_maps(&mut l, r)?;
                Value::Map(l)
            }
            (Some(Value::List(l)), Value::List(r)) => {
                Value::from(merge_lists(l.to_vec(), r.to_vec()))
            }
            (Some(l), r) if l == r => l,
            (Some(Value::Int(l)), Value::Int(r)) => {
                if matches!(key.as_str(), "index" | "created" | "timestamp") {
                    Value::Int(r)
                } else {
                    Value::Int(l.saturating_add(r))
                }
            }
            (Some(l), r) => {
                return Err(ChunkMergeError(format!(
                    "key `{key}` holds {} in one piece and {} in the next",
                    l.kind(),
                    r.kind()
                )));
            }
        };
        left.insert(key, merged);
    }
    Ok(())
}

/// LangChain's `add_usage`: token counts (and their details) summed.
fn add_usage(left: Value, right: Value) -> Value {
    match (left, right) {
        (Value::Null, r) => r,
        (l, Value::Null) => l,
        (Value::Int(l), Value::Int(r)) => Value::Int(l.saturating_add(r)),
        (Value::Map(mut l), Value::Map(r)) => {
            for (k, v) in r {
                let Some(key) = k.as_str().map(str::to_owned) else {
                    continue;
                };
                let sum = add_usage(l.get(&key).cloned().unwrap_or(Value::Null), v);
                l.insert(key, sum);
            }
            Value::Map(l)
        }
        (_, r) => r,
    }
}

/// Reads JSON that may have been cut off (LangChain's `parse_partial_json`): open strings,
/// arrays and objects are closed, and what cannot be completed is dropped from the end.
/// `None` when the text is not the start of a JSON value.
pub fn parse_partial_json(text: &str) -> Option<serde_json::Value> {
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let mut chars: Vec<char> = Vec::with_capacity(text.len() + 8);
    let mut closers = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        let mut out = c;
        if in_string {
            if c == '"' && !escaped {
                in_string = false;
            } else if c == '\n' && !escaped {
                chars.extend(['\\', 'n']);
                continue;
            } else if c == '\\' {
                escaped = !escaped;
            } else {
                escaped = false;
            }
        } else {
            match c {
                '"' => {
                    in_string = true;
                    escaped = false;
                }
                '{' => closers.push('}'),
                '[' => closers.push(']'),
                '}' | ']' => {
                    if closers.last() == Some(&c) {
                        closers.pop();
                    } else {
                        return None;
                    }
                }
                _ => {}
            }
            out = c;
        }
        chars.push(out);
    }
    if in_string {
        if escaped {
            chars.pop();
        }
        chars.push('"');
    }
    let tail: String = closers.iter().rev().collect();
    while !chars.is_empty() {
        let candidate: String = chars.iter().collect::<String>() + &tail;
        if let Ok(v) = serde_json::from_str(&candidate) {
            return Some(v);
        }
        chars.pop();
    }
    None
}

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
