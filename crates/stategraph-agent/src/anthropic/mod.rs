//! A client of Anthropic's Messages API (LangChain's `ChatAnthropic`): any server that speaks
//! `POST {base_url}/messages` — Anthropic, llama.cpp's `llama-server`, proxies — whole
//! answers or streamed as server-sent events, with tool calls, timeouts, and retries with
//! exponential backoff on 408, 409, 429 and 5xx answers (Anthropic's 529 "overloaded" too)
//! and on connection failures.

mod answer;
mod stream;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoint::{Map, Value};
use stategraph_messages::Message;

use crate::error::{Error, Result};
use crate::model::{ChatModel, ChatRequest, ChunkStream};

/// Anthropic's own endpoint, the default base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The API version sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = crate::http::ANTHROPIC_VERSION;

/// The settings of a [`ChatAnthropic`] client. Start from [`AnthropicConfig::new`] (or
/// [`AnthropicConfig::from_env`]), set what you need, then [`build`](Self::build).
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: u32,
    temperature: Option<f64>,
    timeout: Duration,
    connect_timeout: Duration,
    stream_idle_timeout: Duration,
    max_retries: u32,
    backoff: (Duration, Duration),
    extra_body: serde_json::Map<String, serde_json::Value>,
}

impl AnthropicConfig {
    /// A client of `model` on Anthropic's API ([`ANTHROPIC_BASE_URL`]) with no key: answers of
    /// at most 1024 tokens (the API requires a limit), 60 s for an answer (or a stream's first
    /// byte), 10 s to connect, 60 s between streamed events, 2 retries with backoff from
    /// 0.5 s to 8 s.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: ANTHROPIC_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            max_tokens: 1024,
            temperature: None,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(60),
            max_retries: 2,
            backoff: (Duration::from_millis(500), Duration::from_secs(8)),
            extra_body: serde_json::Map::new(),
        }
    }

    /// [`new`](Self::new) with the key of `ANTHROPIC_API_KEY` and the server of
    /// `ANTHROPIC_BASE_URL` when they are set (the variables Anthropic's SDKs read; the
    /// SDKs' base URL has no `/v1`, which is added when missing).
    pub fn from_env(model: impl Into<String>) -> Self {
        let mut config = Self::new(model);
        if let Ok(url) = std::env::var("ANTHROPIC_BASE_URL")
            && !url.is_empty()
        {
            let url = url.trim_end_matches('/');
            config.base_url = if url.ends_with("/v1") {
                url.to_owned()
            } else {
                format!("{url}/v1")
            };
        }
        config.api_key = std::env::var("ANTHROPIC_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        config
    }

    /// The API's base URL, e.g. `http://127.0.0.1:8080/v1` (requests go to
    /// `{base_url}/messages`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The key sent as `x-api-key`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The most tokens an answer may have (Anthropic's required `max_tokens`).
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// The sampling temperature.
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    /// How long a whole answer (or a stream's response headers) may take.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// How long connecting may take.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// How long a stream may go without an event before it fails.
    pub fn stream_idle_timeout(mut self, d: Duration) -> Self {
        self.stream_idle_timeout = d;
        self
    }

    /// How many times a failed request is retried (408, 409, 429, 5xx, connection
    /// failures, timeouts; a server's `x-should-retry` header decides first); `0` never
    /// retries. A stream is retried only until its response starts.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The backoff before the first retry and its cap (doubling in between, with up to 25 %
    /// jitter); a server's `retry-after-ms` / `retry-after` of at most 60 s is used instead.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = (first, max);
        self
    }

    /// Sets a field of every request's body the client has no setter for (e.g. `top_k`,
    /// `metadata`).
    pub fn extra_body(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.extra_body.insert(key.into(), value);
        self
    }

    /// The client. Fails on a base URL that is not `http://` or `https://`, an empty model
    /// name, or `max_tokens` 0.
    pub fn build(self) -> Result<ChatAnthropic> {
        let base = self.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::InvalidRequest(format!(
                "the base URL `{}` must start with http:// or https://",
                self.base_url
            )));
        }
        if self.model.is_empty() {
            return Err(Error::InvalidRequest("the model name is empty".into()));
        }
        if self.max_tokens == 0 {
            return Err(Error::InvalidRequest(
                "max_tokens must be at least 1 (Anthropic requires a limit)".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| Error::InvalidRequest(format!("cannot build the HTTP client: {e}")))?;
        Ok(ChatAnthropic {
            inner: Arc::new(Inner {
                url: format!("{base}/messages"),
                http,
                config: self,
            }),
        })
    }
}

