//! Test support shared by the stategraph crates' tests (not published), written once:
//!
//! - [`services`]: where the test servers are (`STATEGRAPH_TEST_POSTGRES_URL`,
//!   `STATEGRAPH_TEST_MYSQL_URL`, `STATEGRAPH_TEST_REDIS_URL`, `STATEGRAPH_TEST_MONGODB_URL`,
//!   with local defaults) and
//!   unique names for scratch schemas, databases and key prefixes;
//! - [`Cleanup`]: a guard that runs an async clean-up when dropped;
//! - [`python`]: running the pinned Python LangGraph for interop tests;
//! - [`net`]: servers that misbehave on loopback, for the tests that prove no call waits
//!   forever;
//! - `chat` (feature `chat`): a chat-completions server answering in OpenAI's wire format
//!   what a test scripts;
//! - one module per backend, each behind the cargo feature of the same name so a crate's
//!   tests pull in only the drivers they need: a scratch place that is dropped with its
//!   guard, a saver on it, and a ready conformance `Fixture` (saver, the backend's
//!   `Corruptor`, and the guard) for `stategraph_conformance::checkpointer_conformance!`.
//!
//! A server that cannot be reached fails the test with a panic naming its URL: tests never
//! skip because a service is down.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let silent = stategraph_testkit::net::SilentServer::start().await;
//! let stream = tokio::net::TcpStream::connect(silent.addr()).await.unwrap();
//! drop(stream); // accepted, never answered
//! # });
//! ```

mod cleanup;
pub mod net;
pub mod python;
pub mod services;

#[cfg(feature = "chat")]
pub mod chat;
#[cfg(feature = "mongodb")]
pub mod mongodb;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use cleanup::Cleanup;
