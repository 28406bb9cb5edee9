//! An OpenAI-compatible chat-completions client (LangChain's `ChatOpenAI`): any server that
//! speaks `POST {base_url}/chat/completions` — OpenAI, vLLM, llama.cpp's `llama-server`,
//! Ollama, LM Studio — whole answers or streamed as server-sent events, with tool calls
//! (several in one answer too), timeouts, and retries with exponential backoff on 408, 409,
//! 429 and 5xx answers and on connection failures. With
//! [`OpenAiConfig::use_responses_api`] it speaks OpenAI's Responses API
//! (`POST {base_url}/responses`) instead.

mod responses;
mod responses_answer;
mod responses_stream;
mod stream;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoint::{Map, Value};
use stategraph_messages::Message;

use crate::error::{Error, Result};
use crate::model::{ChatModel, ChatRequest, ChunkStream};

/// The settings of a [`ChatOpenAi`] client. Start from [`OpenAiConfig::new`] (or
/// [`OpenAiConfig::from_env`]), set what you need, then [`build`](Self::build).
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    base_url: String,
    api_key: Option<String>,
    model: String,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    seed: Option<i64>,
    timeout: Duration,
    connect_timeout: Duration,
    stream_idle_timeout: Duration,
    max_retries: u32,
    backoff: (Duration, Duration),
    stream_usage: bool,
    use_responses_api: bool,
    extra_body: serde_json::Map<String, serde_json::Value>,
}

/// OpenAI's own endpoint, the default base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

impl OpenAiConfig {
    /// A client of `model` on OpenAI's API ([`OPENAI_BASE_URL`]) with no key: 60 s for an
    /// answer (or a stream's first byte), 10 s to connect, 60 s between streamed events, 2
    /// retries with backoff from 0.5 s to 8 s, token usage reported on streams.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: OPENAI_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            temperature: None,
            max_tokens: None,
            seed: None,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(60),
            max_retries: 2,
            backoff: (Duration::from_millis(500), Duration::from_secs(8)),
            stream_usage: true,
            use_responses_api: false,
            extra_body: serde_json::Map::new(),
        }
    }

    /// [`new`](Self::new) with the base URL and key of `OPENAI_BASE_URL` and
    /// `OPENAI_API_KEY` when they are set (the variables OpenAI's SDKs read).
    pub fn from_env(model: impl Into<String>) -> Self {
        let mut config = Self::new(model);
        if let Ok(url) = std::env::var("OPENAI_BASE_URL")
            && !url.is_empty()
        {
            config.base_url = url;
        }
        config.api_key = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        config
    }

    /// The API's base URL, e.g. `http://127.0.0.1:8080/v1` (requests go to
    /// `{base_url}/chat/completions`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The key sent as `Authorization: Bearer KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The sampling temperature.
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    /// The most tokens an answer may have.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// The sampling seed (for repeatable answers where the server supports it; the Responses
    /// API has none, so it is not sent there).
    pub fn seed(mut self, seed: i64) -> Self {
        self.seed = Some(seed);
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
    /// failures, timeouts); `0` never retries. A stream is retried only until its response
    /// starts.
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

    /// Whether streams ask for token usage (`stream_options.include_usage`); some servers
    /// refuse the option.
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = on;
        self
    }

    /// Whether to speak OpenAI's Responses API (`POST {base_url}/responses`, as
    /// `ChatOpenAI(use_responses_api=True)`) instead of chat completions: messages go as
    /// `input` items, and answers come back as langchain-openai builds them from a response
    /// (content blocks with the output items' ids, the response's id as the message's). The
    /// API has no `stop` (left out) and always reports usage; `max_tokens` is sent as
    /// `max_output_tokens`.
    pub fn use_responses_api(mut self, on: bool) -> Self {
        self.use_responses_api = on;
        self
    }

    /// Sets a field of every request's body the client has no setter for (e.g. `top_p`).
    pub fn extra_body(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.extra_body.insert(key.into(), value);
        self
    }

    /// The client. Fails on a base URL that is not `http://` or `https://`, or an empty
    /// model name.
    pub fn build(self) -> Result<ChatOpenAi> {
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
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| Error::InvalidRequest(format!("cannot build the HTTP client: {e}")))?;
        let path = if self.use_responses_api {
            "responses"
        } else {
            "chat/completions"
        };
        Ok(ChatOpenAi {
            inner: Arc::new(Inner {
                url: format!("{base}/{path}"),
                http,
                config: self,
            }),
        })
    }
}

/// A chat model behind an OpenAI-compatible chat-completions API (LangChain's `ChatOpenAI`):
/// any server that speaks `POST {base_url}/chat/completions`, whole answers or streamed as
/// server-sent events, with tool calls, timeouts, and retries with backoff on 408, 409, 429
/// and 5xx answers and on connection failures ([`OpenAiConfig`] sets them).
///
/// Cloning is cheap (one shared connection pool).
///
/// ```no_run
/// use stategraph_agent::{ChatModel, ChatRequest, OpenAiConfig};
/// use stategraph_messages::Message;
///
/// # async fn run() -> Result<(), stategraph_agent::Error> {
/// let model = OpenAiConfig::new("gpt-4o-mini").api_key("sk-…").temperature(0.0).build()?;
/// let answer = model.invoke(&ChatRequest::new([Message::human("Say hi")])).await?;
/// println!("{}", answer.text().unwrap_or_default());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ChatOpenAi {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    url: String,
    http: reqwest::Client,
    config: OpenAiConfig,
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
            provider: crate::http::Provider::OpenAi,
        }
    }
}

impl ChatOpenAi {
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
impl ChatModel for ChatOpenAi {
    async fn invoke(&self, request: &ChatRequest) -> Result<Message> {
        let config = &self.inner.config;
        if config.use_responses_api {
            let body = responses::request_body(config, request, false)?;
            let (json, _attempts) = crate::http::complete(&self.inner.endpoint(), &body).await?;
            let structured = request.response_format.is_some();
            return responses_answer::parse_response(&self.inner.url, &json, structured);
        }
        let body = wire::request_body(config, request, false)?;
        let (json, _attempts) = crate::http::complete(&self.inner.endpoint(), &body).await?;
        wire::parse_completion(&self.inner.url, &json)
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChunkStream> {
        if self.inner.config.use_responses_api {
            let body = responses::request_body(&self.inner.config, request, true)?;
            let response = crate::http::start_stream(&self.inner.endpoint(), &body).await?;
            return Ok(crate::sse::chunks(
                response,
                self.inner.url.clone(),
                self.inner.config.stream_idle_timeout,
                responses_stream::Parser::new(request.response_format.is_some()),
            ));
        }
        let body = wire::request_body(&self.inner.config, request, true)?;
        let response = crate::http::start_stream(&self.inner.endpoint(), &body).await?;
        Ok(stream::chunks(
            response,
            self.inner.url.clone(),
            self.inner.config.stream_idle_timeout,
        ))
    }

    fn metadata(&self) -> Map {
        let c = &self.inner.config;
        let mut m = Map::new();
        m.insert("ls_provider", "openai");
        m.insert("ls_model_name", c.model.as_str());
        m.insert("ls_model_type", "chat");
        // Set even when unset (`None`), as LangChain's `ls_params`.
        m.insert(
            "ls_temperature",
            c.temperature.map_or(Value::Null, Value::from),
        );
        if let Some(n) = c.max_tokens {
            m.insert("ls_max_tokens", i64::from(n));
        }
        m
    }

    fn name(&self) -> &str {
        "ChatOpenAI"
    }
}