/// A chat model behind Anthropic's Messages API (LangChain's `ChatAnthropic`): any server
/// that speaks `POST {base_url}/messages`, whole answers or streamed as server-sent events,
/// with tool calls, timeouts, and retries with backoff ([`AnthropicConfig`] sets them).
///
/// Answers are LangChain's: a text answer's content is a string, an answer with tool calls
/// keeps Anthropic's content blocks (`text`, `tool_use`) as a list; `response_metadata`
/// holds the answer's `id`, `model`, `stop_reason`, `stop_sequence`, `usage`, `model_name`
/// and `model_provider: "anthropic"`; `usage_metadata` counts cached input tokens as input.
///
/// Cloning is cheap (one shared connection pool).
///
/// ```no_run
/// use stategraph_agent::{AnthropicConfig, ChatModel, ChatRequest};
/// use stategraph_messages::Message;
///
/// # async fn run() -> Result<(), stategraph_agent::Error> {
/// let model = AnthropicConfig::new("claude-haiku-4-5").api_key("sk-ant-…").build()?;
/// let answer = model.invoke(&ChatRequest::new([Message::human("Say hi")])).await?;
/// println!("{}", answer.text().unwrap_or_default());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ChatAnthropic {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    url: String,
    http: reqwest::Client,
    config: AnthropicConfig,
}

impl Inner {
    /// Where and how requests are sent.
    fn endpoint(&self) -> crate::http::Endpoint<'_> {
        crate::http::Endpoint {
            http: &self.http,
            url: &self.url,
            api_key: self.config.api_key.as_deref(),
            timeout: self.config.timeout,
            max_retries: self.config.max_retries,
            backoff: self.config.backoff,
            provider: crate::http::Provider::Anthropic,
        }
    }
}

impl ChatAnthropic {
    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.inner.config.model
    }
}

#[async_trait::async_trait]
impl ChatModel for ChatAnthropic {
    async fn invoke(&self, request: &ChatRequest) -> Result<Message> {
        let body = wire::request_body(&self.inner.config, request, false)?;
        let (json, _attempts) = crate::http::complete(&self.inner.endpoint(), &body).await?;
        answer::parse_message(&self.inner.url, &json)
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChunkStream> {
        let body = wire::request_body(&self.inner.config, request, true)?;
        let response = crate::http::start_stream(&self.inner.endpoint(), &body).await?;
        // As `ChatAnthropic`, text stays a string unless tools are offered.
        let text_only = request.tools.is_empty();
        Ok(crate::sse::chunks(
            response,
            self.inner.url.clone(),
            self.inner.config.stream_idle_timeout,
            stream::Parser::new(text_only),
        ))
    }

    fn metadata(&self) -> Map {
        let c = &self.inner.config;
        let mut m = Map::new();
        m.insert("ls_provider", "anthropic");
        m.insert("ls_model_name", c.model.as_str());
        m.insert("ls_model_type", "chat");
        // Set even when unset (`None`), as LangChain's `ls_params`.
        m.insert(
            "ls_temperature",
            c.temperature.map_or(Value::Null, Value::from),
        );
        m.insert("ls_max_tokens", i64::from(c.max_tokens));
        m
    }

    fn name(&self) -> &str {
        "ChatAnthropic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_checks_and_metadata() {
        assert!(
            AnthropicConfig::new("m")
                .base_url("ftp://x")
                .build()
                .is_err()
        );
        assert!(AnthropicConfig::new("").build().is_err());
        assert!(AnthropicConfig::new("m").max_tokens(0).build().is_err());
        let m = AnthropicConfig::new("claude")
            .base_url("http://127.0.0.1:1/v1/")
            .temperature(0.5)
            .build()
            .unwrap();
        assert_eq!(m.url(), "http://127.0.0.1:1/v1/messages");
        assert_eq!(m.name(), "ChatAnthropic");
        let meta = m.metadata();
        assert_eq!(meta.get("ls_provider"), Some(&Value::from("anthropic")));
        assert_eq!(meta.get("ls_temperature"), Some(&Value::from(0.5)));
        assert_eq!(meta.get("ls_max_tokens"), Some(&Value::from(1024)));
        let unset = AnthropicConfig::new("c").build().unwrap().metadata();
        assert_eq!(unset.get("ls_temperature"), Some(&Value::Null));
    }
}
