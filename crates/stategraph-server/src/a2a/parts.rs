//! A2A message parts and LangChain messages, both ways: a client's parts become the run's
//! input (text and files as one human message, data parts as input keys); the thread's
//! messages become the task's history and its answer (the last agent message of the turn).
//!
//! Parts are built in one internal form (`kind`-tagged, roles `ROLE_*`, file parts as
//! `{"kind": "file", "file": {…}}`); [`super::Dialect`] renders them for the caller.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value as Json, json};

mod input;
pub(crate) use input::*;

/// A JSON object.
pub(super) type Object = Map<String, Json>;

/// The A2A role of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// `ROLE_USER`: a human turn.
    User,
    /// `ROLE_AGENT`: the assistant's.
    Agent,
}

impl Role {
    /// Its name in A2A 1.0.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Role::User => "ROLE_USER",
            Role::Agent => "ROLE_AGENT",
        }
    }
}

/// A message's `type`/`role` label, lowercased without `_` and `-` (`AIMessageChunk` →
/// `aimessagechunk`).
fn label(v: Option<&Json>) -> String {
    v.and_then(Json::as_str)
        .map(|s| s.to_lowercase().replace(['_', '-'], ""))
        .unwrap_or_default()
}

/// The A2A role of a LangChain message: human and AI messages (by `type` or `role`); `None`
/// for system and tool messages and for a message whose type and role disagree.
pub(super) fn role_of(message: &Object) -> Option<Role> {
    let by_type = match label(message.get("type")).as_str() {
        "" | "chat" | "chatmessage" | "chatmessagechunk" => None,
        "human" | "humanmessage" | "humanmessagechunk" => Some(Role::User),
        "ai" | "aimessage" | "aimessagechunk" => Some(Role::Agent),
        _ => return None,
    };
    let by_role = match label(message.get("role")).as_str() {
        "" => None,
        "human" | "user" => Some(Role::User),
        "agent" | "assistant" => Some(Role::Agent),
        _ => return None,
    };
    match (by_type, by_role) {
        (Some(a), Some(b)) if a != b => None,
        (a, b) => a.or(b),
    }
}

/// Names as a Python list shows them (`['a', 'b']`), as LangGraph's messages quote them.
pub(super) fn py_list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{}'", n.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

/// Sets `key` of `object` (nothing when it is not an object).
pub(super) fn set(object: &mut Json, key: &str, value: Json) {
    if let Some(o) = object.as_object_mut() {
        o.insert(key.to_owned(), value);
    }
}

/// A text part.
pub(super) fn text_part(text: impl Into<String>) -> Json {
    json!({ "kind": "text", "text": text.into() })
}

/// A message's content as text: a string as it is, the text blocks of a list joined.
pub(super) fn content_text(content: &Json) -> String {
    match content {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        Json::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Json::String(s) => Some(s.as_str()),
                Json::Object(o) if o.get("type").and_then(Json::as_str) == Some("text") => {
                    o.get("text").and_then(Json::as_str)
                }
                _ => None,
            })
            .collect(),
        other => other.to_string(),
    }
}

/// The content block types that carry media.
const MEDIA_BLOCKS: [&str; 4] = ["audio", "file", "image", "video"];

/// A media content block as a file part (`bytes` re-encoded as standard base64, or `uri`),
/// or why it cannot be one.
fn media_part(block: &Object) -> Result<Json, String> {
    let (source, value) = ["base64", "data", "url"]
        .into_iter()
        .find_map(|k| block.get(k).filter(|v| !v.is_null()).map(|v| (k, v)))
        .ok_or("Media content blocks must contain 'base64', 'data', or 'url'.")?;
    let mut file = Object::new();
    if source == "url" {
        match value.as_str() {
            Some(url) if !url.is_empty() => file.insert("uri".into(), json!(url)),
            _ => return Err("Media content block 'url' must be a non-empty string.".into()),
        };
    } else {
        let text = value.as_str().ok_or_else(|| {
            format!("Media content block '{source}' must be base64-encoded text or bytes.")
        })?;
        let compact: String = text.split_whitespace().collect();
        let decoded = decode_base64(&compact).ok_or_else(|| {
            format!("Media content block '{source}' must contain valid base64 data.")
        })?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(decoded);
        file.insert("bytes".into(), json!(encoded));
    }
    match block.get("mime_type") {
        None | Some(Json::Null) => {}
        Some(Json::String(m)) if m.is_empty() => {}
        Some(Json::String(m)) => {
            file.insert("mimeType".into(), json!(m));
        }
        Some(_) => return Err("Media content block 'mime_type' must be a string.".into()),
    }
    let filename = match block.get("filename") {
        None | Some(Json::Null) => block
            .get("extras")
            .and_then(|e| e.get("filename"))
            .filter(|f| !f.is_null()),
        some => some,
    };
    match filename {
        None => {}
        Some(Json::String(f)) if f.is_empty() => {}
        Some(Json::String(f)) => {
            file.insert("name".into(), json!(f));
        }
        Some(_) => return Err("Media content block filename must be a string.".into()),
    }
    Ok(json!({ "kind": "file", "file": file }))
}

