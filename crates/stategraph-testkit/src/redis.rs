//! Redis (feature `redis`): scratch key prefixes whose keys are deleted with their guard,
//! savers under them, and the conformance fixture with its [`Keys`] corruptor. Failing to
//! reach the server panics, naming its URL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed set-up or edit fails the test"
)]

use std::net::{SocketAddr, ToSocketAddrs};

use stategraph_conformance::{Corruptor, Fixture, RawPart};
use stategraph_redis::{RedisConfig, RedisSaver};

use crate::Cleanup;
pub use crate::services::{redis_url as url, scratch_name};

/// The test server's address (for a proxy in front of it).
pub fn server_addr() -> SocketAddr {
    let url = url();
    let host_port = url
        .trim_start_matches("redis://")
        .split(['/', '?'])
        .next()
        .unwrap()
        .to_owned();
    host_port.to_socket_addrs().unwrap().next().unwrap()
}

/// A key prefix of its own for one test; every key under it is deleted with the guard.
#[derive(Debug)]
pub struct ScratchPrefix {
    prefix: String,
    _drop: Cleanup,
}

impl ScratchPrefix {
    /// A fresh prefix starting with `label`.
    pub fn new(label: &str) -> Self {
        let prefix = scratch_name(label);
        let drop = {
            let prefix = prefix.clone();
            Cleanup::new(async move {
                if let Ok(client) = redis::Client::open(url())
                    && let Ok(mut conn) = client.get_multiplexed_async_connection().await
                {
                    let keys: Vec<String> = redis::cmd("KEYS")
                        .arg(format!("{prefix}:*"))
                        .query_async(&mut conn)
                        .await
                        .unwrap_or_default();
                    if !keys.is_empty() {
                        let _: redis::RedisResult<()> =
                            redis::cmd("DEL").arg(keys).query_async(&mut conn).await;
                    }
                }
            })
        };
        Self {
            prefix,
            _drop: drop,
        }
    }

    /// The prefix (every key is `{prefix}:…`).
    pub fn name(&self) -> &str {
        &self.prefix
    }

    /// The test server's URL with this prefix (`prefix=` query parameter).
    pub fn url(&self) -> String {
        crate::services::with_param(&url(), &format!("prefix={}", self.prefix))
    }
}

/// A saver under a fresh [`ScratchPrefix`].
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver() -> (RedisSaver, ScratchPrefix) {
    saver_with(|config| config).await
}

/// Like [`saver`], with `configure` applied to the configuration before connecting (say, a
/// thread TTL).
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver_with(
    configure: impl FnOnce(RedisConfig) -> RedisConfig,
) -> (RedisSaver, ScratchPrefix) {
    let prefix = ScratchPrefix::new("sg_test");
    let config = RedisConfig::from_url(&url()).unwrap().prefix(prefix.name());
    let saver = configure(config)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("Redis at {} is required for these tests: {e}", url()));
    (saver, prefix)
}

/// The conformance suite's fixture: a saver under a fresh prefix, [`Keys`] under it, and the
/// prefix's guard.
pub async fn fixture() -> Fixture {
    let (saver, prefix) = saver().await;
    let keys = Keys::connect(&prefix).await;
    Fixture::new(saver).with_corruptor(keys).with_guard(prefix)
}

/// Edits the checkpoint hashes under a prefix directly (the conformance suite's
/// [`Corruptor`]).
pub struct Keys {
    conn: redis::aio::MultiplexedConnection,
    prefix: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Keys {
    /// The keys under `prefix`.
    ///
    /// # Panics
    /// Naming the URL, if the server cannot be reached.
    pub async fn connect(prefix: &ScratchPrefix) -> Self {
        let conn = redis::Client::open(url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("Redis at {} is required for these tests: {e}", url()));
        Self {
            conn,
            prefix: prefix.name().to_owned(),
        }
    }

    fn cp(&self, thread: &str, ns: &str, id: &str) -> String {
        format!("{}:cp:{thread}:{ns}:{id}", self.prefix)
    }
}

fn field(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

#[async_trait::async_trait]
impl Corruptor for Keys {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let mut conn = self.conn.clone();
        let v: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.cp(thread, ns, id))
            .arg(field(part))
            .query_async(&mut conn)
            .await
            .unwrap();
        v.expect("the field exists")
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("HSET")
            .arg(self.cp(thread, ns, id))
            .arg(field(part))
            .arg(bytes)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("HSET")
            .arg(self.cp(thread, ns, id))
            .arg("parent")
            .arg(parent)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}
