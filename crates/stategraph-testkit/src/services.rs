//! Where the test servers are, and unique names for the scratch places tests make on them.
//!
//! Each URL comes from an environment variable, with the local server as default:
//!
//! | service | variable | default |
//! |---|---|---|
//! | PostgreSQL | `STATEGRAPH_TEST_POSTGRES_URL` | `postgres://postgres@127.0.0.1:5432/test` |
//! | MySQL / MariaDB | `STATEGRAPH_TEST_MYSQL_URL` | `mysql://root@127.0.0.1:3306/test` |
//! | Redis | `STATEGRAPH_TEST_REDIS_URL` | `redis://127.0.0.1:6379` |
//! | MongoDB | `STATEGRAPH_TEST_MONGODB_URL` | `mongodb://127.0.0.1:27117/?directConnection=true` |
//! | an OpenAI-compatible chat model | `STATEGRAPH_TEST_LLM_URL` | `http://127.0.0.1:18080/v1` |
//! | Arize Phoenix (OTLP traces in, REST out) | `STATEGRAPH_TEST_PHOENIX_URL` | `http://127.0.0.1:16006` |
//! | Prometheus | `STATEGRAPH_TEST_PROMETHEUS` (its binary) | `prometheus` |
//!
//! The MongoDB default is the MongoDB-compatible server `scripts/mongo-server.sh start` runs
//! (mongoeco, in Python); point the variable at a real MongoDB to run the suite there.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The variable naming the PostgreSQL test server.
pub const POSTGRES_URL_VAR: &str = "STATEGRAPH_TEST_POSTGRES_URL";
/// The variable naming the MySQL / MariaDB test server.
pub const MYSQL_URL_VAR: &str = "STATEGRAPH_TEST_MYSQL_URL";
/// The variable naming the Redis test server.
pub const REDIS_URL_VAR: &str = "STATEGRAPH_TEST_REDIS_URL";

/// The PostgreSQL test server (`STATEGRAPH_TEST_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`).
pub fn postgres_url() -> String {
    from_env(POSTGRES_URL_VAR, "postgres://postgres@127.0.0.1:5432/test")
}

/// The MySQL / MariaDB test server (`STATEGRAPH_TEST_MYSQL_URL`, default
/// `mysql://root@127.0.0.1:3306/test`).
pub fn mysql_url() -> String {
    from_env(MYSQL_URL_VAR, "mysql://root@127.0.0.1:3306/test")
}

/// The Redis test server (`STATEGRAPH_TEST_REDIS_URL`, default `redis://127.0.0.1:6379`).
pub fn redis_url() -> String {
    from_env(REDIS_URL_VAR, "redis://127.0.0.1:6379")
}

/// The variable naming the MongoDB test server.
pub const MONGODB_URL_VAR: &str = "STATEGRAPH_TEST_MONGODB_URL";

/// The MongoDB test server (`STATEGRAPH_TEST_MONGODB_URL`, default
/// `mongodb://127.0.0.1:27117/?directConnection=true`, the server `scripts/mongo-server.sh`
/// starts).
pub fn mongodb_url() -> String {
    from_env(
        MONGODB_URL_VAR,
        "mongodb://127.0.0.1:27117/?directConnection=true",
    )
}

/// The variable naming the OpenAI-compatible chat server of the model client's tests.
pub const LLM_URL_VAR: &str = "STATEGRAPH_TEST_LLM_URL";

/// The OpenAI-compatible chat server the model client's tests call
/// (`STATEGRAPH_TEST_LLM_URL`, default `http://127.0.0.1:18080/v1`: llama.cpp's
/// `llama-server` with SmolLM2-135M-Instruct, which `scripts/llm-server.sh start` runs).
pub fn llm_url() -> String {
    from_env(LLM_URL_VAR, "http://127.0.0.1:18080/v1")
}

/// The variable naming the Arize Phoenix server of the trace export tests.
pub const PHOENIX_URL_VAR: &str = "STATEGRAPH_TEST_PHOENIX_URL";

/// The Arize Phoenix server the trace export tests send spans to and read them back from
/// (`STATEGRAPH_TEST_PHOENIX_URL`, default `http://127.0.0.1:16006`, which
/// `scripts/phoenix.sh start` runs).
pub fn phoenix_url() -> String {
    from_env(PHOENIX_URL_VAR, "http://127.0.0.1:16006")
}

fn from_env(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// `url` with the query parameter `param` added (after `?`, or `&` if it already has a
/// query).
///
/// ```
/// use stategraph_testkit::services::with_param;
/// assert_eq!(with_param("redis://h:6379", "prefix=p"), "redis://h:6379?prefix=p");
/// assert_eq!(with_param("redis://h?ttl=1", "prefix=p"), "redis://h?ttl=1&prefix=p");
/// ```
pub fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

/// A name no other test (in this process or another) uses: `prefix`, `_`, then 30 lowercase
/// hex digits — a valid unquoted identifier for PostgreSQL and MySQL when `prefix` is one.
///
/// ```
/// let a = stategraph_testkit::services::scratch_name("sg_test");
/// let b = stategraph_testkit::services::scratch_name("sg_test");
/// assert!(a.starts_with("sg_test_") && a != b);
/// ```
pub fn scratch_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xff_ffff;
    format!(
        "{prefix}_{:016x}{:08x}{count:06x}",
        nanos & u128::from(u64::MAX),
        std::process::id()
    )
}
