//! [`MongoSaver`]: a [`CheckpointSaver`] on MongoDB, on the same database, collections,
//! documents and indexes as Python's `langgraph-checkpoint-mongodb`, so Python LangGraph and
//! stategraph read and continue each other's threads.
//!
//! ```no_run
//! use std::time::Duration;
//! use stategraph_checkpoint::*;
//! use stategraph_mongodb::MongoConfig;
//!
//! # async fn demo() -> Result<(), Error> {
//! // Database `checkpointing_db` (Python's default); checkpoints expire a day after they
//! // were written.
//! let saver = MongoConfig::from_url("mongodb://127.0.0.1:27017")?
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
//! # Beyond the Python saver
//! - `delete_for_runs`, `copy_thread` and `prune` (every [`PruneStrategy`]);
//! - delta channels rebuilt in a few queries ([`CheckpointSaver::get_delta_channel_history`]);
//! - a conditional put ([`CheckpointSaver::put_if_latest`]) that refuses a second writer
//!   without transactions (see [`MongoSaver`]), so it works on a standalone server too;
//! - strict reads: a document of the wrong shape is an error naming the thread, checkpoint
//!   and field, never a panic or a default.
//!
//! [`PruneStrategy`]: stategraph_checkpoint::PruneStrategy

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod config;
mod error;
mod saver;

pub use config::{DEFAULT_DATABASE, MongoConfig};
pub use saver::MongoSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
