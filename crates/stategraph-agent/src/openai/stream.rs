//! A streamed answer: server-sent events of `chat.completion.chunk`s, as message pieces.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use serde_json::Value as Json;
use stategraph_checkpoint::uuid4;
use stategraph_messages::{AiMessageChunk, ToolCallChunk};

use super::wire::{decode, usage_metadata};
use crate::error::{Error, Result};
use crate::model::ChunkStream;

type Events = Pin<
    Box<
        dyn Stream<
                Item = std::result::Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<reqwest::Error>,
                >,
            > + Send,
    >,
>;

struct Reader {
    events: Events,
    url: String,
    idle: Duration,
    /// The id every piece of this answer carries (LangChain's run id when the server sends
    /// none).
    id: String,
    /// Events read so far (for error positions).
    seen: usize,
    done: bool,
}

/// The pieces of the answer `response` streams; after the server's last event, a last empty
/// piece with `chunk_position: "last"` (as LangChain's `stream` ends).
pub(super) fn chunks(response: reqwest::Response, url: String, idle: Duration) -> ChunkStream {
    let reader = Reader {
        events: Box::pin(response.bytes_stream().eventsource()),
        url,
        idle,
        id: format!("lc_run--{}", uuid4()),
        seen: 0,
        done: false,
    };
    futures_util::stream::unfold(reader, |mut r| async move {
        if r.done {
            return None;
        }
        loop {
            let next = match tokio::time::timeout(r.idle, r.events.next()).await {
                Ok(next) => next,
                Err(_) => {
                    r.done = true;
                    let e = Error::Timeout {
                        url: r.url.clone(),
                        what: "the next streamed event",
                        after: r.idle,
                        attempts: 1,
                    };
                    return Some((Err(e), r));
                }
            };
            r.seen += 1;
            let event = match next {
                None => {
                    // The server closed the stream (with or without `[DONE]`).
                    r.done = true;
                    let mut last = AiMessageChunk::text_piece("").with_id(r.id.clone());
                    last.chunk_position = Some("last".into());
                    return Some((Ok(last), r));
                }
                Some(Err(e)) => {
                    r.done = true;
                    let e = Error::Connect {
                        url: r.url.clone(),
                        message: format!("the stream broke after {} events: {e}", r.seen - 1),
                        attempts: 1,
                    };
                    return Some((Err(e), r));
                }
                Some(Ok(event)) => event,
            };
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                r.events = Box::pin(futures_util::stream::empty());
                continue;
            }
            let piece =
                parse_event(&r.url, r.seen, data).map(|p| p.map(|p| p.with_id(r.id.clone())));
            match piece {
                Ok(None) => continue,
                Ok(Some(p)) => return Some((Ok(p), r)),
                Err(e) => {
                    r.done = true;
                    return Some((Err(e), r));
                }
            }
        }
    })
    .boxed()
}

/// One event's piece (`None`: an event that carries nothing, such as a choice-less chunk
/// without usage).
fn parse_event(url: &str, n: usize, data: &str) -> Result<Option<AiMessageChunk>> {
    let path = format!("event {n}");
    let json: Json = serde_json::from_str(data).map_err(|e| {
        decode(
            url,
            format!("{path}, byte {}", e.column().saturating_sub(1)),
            format!("not JSON: {e}"),
        )
    })?;
    if let Some(e) = json.get("error") {
        let message = e
            .get("message")
            .and_then(Json::as_str)
            .map_or_else(|| e.to_string(), str::to_owned);
        return Err(decode(
            url,
            path,
            format!("the server sent an error: {message}"),
        ));
    }
    let usage = json
        .get("usage")
        .filter(|u| u.is_object())
        .map(usage_metadata);
    let choice = json.get("choices").and_then(|c| c.get(0));
    let Some(choice) = choice else {
        // The usage-only chunk at the end of a stream with `include_usage`.
        return Ok(usage.map(|u| AiMessageChunk {
            usage_metadata: u,
            ..AiMessageChunk::text_piece("")
        }));
    };
    let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) else {
        return Ok(None);
    };
    let content = match delta.get("content") {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => {
            return Err(decode(
                url,
                format!("{path}.choices[0].delta.content"),
                format!("expected text, found {other}"),
            ));
        }
    };
    let mut piece = AiMessageChunk::text_piece(content);
    if let Some(calls) = delta.get("tool_calls").and_then(Json::as_array) {
        for (i, call) in calls.iter().enumerate() {
            let function = call.get("function");
            let text = |v: Option<&Json>| v.and_then(Json::as_str).map(str::to_owned);
            let index = call.get("index").and_then(Json::as_i64).ok_or_else(|| {
                decode(
                    url,
                    format!("{path}.choices[0].delta.tool_calls[{i}].index"),
                    "missing",
                )
            })?;
            piece.tool_call_chunks.push(ToolCallChunk {
                name: text(function.and_then(|f| f.get("name"))),
                args: text(function.and_then(|f| f.get("arguments"))),
                id: text(call.get("id")),
                index: Some(index),
            });
        }
    }
    let meta = &mut piece.fields.response_metadata;
    if let Some(reason) = choice.get("finish_reason").and_then(Json::as_str) {
        meta.insert("finish_reason", reason);
        if let Some(model) = json.get("model").and_then(Json::as_str) {
            meta.insert("model_name", model);
        }
        if let Some(fp) = json.get("system_fingerprint").and_then(Json::as_str) {
            meta.insert("system_fingerprint", fp);
        }
    }
    meta.insert("model_provider", "openai");
    if let Some(u) = usage {
        piece.usage_metadata = u;
    }
    Ok(Some(piece))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_pieces() {
        let p = parse_event(
            "u",
            1,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}],"model":"m"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.text(), "Hi");
        let p = parse_event(
            "u",
            2,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"f","arguments":"{\"a"}}]}}]}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.tool_call_chunks[0].index, Some(1));
        assert_eq!(p.tool_call_chunks[0].args.as_deref(), Some("{\"a"));
        let usage = parse_event(
            "u",
            3,
            r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#,
        )
        .unwrap()
        .unwrap();
        assert!(!usage.usage_metadata.is_null());
        let err = parse_event("u", 4, r#"{"error":{"message":"overloaded"}}"#).unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
        let err = parse_event("u", 5, "{nope").unwrap_err();
        assert!(err.to_string().contains("event 5"), "{err}");
    }
}
