//! A2A parts as a graph's input: text, data and file parts as LangChain content blocks, and the\nresume value of an interrupted task.

use super::*;

/// Why a client's parts cannot be a run's input.
pub(crate) type PartError = String;

/// A client's message parts as a run's input: text parts each a human (or, for an agent's
/// message, assistant) message, or — when files are among them — one message whose content
/// is the ordered text and media blocks; data parts (objects) merged into the input's keys.
/// Each message has the client's `message_id` and carries `stamp` as `additional_kwargs.a2a`
/// when it is not empty.
pub(crate) fn input_of(
    parts: &[Json],
    role: Role,
    message_id: &str,
    stamp: &Object,
) -> Result<Object, PartError> {
    let role_name = match role {
        Role::User => "human",
        Role::Agent => "assistant",
    };
    let has_files = parts.iter().any(is_file_part);
    let mut messages = Vec::new();
    let mut blocks = Vec::new();
    let mut data = Object::new();
    for part in parts {
        let Some(p) = part.as_object() else {
            return Err(
                "Each message part must be an object. A2A agents support 'text', \
                        'data', and 'file' parts only."
                    .into(),
            );
        };
        let present: Vec<&str> = ["text", "file", "raw", "url", "data"]
            .into_iter()
            .filter(|k| p.contains_key(*k))
            .collect();
        if present.len() > 1 {
            return Err(format!(
                "Each message part must contain exactly one of 'text', 'file', or 'data'. \
                 Got multiple: {}.",
                py_list(&present)
            ));
        }
        if let Some(text) = p.get("text") {
            if has_files {
                blocks.push(json!({ "type": "text", "text": text }));
            } else {
                messages.push(json!({ "role": role_name, "content": text, "id": message_id }));
            }
        } else if is_file_part(part) {
            blocks.push(file_block(p)?);
        } else if let Some(d) = p.get("data") {
            let Json::Object(d) = d else {
                return Err("DataPart must contain a JSON object in the 'data' field".into());
            };
            data.extend(d.clone());
        } else {
            return Err(
                "Unsupported part type. A2A agents support 'text', 'data', and 'file' parts \
                 only."
                    .into(),
            );
        }
    }
    if has_files {
        messages.push(json!({ "role": role_name, "content": blocks, "id": message_id }));
    }
    if !stamp.is_empty() {
        for m in &mut messages {
            set(m, "additional_kwargs", json!({ "a2a": stamp }));
        }
    }
    if messages.is_empty() && data.is_empty() {
        return Err("Message must contain at least one valid text, data, or file part".into());
    }
    let mut input = Object::new();
    if !messages.is_empty() {
        input.insert("messages".into(), Json::Array(messages));
    }
    input.extend(data);
    Ok(input)
}

/// Whether a part is a file: A2A 0.3's `{"file": {…}}`, or 1.0's `{"raw": …}` / `{"url": …}`.
pub(super) fn is_file_part(part: &Json) -> bool {
    part.as_object()
        .is_some_and(|p| ["file", "raw", "url"].iter().any(|k| p.contains_key(*k)))
}

/// A block type for a MIME type: `image`, `audio` or `video` by its top-level type, else
/// `file`.
pub(super) fn block_type(mime: Option<&str>) -> &'static str {
    match mime
        .and_then(|m| m.split('/').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some("image") => "image",
        Some("audio") => "audio",
        Some("video") => "video",
        _ => "file",
    }
}

/// A file part as a LangChain content block (`base64` or `url`, never fetched here).
pub(super) fn file_block(part: &Object) -> Result<Json, PartError> {
    let (bytes, uri, mime, name) = match part.get("file") {
        Some(Json::Object(f)) => (
            f.get("bytes"),
            f.get("uri"),
            f.get("mimeType"),
            f.get("name"),
        ),
        Some(_) => {
            return Err("FilePart must contain a 'file' object with 'bytes' or 'uri'.".into());
        }
        None => (
            part.get("raw"),
            part.get("url"),
            part.get("mediaType"),
            part.get("filename"),
        ),
    };
    let (bytes, uri) = (bytes.filter(|v| !v.is_null()), uri.filter(|v| !v.is_null()));
    let mime = mime.and_then(Json::as_str).filter(|m| !m.is_empty());
    let mut block = Object::new();
    block.insert("type".into(), json!(block_type(mime)));
    match (bytes, uri) {
        (None, None) => return Err("FilePart 'file' must contain either 'bytes' or 'uri'.".into()),
        (Some(_), Some(_)) => {
            return Err("FilePart 'file' must contain only one of 'bytes' or 'uri'.".into());
        }
        (Some(b), None) => {
            block.insert("base64".into(), b.clone());
        }
        (None, Some(u)) => {
            block.insert("url".into(), u.clone());
        }
    }
    if let Some(m) = mime {
        block.insert("mime_type".into(), json!(m));
    }
    if let Some(n) = name.and_then(Json::as_str).filter(|n| !n.is_empty()) {
        block.insert("extras".into(), json!({ "filename": n }));
    }
    Ok(Json::Object(block))
}

/// The text of a client's parts (joined by newlines), if any: a resume value.
pub(crate) fn parts_text(parts: &[Json]) -> Option<String> {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Json::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The `resume` value of the client's data parts, if one has it; an error if several do.
pub(crate) fn parts_resume(parts: &[Json]) -> Result<Option<Json>, String> {
    let values: Vec<&Json> = parts
        .iter()
        .filter_map(|p| p.get("data").and_then(Json::as_object))
        .filter_map(|d| d.get("resume"))
        .collect();
    match values.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        _ => Err("Only one resume value is allowed in data parts".into()),
    }
}
