//! A streamed answer of typed server-sent events (Anthropic's Messages API, OpenAI's
//! Responses API) read into message pieces: one event at a time within an idle timeout, a
//! provider's parser turning each into zero or more pieces, and LangChain's closing empty
//! piece when the provider's own last piece was not marked `chunk_position: "last"`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use stategraph_checkpoint::Value;
use stategraph_messages::AiMessageChunk;

use crate::error::{Error, Result};
use crate::model::ChunkStream;

/// A provider's reading of its stream's events.
pub(crate) trait EventParser: Send + 'static {
    /// The event that ends an answer (`message_stop`, `response.completed`), for errors.
    const LAST_EVENT: &'static str;

    /// The pieces event `n` (1-based) gives, often none. `name` is the SSE event name (empty
    /// when the server sends none) and `data` its data, neither empty nor `[DONE]`.
    fn parse(&mut self, url: &str, n: usize, name: &str, data: &str)
    -> Result<Vec<AiMessageChunk>>;

    /// Whether the answer's last event has come (reading stops there).
    fn finished(&self) -> bool;

    /// The id a closing piece carries.
    fn id(&self) -> String;
}

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

struct Reader<P> {
    events: Events,
    parser: P,
    url: String,
    idle: Duration,
    /// Events read so far (for error positions).
    seen: usize,
    pending: VecDeque<AiMessageChunk>,
    /// Whether the last piece given was marked last, and whether its content was text.
    last: Option<(bool, bool)>,
    done: bool,
}

/// The pieces of the answer `response` streams, read by `parser`; errors end the stream.
pub(crate) fn chunks<P: EventParser>(
    response: reqwest::Response,
    url: String,
    idle: Duration,
    parser: P,
) -> ChunkStream {
    let reader = Reader {
        events: Box::pin(response.bytes_stream().eventsource()),
        parser,
        url,
        idle,
        seen: 0,
        pending: VecDeque::new(),
        last: None,
        done: false,
    };
    futures_util::stream::unfold(reader, |mut r| async move {
        loop {
            if let Some(piece) = r.pending.pop_front() {
                r.last = Some((
                    piece.chunk_position.as_deref() == Some("last"),
                    matches!(piece.fields.content, Value::Str(_)),
                ));
                return Some((Ok(piece), r));
            }
            if r.done {
                return None;
            }
            if r.parser.finished() {
                r.done = true;
                r.close();
                continue;
            }
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
                    r.done = true;
                    let e = Error::Connect {
                        url: r.url.clone(),
                        message: format!(
                            "the stream ended after {} events without `{}`",
                            r.seen - 1,
                            P::LAST_EVENT
                        ),
                        attempts: 1,
                    };
                    return Some((Err(e), r));
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
            if data.is_empty() || data == "[DONE]" {
                continue;
            }
            match r.parser.parse(&r.url, r.seen, &event.event, data) {
                Ok(pieces) => r.pending.extend(pieces),
                Err(e) => {
                    r.done = true;
                    return Some((Err(e), r));
                }
            }
        }
    })
    .boxed()
}

impl<P: EventParser> Reader<P> {
    /// LangChain's closing piece: an empty one marked last, unless the provider's last piece
    /// was (its content empty text or an empty list, as the piece before).
    fn close(&mut self) {
        let Some((marked, text)) = self.last else {
            return;
        };
        if marked {
            return;
        }
        let mut piece = AiMessageChunk::text_piece("").with_id(self.parser.id());
        if !text {
            piece.fields.content = Value::List(Vec::new().into());
        }
        piece.chunk_position = Some("last".into());
        self.pending.push_back(piece);
    }
}

/// The position of a JSON error in one event's data, as `event N, byte B`.
pub(crate) fn event_path(n: usize, data: &str, e: &serde_json::Error) -> String {
    let mut line = 1;
    let mut offset = data.len();
    for (i, b) in data.bytes().enumerate() {
        if line == e.line() {
            offset = (i + e.column().saturating_sub(1)).min(data.len());
            break;
        }
        if b == b'\n' {
            line += 1;
        }
    }
    format!("event {n}, byte {offset}")
}

/// A provider's error event (`{"error": {"message": …}}`, Anthropic's and OpenAI's) as a
/// message, if the data is one.
pub(crate) fn error_message(json: &serde_json::Value) -> Option<String> {
    let e = json.get("error").filter(|e| !e.is_null())?;
    let message = e
        .get("message")
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| e.to_string(), str::to_owned);
    Some(match e.get("type").and_then(serde_json::Value::as_str) {
        Some(kind) => format!("{kind}: {message}"),
        None => message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_positions_and_messages() {
        let data = "{\"a\":\n x}";
        let e = serde_json::from_str::<serde_json::Value>(data).unwrap_err();
        assert_eq!(event_path(3, data, &e), "event 3, byte 7");
        let j = serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            error_message(&j).as_deref(),
            Some("overloaded_error: Overloaded")
        );
        assert_eq!(error_message(&serde_json::json!({"error": null})), None);
    }
}