/// Base64 in the standard or the URL-safe alphabet, padded or not.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let bare = text.trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(bare)
        .or_else(|_| URL_SAFE_NO_PAD.decode(bare))
        .ok()
}

/// A message's content as parts: text runs joined into one text part, media blocks as file
/// parts, other blocks left out; or why the content cannot be parts (a malformed media
/// block).
pub(super) fn content_parts(content: &Json) -> Result<Vec<Json>, String> {
    let blocks = match content {
        Json::String(s) => return Ok(vec![text_part(s.clone())]),
        Json::Null => return Ok(Vec::new()),
        Json::Array(blocks) => blocks,
        other => return Ok(vec![text_part(other.to_string())]),
    };
    let mut parts = Vec::new();
    let mut text = String::new();
    let flush = |text: &mut String, parts: &mut Vec<Json>| {
        if !text.is_empty() {
            parts.push(text_part(std::mem::take(text)));
        }
    };
    for block in blocks {
        match block {
            Json::String(s) => text.push_str(s),
            Json::Object(o) => match o.get("type").and_then(Json::as_str) {
                Some("text") => {
                    if let Some(t) = o.get("text").and_then(Json::as_str) {
                        text.push_str(t);
                    }
                }
                Some(kind) if MEDIA_BLOCKS.contains(&kind) => {
                    flush(&mut text, &mut parts);
                    parts.push(media_part(o)?);
                }
                _ => {}
            },
            _ => {}
        }
    }
    flush(&mut text, &mut parts);
    Ok(parts)
}

/// Whether parts carry anything to show (a file, data, or non-empty text).
pub(super) fn has_content(parts: &[Json]) -> bool {
    parts
        .iter()
        .any(|p| match p.get("kind").and_then(Json::as_str) {
            Some("data" | "file") => true,
            Some("text") => p
                .get("text")
                .and_then(Json::as_str)
                .is_some_and(|t| !t.is_empty()),
            _ => false,
        })
}

/// The messages after the last human message: the current turn's.
pub(super) fn current_turn(messages: &[Json]) -> &[Json] {
    match messages
        .iter()
        .rposition(|m| m.as_object().and_then(role_of) == Some(Role::User))
    {
        Some(i) => messages.get(i + 1..).unwrap_or_default(),
        None => messages,
    }
}

/// The answer of a run whose state is `result` (with `__error__` when it failed): the parts
/// of the last agent message with content in `turn` (default: the current turn of its
/// messages), or the result as text when it has no messages.
pub(super) fn answer(result: &Json, turn: Option<&[Json]>) -> Result<Vec<Json>, String> {
    let messages = result
        .get("messages")
        .and_then(Json::as_array)
        .filter(|m| !m.is_empty());
    let Some(messages) = messages.filter(|_| result.get("__error__").is_none()) else {
        return Ok(vec![text_part(result.to_string())]);
    };
    let turn = turn.unwrap_or_else(|| current_turn(messages));
    for message in turn.iter().rev() {
        let Some(m) = message.as_object() else {
            continue;
        };
        if role_of(m) == Some(Role::Agent)
            && let Some(content) = m.get("content")
        {
            let parts = content_parts(content)?;
            if has_content(&parts) {
                return Ok(parts);
            }
        }
    }
    Ok(vec![text_part("")])
}

/// The artifact of a run's answer.
pub(super) fn answer_artifact(parts: Vec<Json>, assistant_id: &str) -> Json {
    json!({
        "artifactId": uuid::Uuid::new_v4().to_string(),
        "name": "Assistant Response",
        "description": format!("Response from assistant {assistant_id}"),
        "parts": parts,
    })
}

/// The artifact of the interrupts a run stopped on: one data part per interrupt.
pub(super) fn interrupt_artifact(interrupts: &[Json]) -> Json {
    let parts: Vec<Json> = interrupts
        .iter()
        .map(|i| {
            let mut data = json!({
                "id": i.get("id").cloned().unwrap_or(Json::Null),
                "value": i.get("value").cloned().unwrap_or(Json::Null),
            });
            if let Some(schema) = i.get("response_schema").filter(|s| !s.is_null()) {
                set(&mut data, "response_schema", schema.clone());
            }
            json!({ "kind": "data", "data": data })
        })
        .collect();
    json!({
        "artifactId": uuid::Uuid::new_v4().to_string(),
        "name": "Interrupt",
        "description": "Agent requires input to continue",
        "parts": parts,
    })
}

/// A tool message's result as data (`{"toolCallId", "content", "name", "status"}`), or
/// `None` for a message that is not one.
fn tool_result(message: &Object) -> Option<Json> {
    let id = message
        .get("tool_call_id")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())?;
    let mut out = Object::new();
    out.insert("toolCallId".into(), json!(id));
    match message.get("content") {
        None | Some(Json::Null) => {}
        Some(Json::String(s)) if s.is_empty() => {}
        Some(c) => {
            out.insert("content".into(), c.clone());
        }
    }
    for key in ["name", "status"] {
        if let Some(v) = message
            .get(key)
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
        {
            out.insert(key.into(), json!(v));
        }
    }
    Some(Json::Object(out))
}

