//! Sending a request to a model provider's HTTP API: authentication, timeouts, retries with
//! backoff (honouring the server's `retry-after` and `x-should-retry`), and the server's error
//! messages — shared by the OpenAI and Anthropic clients.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::error::{Error, Result};

/// The provider a request goes to: how it authenticates and words its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Provider {
    /// `Authorization: Bearer KEY`; errors `{"error": {"message": …}}`.
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    OpenAi,
    /// `x-api-key: KEY` and `anthropic-version`; errors `{"type": "error", "error": {"type",
    /// "message"}}`, shown as `type: message`.
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    Anthropic,
}

/// The `anthropic-version` header's value.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Where and how a client sends its requests.
pub(crate) struct Endpoint<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) url: &'a str,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) backoff: (Duration, Duration),
    pub(crate) provider: Provider,
}

/// Why an attempt failed, and whether another may succeed.
struct Failed {
    error: Error,
    retry: bool,
    /// What the server asked us to wait, if it did.
    after: Option<Duration>,
}

/// A whole (non-streamed) answer's JSON, and how many attempts it took.
pub(crate) async fn complete(
    inner: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<(serde_json::Value, u32)> {
    with_retries(inner, || async {
        let response = send(inner, body).await?;
        let bytes = response.bytes().await.map_err(|e| Failed {
            error: connect_error(inner.url, &e),
            retry: true,
            after: None,
        })?;
        let json = serde_json::from_slice(&bytes).map_err(|e| Failed {
            error: Error::Decode {
                url: inner.url.to_owned(),
                path: format!("byte {}", byte_offset(&bytes, &e)),
                message: format!("the body is not JSON: {e}"),
            },
            retry: false,
            after: None,
        })?;
        Ok(json)
    })
    .await
}

/// A streamed answer's response, once its status says it started.
pub(crate) async fn start_stream(
    inner: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<reqwest::Response> {
    Ok(with_retries(inner, || send(inner, body)).await?.0)
}

/// Runs `attempt` until it succeeds, fails for good, or the retries run out; each attempt
/// within the configured timeout.
async fn with_retries<T, F, Fut>(inner: &Endpoint<'_>, mut attempt: F) -> Result<(T, u32)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failed>>,
{
    let config = inner;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let failed = match tokio::time::timeout(config.timeout, attempt()).await {
            Ok(Ok(t)) => return Ok((t, attempts)),
            Ok(Err(f)) => f,
            Err(_) => Failed {
                error: Error::Timeout {
                    url: inner.url.to_owned(),
                    what: "the response",
                    after: config.timeout,
                    attempts,
                },
                retry: true,
                after: None,
            },
        };
        if !failed.retry || attempts > config.max_retries {
            return Err(with_attempts(failed.error, attempts));
        }
        let wait = failed
            .after
            .unwrap_or_else(|| backoff(config.backoff, attempts));
        tokio::time::sleep(wait).await;
    }
}

/// The backoff before retry `n` (1-based): doubling from `first`, capped, less up to 25 %.
fn backoff((first, max): (Duration, Duration), n: u32) -> Duration {
    let doubled = first.saturating_mul(1u32 << n.saturating_sub(1).min(16));
    doubled.min(max).mul_f64(1.0 - 0.25 * fastrand::f64())
}

fn with_attempts(error: Error, n: u32) -> Error {
    match error {
        Error::Http {
            url,
            status,
            message,
            ..
        } => Error::Http {
            url,
            status,
            message,
            attempts: n,
        },
        Error::Connect { url, message, .. } => Error::Connect {
            url,
            message,
            attempts: n,
        },
        Error::Timeout {
            url, what, after, ..
        } => Error::Timeout {
            url,
            what,
            after,
            attempts: n,
        },
        other => other,
    }
}

/// One request; a response whose status is not a success is a [`Failed`].
async fn send(inner: &Endpoint<'_>, body: &serde_json::Value) -> Result<reqwest::Response, Failed> {
    let mut request = inner.http.post(inner.url).json(body);
    match (inner.provider, inner.api_key) {
        (Provider::OpenAi, Some(key)) => request = request.bearer_auth(key),
        (Provider::OpenAi, None) => {}
        (Provider::Anthropic, key) => {
            request = request.header("anthropic-version", ANTHROPIC_VERSION);
            if let Some(key) = key {
                request = request.header("x-api-key", key);
            }
        }
    }
    let response = request.send().await.map_err(|e| Failed {
        error: connect_error(inner.url, &e),
        retry: true,
        after: None,
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let after = retry_after(response.headers());
    let retry = should_retry(status, response.headers());
    let text = response.text().await.unwrap_or_default();
    Err(Failed {
        error: Error::Http {
            url: inner.url.to_owned(),
            status: status.as_u16(),
            message: error_message(inner.provider, status, &text),
            attempts: 1,
        },
        retry,
        after,
    })
}

/// As the providers' SDKs: the server's `x-should-retry` decides, else 408, 409, 429 and 5xx
/// (Anthropic's 529 "overloaded" among them) are retried.
fn should_retry(status: StatusCode, headers: &HeaderMap) -> bool {
    match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => true,
        Some("false") => false,
        _ => matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error(),
    }
}

fn connect_error(url: &str, e: &reqwest::Error) -> Error {
    // reqwest's Display leaves out the cause (the connection refused, the DNS failure).
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::Connect {
        url: url.to_owned(),
        message,
        attempts: 1,
    }
}

/// The server's own words: `{"error": {"message": …}}` (OpenAI's, llama.cpp's, vLLM's;
/// Anthropic's as `type: message`), else the start of the body, else the status's reason.
fn error_message(provider: Provider, status: StatusCode, body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let e = v.get("error")?;
        let text = e
            .get("message")
            .and_then(serde_json::Value::as_str)
            .or_else(|| e.as_str())?;
        let kind = e.get("type").and_then(serde_json::Value::as_str);
        Some(match (provider, kind) {
            (Provider::Anthropic, Some(kind)) => format!("{kind}: {text}"),
            _ => text.to_owned(),
        })
    });
    match message {
        Some(m) => m,
        None if !body.trim().is_empty() => body.trim().chars().take(500).collect(),
        None => status.canonical_reason().unwrap_or("no reason").to_owned(),
    }
}

/// A wait the server asked for (`retry-after-ms`, or `retry-after` in seconds), if it is
/// at most a minute, as OpenAI's SDKs honour it.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let secs = read("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| read("retry-after"))?;
    (secs.is_finite() && (0.0..=60.0).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

/// The byte offset of a JSON error in `bytes` (serde gives line and column).
pub(crate) fn byte_offset(bytes: &[u8], e: &serde_json::Error) -> usize {
    let mut line = 1;
    for (i, b) in bytes.iter().enumerate() {
        if line == e.line() {
            return (i + e.column().saturating_sub(1)).min(bytes.len());
        }
        if *b == b'\n' {
            line += 1;
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = (Duration::from_millis(500), Duration::from_secs(8));
        for (n, top) in [(1, 500), (2, 1000), (3, 2000), (6, 8000), (40, 8000)] {
            let d = backoff(b, n);
            assert!(d <= Duration::from_millis(top), "{n}: {d:?}");
            assert!(d >= Duration::from_millis(top * 3 / 4), "{n}: {d:?}");
        }
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut far = HeaderMap::new();
        far.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_after(&far), None);
    }

    #[test]
    fn error_messages_are_the_servers() {
        let s = StatusCode::BAD_REQUEST;
        assert_eq!(
            error_message(
                Provider::OpenAi,
                s,
                r#"{"error": {"message": "bad tool", "type": "x"}}"#
            ),
            "bad tool"
        );
        assert_eq!(
            error_message(Provider::OpenAi, s, "plain text"),
            "plain text"
        );
        assert_eq!(error_message(Provider::OpenAi, s, ""), "Bad Request");
    }

    #[test]
    fn json_error_offsets() {
        let body = b"{\n  \"a\": x}";
        let e = serde_json::from_slice::<serde_json::Value>(body).unwrap_err();
        assert_eq!(body[byte_offset(body, &e)], b'x');
    }

    #[test]
    fn retries_follow_the_servers_word() {
        let mut h = HeaderMap::new();
        let overloaded = StatusCode::from_u16(529).unwrap();
        assert!(should_retry(overloaded, &h));
        assert!(!should_retry(StatusCode::BAD_REQUEST, &h));
        h.insert("x-should-retry", "true".parse().unwrap());
        assert!(should_retry(StatusCode::BAD_REQUEST, &h));
        h.insert("x-should-retry", "false".parse().unwrap());
        assert!(!should_retry(overloaded, &h));
    }

    #[test]
    fn anthropic_errors_say_their_type() {
        let body = r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}"#;
        assert_eq!(
            error_message(Provider::Anthropic, StatusCode::BAD_REQUEST, body),
            "invalid_request_error: max_tokens: Field required"
        );
    }
}
