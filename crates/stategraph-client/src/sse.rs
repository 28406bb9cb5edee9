//! A streamed run's server-sent events, read as [`StreamPart`]s.

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::Value as Json;

use crate::client::RunEvents;
use crate::error::ClientError;
use crate::types::StreamPart;

/// An error's text with its causes (reqwest's own says little: "error sending request").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// An error answer's `detail` (the API's), else its body.
pub(crate) fn detail(body: &[u8]) -> String {
    serde_json::from_slice::<Json>(body)
        .ok()
        .and_then(|j| {
            j.get("detail")
                .map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_owned))
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

/// A request that could not be sent or answered (`method` `url`), with its causes.
pub(crate) fn connect_error(method: &'static str, url: &str, e: &reqwest::Error) -> ClientError {
    ClientError::Connect {
        method,
        url: url.to_owned(),
        message: chain(e),
    }
}

/// Sends `request` (`method` `url`): its response when the status is a success, else
/// [`ClientError::Status`] with the server's `detail`.
pub(crate) async fn checked(
    method: &'static str,
    url: &str,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ClientError> {
    let response = request
        .send()
        .await
        .map_err(|e| connect_error(method, url, &e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| connect_error(method, url, &e))?;
    Err(ClientError::Status {
        method,
        url: url.to_owned(),
        status: status.as_u16(),
        detail: detail(&body),
    })
}

/// The events of the run `request` starts (at `url`); its `error` event, an error status
/// or a broken connection end the stream with an error.
pub(crate) fn events(request: reqwest::RequestBuilder, url: String) -> RunEvents {
    let start = async move {
        let response = checked("POST", &url, request).await?;
        Ok((response, url))
    };
    futures_util::stream::once(start)
        .flat_map(|started| match started {
            Err(e) => crate::client::failed(e),
            Ok((response, url)) => parts(response, url),
        })
        .boxed()
}

/// The parts of an event stream; the first error ends it.
fn parts(response: reqwest::Response, url: String) -> RunEvents {
    let mut seen = 0usize;
    let mut done = false;
    response
        .bytes_stream()
        .eventsource()
        .filter_map(move |event| {
            seen += 1;
            let item = if done {
                None
            } else {
                match event {
                    Err(e) => Some(Err(ClientError::Connect {
                        method: "POST",
                        url: url.clone(),
                        message: format!("the stream broke after {} events: {e}", seen - 1),
                    })),
                    Ok(e) if e.event.is_empty() && e.data.trim().is_empty() => None,
                    Ok(e) => Some(part(&url, seen, e.event, &e.data)),
                }
            };
            if item.as_ref().is_some_and(Result::is_err) {
                done = true;
            }
            std::future::ready(item)
        })
        .boxed()
}

/// Event `n` (`name`, `data`) as a part; an `error` event as [`ClientError::Run`].
fn part(url: &str, n: usize, name: String, data: &str) -> Result<StreamPart, ClientError> {
    let data: Json = match data.trim() {
        "" => Json::Null,
        text => serde_json::from_str(text).map_err(|e| ClientError::Decode {
            url: url.to_owned(),
            at: format!("event {n} (`{name}`)"),
            problem: e.to_string(),
        })?,
    };
    if name == "error" {
        let text = |key: &str| {
            data.get(key)
                .and_then(Json::as_str)
                .map(str::to_owned)
                .unwrap_or_default()
        };
        return Err(ClientError::Run {
            url: url.to_owned(),
            error: text("error"),
            message: text("message"),
        });
    }
    Ok(StreamPart { event: name, data })
}