/// Tool results as one data part.
fn tool_results_part(results: Vec<Json>) -> Json {
    json!({ "kind": "data", "data": { "tool_results": results } })
}

/// A `working` status update carrying what a `messages/*` stream event held (`items`: the
/// messages so far): the human and agent text joined, tool results as data. `None` when it
/// holds nothing to show.
pub(super) fn working_update(items: &[Json], task_id: &str, context_id: &str) -> Option<Json> {
    let mut text = String::new();
    let mut results = Vec::new();
    for item in items.iter().filter_map(Json::as_object) {
        if role_of(item).is_none() {
            results.extend(tool_result(item));
            continue;
        }
        text.push_str(&content_text(item.get("content").unwrap_or(&Json::Null)));
    }
    if text.is_empty() && results.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(text_part(text));
    }
    if !results.is_empty() {
        parts.push(tool_results_part(results));
    }
    Some(json!({
        "taskId": task_id,
        "contextId": context_id,
        "kind": "status-update",
        "status": {
            "state": "TASK_STATE_WORKING",
            "message": agent_message(parts, task_id, context_id),
            "timestamp": stategraph_checkpoint::now_iso(),
        },
        "final": false,
    }))
}

/// An agent message of `parts` in a task.
pub(super) fn agent_message(parts: Vec<Json>, task_id: &str, context_id: &str) -> Json {
    json!({
        "kind": "message",
        "role": Role::Agent.as_str(),
        "parts": parts,
        "messageId": uuid::Uuid::new_v4().to_string(),
        "taskId": task_id,
        "contextId": context_id,
    })
}

/// Which of a context's messages a task's history shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// The whole conversation (the default).
    Context,
    /// Only the task's own turns.
    Task,
}

/// How much history, and which.
#[derive(Clone, Copy, Debug)]
pub(super) struct HistoryOptions {
    /// The most messages (the newest); `None`: all.
    pub(super) length: Option<usize>,
    pub(super) scope: Scope,
}

/// The a2a stamp (`additional_kwargs.a2a`) a message carries, if any.
fn stamp(message: &Object) -> Option<&Object> {
    message
        .get("additional_kwargs")
        .and_then(|k| k.get("a2a"))
        .and_then(Json::as_object)
}

fn stamp_str<'a>(stamp: Option<&'a Object>, key: &str) -> Option<&'a str> {
    stamp
        .and_then(|s| s.get(key))
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
}

/// A context's messages as a task's A2A history. A human message stamped with a task (its
/// id, or the id its first run was started with, `ids_by_start` mapping those to task ids)
/// starts that task's turns; the messages before any stamp count as `task_id`'s. System and
/// uncorrelated tool messages are left out; tool results appear as data.
pub(super) fn history(
    messages: &[Json],
    task_id: &str,
    context_id: &str,
    options: HistoryOptions,
    ids_by_start: Option<&HashMap<String, String>>,
) -> Result<Vec<Json>, String> {
    let mut current: Option<String> = match options.scope {
        Scope::Task => None,
        Scope::Context => Some(task_id.to_owned()),
    };
    let mut out = Vec::new();
    for message in messages.iter().filter_map(Json::as_object) {
        let stamp = stamp(message);
        if let Some(id) = stamp_str(stamp, "task_id") {
            let known = ids_by_start.is_none_or(|m| id == task_id || m.values().any(|v| v == id));
            current = known.then(|| id.to_owned());
        } else if let Some(start) = stamp_str(stamp, "task_start_id") {
            match ids_by_start {
                Some(m) => current = m.get(start).cloned(),
                None if options.scope == Scope::Task => current = None,
                None => {}
            }
        }
        let Some(current) = &current else {
            continue;
        };
        let (role, parts) = match role_of(message) {
            None => match tool_result(message) {
                Some(r) => (Role::Agent, vec![tool_results_part(vec![r])]),
                None => continue,
            },
            Some(role) => {
                let mut parts = content_parts(message.get("content").unwrap_or(&json!("")))?;
                if role == Role::Agent && !has_content(&parts) {
                    continue;
                }
                if parts.is_empty() {
                    parts.push(text_part(""));
                }
                (role, parts)
            }
        };
        let id = message
            .get("id")
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        out.push(json!({
            "kind": "message",
            "role": role.as_str(),
            "parts": parts,
            "messageId": id,
            "taskId": current,
            "contextId": context_id,
        }));
    }
    if options.scope == Scope::Task {
        out.retain(|m| m["taskId"] == task_id);
    }
    Ok(match options.length {
        None => out,
        Some(n) => out.split_off(out.len().saturating_sub(n)),
    })
}

#[cfg(test)]
mod tests;
