//! Connecting a Redis saver: URL, key prefix, thread TTL, serializer, timeouts.

use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoint::backend::{Timeouts, take_url_param, ttl_param};
use stategraph_checkpoint::{Error, JsonPlusSerializer, Result, Serializer, redact_url};

use crate::error::{BACKEND, db};
use crate::saver::RedisSaver;

/// Builds a [`RedisSaver`]: the server, key prefix, thread TTL, serializer and timeouts;
/// [`connect`](Self::connect) connects.
///
/// ```no_run
/// use std::time::Duration;
/// use stategraph_redis::RedisConfig;
///
/// # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
/// // Keys under `myapp:`; a thread expires a day after its last write.
/// let saver = RedisConfig::from_url("redis://127.0.0.1:6379/0")?
///     .prefix("myapp")
///     .ttl(Duration::from_secs(24 * 60 * 60))
///     .connect()
///     .await?;
/// # let _ = saver;
/// # Ok(()) }
/// ```
///
/// The same settings as URL query parameters:
///
/// ```
/// use std::time::Duration;
/// use stategraph_redis::RedisConfig;
///
/// let config = RedisConfig::from_url("redis://127.0.0.1:6379/0?prefix=myapp&ttl=86400")?;
/// assert_eq!(config.key_prefix(), "myapp");
/// assert_eq!(config.thread_ttl(), Some(Duration::from_secs(86_400)));
/// # Ok::<(), stategraph_checkpoint::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RedisConfig {
    url: String,
    prefix: String,
    ttl: Option<Duration>,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
    /// A connection of the user's ([`from_connection`](Self::from_connection)), used instead
    /// of the URL.
    connection: Option<redis::aio::MultiplexedConnection>,
}

impl RedisConfig {
    /// Parses a `redis://` / `rediss://` URL. Besides the driver's own settings it may carry,
    /// as query parameters: `prefix` (the key prefix, default `stategraph`), `ttl` (a thread
    /// TTL in seconds: every key of a thread expires that long after its last write), and
    /// `connect_timeout` / `statement_timeout` (seconds, `0` for none; see [`Timeouts`]).
    pub fn from_url(url: &str) -> Result<Self> {
        let (rest, timeouts) = Timeouts::default().take_from_url(url)?;
        let (rest, prefix) = take_url_param(&rest, "prefix");
        let (rest, ttl) = take_url_param(&rest, "ttl");
        let ttl = ttl.map(|t| ttl_param("ttl", &t)).transpose()?;
        redis::Client::open(rest.as_str()).map_err(|e| {
            Error::invalid(
                "database URL",
                format!("`{}`: not a Redis URL: {e}", redact_url(url)),
            )
        })?;
        Ok(Self {
            url: rest,
            prefix: prefix.unwrap_or_else(|| "stategraph".to_owned()),
            ttl,
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts,
            connection: None,
        })
    }

    /// A saver on a multiplexed connection you own (shared with your other uses of it: it
    /// is cloned, not reopened); the other settings are the defaults, as
    /// [`from_url`](Self::from_url) gives them.
    pub fn from_connection(connection: redis::aio::MultiplexedConnection) -> Self {
        Self {
            url: "the connection's server".to_owned(),
            prefix: "stategraph".to_owned(),
            ttl: None,
            serializer: Arc::new(JsonPlusSerializer::new()),
            timeouts: Timeouts::default(),
            connection: Some(connection),
        }
    }

    /// The key prefix (every key is `{prefix}:…`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Every key of a thread expires `ttl` after the thread's last write (default: never;
    /// Redis counts whole seconds, at least one).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Uses another serializer for checkpoints and writes.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// How long to wait for the server: connecting and each command's answer (default 10 s
    /// and 60 s; see [`Timeouts`]; the saver multiplexes one connection, so there is no idle
    /// pool to limit). A limit that runs out is an error naming the operation.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Accepted for uniformity with the other backends' configurations, and changes nothing:
    /// a Redis saver has no tables to create or migrate, so connecting never writes, with or
    /// without it.
    pub fn without_setup(self) -> Self {
        self
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The connect and statement limits.
    pub(crate) fn timeouts_value(&self) -> Timeouts {
        self.timeouts
    }

    /// The thread TTL (`None`: threads never expire).
    pub fn thread_ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// Connects (one multiplexed connection; nothing is written until the first save).
    pub async fn connect(self) -> Result<RedisSaver> {
        let conn = match &self.connection {
            Some(conn) => conn.clone(),
            None => self.open().await?,
        };
        Ok(RedisSaver::new(
            conn,
            self.prefix,
            self.ttl,
            self.serializer,
            self.timeouts,
        ))
    }
}

impl RedisConfig {
    /// A multiplexed connection to the URL's server.
    pub(crate) async fn open(&self) -> Result<redis::aio::MultiplexedConnection> {
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| Error::invalid("database URL", format!("not a Redis URL: {e}")))?;
        // Each operation of the saver runs within the statement limit (see `RedisSaver`), so
        // the driver's own per-command limit is off.
        let settings = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeouts.connect)
            .set_response_timeout(None);
        let target = redact_url(&self.url);
        let connecting = async {
            client
                .get_multiplexed_async_connection_with_config(&settings)
                .await
                .map_err(db("cannot connect to Redis"))
        };
        self.timeouts.connect(BACKEND, &target, connecting).await
    }
}

impl stategraph_checkpoint::backend::SaverConfig for RedisConfig {
    type Saver = RedisSaver;

    fn from_url(url: &str) -> stategraph_checkpoint::Result<Self> {
        RedisConfig::from_url(url)
    }

    fn serializer(self, serializer: Arc<dyn Serializer>) -> Self {
        RedisConfig::serializer(self, serializer)
    }

    fn without_setup(self) -> Self {
        RedisConfig::without_setup(self)
    }

    async fn connect(self) -> stategraph_checkpoint::Result<RedisSaver> {
        RedisConfig::connect(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let c = RedisConfig::from_url("redis://h:6379/2?prefix=p&statement_timeout=2").unwrap();
        assert_eq!(c.url, "redis://h:6379/2");
        assert_eq!(c.key_prefix(), "p");
        assert_eq!(c.timeouts.statement, Some(Duration::from_secs(2)));
        assert!(RedisConfig::from_url("redis://h?ttl=soon").is_err());
        assert!(RedisConfig::from_url("ftp://h").is_err());
    }

    proptest::proptest! {
        #[test]
        fn from_url_never_panics(url in proptest::arbitrary::any::<String>()) {
            let _ = RedisConfig::from_url(&url);
        }

        #[test]
        fn from_url_near_the_format_never_panics(
            url in "(redis|rediss|redis\\+unix|unix)://([a-zé%]{0,4}(:[a-z%]{0,4})?@)?[a-z0-9.\\[\\]:é]{0,16}(/[0-9a-z%]{0,4})?(\\?(([a-z_]{1,16}|prefix|ttl|connect_timeout|statement_timeout|idle_timeout|protocol|db|insecure|resp3)=(-?[0-9]{0,22}(\\.[0-9]{0,3})?|[a-z%é-]{0,8})&?){0,4})?",
        ) {
            let _ = RedisConfig::from_url(&url);
        }
    }
}
