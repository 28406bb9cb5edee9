//! [`RedisSaver`]: a [`CheckpointSaver`] on plain Redis data structures — hashes, sorted sets
//! and sets; no modules — with an optional per-thread TTL. Works with Redis ≥ 6.2 and Valkey.
//!
//! ```no_run
//! use std::time::Duration;
//! use stategraph_checkpoint::*;
//! use stategraph_redis::RedisConfig;
//!
//! # async fn demo() -> Result<(), Error> {
//! // Threads expire a day after their last write.
//! let saver = RedisConfig::from_url("redis://127.0.0.1:6379")?
//!     .prefix("myapp")
//!     .ttl(Duration::from_secs(86_400))
//!     .connect()
//!     .await?;
//! let mut cp = Checkpoint::empty();
//! cp.channel_values.insert("messages".into(), value!(["hi"]));
//! cp.channel_versions.insert("messages", saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &cp.channel_versions).await?;
//! assert_eq!(saver.get_tuple(&at).await?.map(|t| t.checkpoint).as_deref(), Some(&cp));
//! # Ok(()) }
//! ```
//!
//! (Needs a running server, so the example is compiled, not run; the conformance suite runs
//! against a real server.)
//!
//! [`RedisCache`] is a node cache (`CompiledGraph::with_cache` in `stategraph-graph`) on the
//! keys and values of LangGraph's `RedisCache`, so Python and Rust graphs share cached node
//! results.

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod cache;
mod config;
mod error;
mod saver;

pub use cache::{DEFAULT_CACHE_PREFIX, RedisCache};
pub use config::RedisConfig;
pub use saver::RedisSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
