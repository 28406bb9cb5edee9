//! An MCP tool result as a tool message's content, block for block as langchain-mcp-adapters
//! converts it, so that a thread written here reads the same in Python.

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{Value, uuid4};

use crate::error::Error;
use crate::tool::ToolOutput;

/// A LangChain content block id, as LangChain makes one when none is given (`lc_` and a
/// random UUID).
fn block_id() -> String {
    format!("lc_{}", uuid4())
}

fn text_block(text: &Json) -> Json {
    json!({"type": "text", "text": text, "id": block_id()})
}

/// An image or file block: `kind` `"image"` or `"file"`, the data under `source` (`"url"` or
/// `"base64"`), the MIME type when known.
fn data_block(kind: &str, source: &str, data: &Json, mime: Option<&Json>) -> Json {
    let mut block = serde_json::Map::new();
    block.insert("type".into(), json!(kind));
    block.insert("id".into(), json!(block_id()));
    block.insert(source.into(), data.clone());
    if let Some(m) = mime.filter(|m| m.as_str().is_some_and(|s| !s.is_empty())) {
        block.insert("mime_type".into(), m.clone());
    }
    Json::Object(block)
}

/// Whether a MIME type names an image.
fn is_image(mime: Option<&Json>) -> bool {
    mime.and_then(Json::as_str)
        .is_some_and(|m| m.starts_with("image/"))
}

/// One MCP content block (as the wire has it) as a LangChain content block; `at` says where
/// it was, for the error about one that cannot be converted.
fn block(content: &Json, at: usize) -> Result<Json, String> {
    let field = |name: &str| content.get(name).filter(|v| !v.is_null());
    let required = |name: &str| field(name).ok_or_else(|| format!("content[{at}] has no `{name}`"));
    match content.get("type").and_then(Json::as_str) {
        Some("text") => Ok(text_block(required("text")?)),
        Some("image") => Ok(data_block(
            "image",
            "base64",
            required("data")?,
            field("mimeType"),
        )),
        // LangChain has a standard audio block; langchain-mcp-adapters 0.3.2 refuses audio.
        Some("audio") => Ok(data_block(
            "audio",
            "base64",
            required("data")?,
            field("mimeType"),
        )),
        Some("resource_link") => {
            let kind = if is_image(field("mimeType")) {
                "image"
            } else {
                "file"
            };
            Ok(data_block(kind, "url", required("uri")?, field("mimeType")))
        }
        Some("resource") => {
            let resource = required("resource")?;
            let mime = resource.get("mimeType").filter(|v| !v.is_null());
            if let Some(text) = resource.get("text").filter(|v| v.is_string()) {
                Ok(text_block(text))
            } else if let Some(blob) = resource.get("blob").filter(|v| v.is_string()) {
                let kind = if is_image(mime) { "image" } else { "file" };
                Ok(data_block(kind, "base64", blob, mime))
            } else {
                Err(format!(
                    "content[{at}] is a resource with neither `text` nor `blob`"
                ))
            }
        }
        Some(other) => Err(format!("content[{at}] is of unknown type `{other}`")),
        None => Err(format!("content[{at}] has no `type`")),
    }
}

/// The text of an error result: its text blocks joined by newlines, or a summary.
fn error_text(blocks: &[Json]) -> String {
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Json::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Json::as_str))
        .collect();
    if !texts.is_empty() {
        texts.join("\n")
    } else if blocks.is_empty() {
        "MCP tool returned an error with empty content.".to_owned()
    } else {
        format!(
            "MCP tool returned an error with no text content ({} non-text content block(s)).",
            blocks.len()
        )
    }
}

/// A `tools/call` result (its JSON) as the tool's output: the content blocks, and
/// `{"structured_content": …}` as the artifact when the result has structured content. An
/// `isError` result is [`Error::ToolResult`] (its content, or one text block saying it had
/// none). `Err(message)` when a block cannot be converted.
pub(crate) fn tool_output(tool: &str, result: &Json) -> Result<Result<ToolOutput, Error>, String> {
    let blocks = match result.get("content") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, c)| block(c, at))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("`content` is not a list".into()),
    };
    if result.get("isError").and_then(Json::as_bool) == Some(true) {
        let message = error_text(&blocks);
        let content = if blocks.is_empty() {
            vec![text_block(&json!(message))]
        } else {
            blocks
        };
        return Ok(Err(Error::ToolResult {
            tool: tool.to_owned(),
            message,
            content: Value::from(Json::Array(content)),
        }));
    }
    let artifact = match result.get("structuredContent") {
        None => Value::Null,
        Some(s) => Value::from(json!({ "structured_content": s })),
    };
    Ok(Ok(ToolOutput {
        content: Value::from(Json::Array(blocks)),
        artifact,
        command: None,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn without_ids(v: &Value) -> Json {
        let mut j = v.to_json();
        for b in j.as_array_mut().unwrap() {
            let id = b.as_object_mut().unwrap().remove("id").unwrap();
            assert!(id.as_str().unwrap().starts_with("lc_"));
        }
        j
    }

    #[test]
    fn blocks_convert_as_the_adapters_convert_them() {
        let result = json!({"content": [
            {"type": "text", "text": "hi", "annotations": {"priority": 1}},
            {"type": "image", "data": "AAA=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.png", "name": "a", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "x:1", "text": "inline"}},
            {"type": "resource", "resource": {"uri": "x:2", "blob": "BBB=", "mimeType": "application/gzip"}},
        ], "structuredContent": {"t": 1}});
        let out = tool_output("t", &result).unwrap().unwrap();
        assert_eq!(
            without_ids(&out.content),
            json!([
                {"type": "text", "text": "hi"},
                {"type": "image", "base64": "AAA=", "mime_type": "image/png"},
                {"type": "image", "url": "file:///a.png", "mime_type": "image/png"},
                {"type": "file", "url": "file:///a.txt"},
                {"type": "text", "text": "inline"},
                {"type": "file", "base64": "BBB=", "mime_type": "application/gzip"},
            ])
        );
        assert_eq!(
            out.artifact.to_json(),
            json!({"structured_content": {"t": 1}})
        );
    }

    #[test]
    fn error_results_keep_their_content_and_say_what_it_was() {
        let err = tool_output(
            "t",
            &json!({"isError": true, "content": [
            {"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}),
        )
        .unwrap()
        .unwrap_err();
        let Error::ToolResult {
            message, content, ..
        } = err
        else {
            panic!("{err}")
        };
        assert_eq!(message, "one\ntwo");
        assert_eq!(without_ids(&content).as_array().unwrap().len(), 2);
        let empty = tool_output("t", &json!({"isError": true, "content": []}))
            .unwrap()
            .unwrap_err();
        let Error::ToolResult {
            message, content, ..
        } = empty
        else {
            panic!("{empty}")
        };
        assert_eq!(message, "MCP tool returned an error with empty content.");
        assert_eq!(
            without_ids(&content),
            json!([{"type": "text", "text": message}])
        );
    }

    #[test]
    fn a_block_that_cannot_be_converted_is_named() {
        let bad = tool_output(
            "t",
            &json!({"content": [{"type": "text", "text": "a"}, {"type": "video"}]}),
        );
        assert_eq!(bad.unwrap_err(), "content[1] is of unknown type `video`");
    }
}
