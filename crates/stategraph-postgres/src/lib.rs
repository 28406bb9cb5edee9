//! [`PostgresSaver`]: a [`CheckpointSaver`] on PostgreSQL using LangGraph's own schema
//! (`checkpoint_migrations` v0–v9, `checkpoints`, `checkpoint_blobs`, `checkpoint_writes`) and
//! row formats, so Python LangGraph's `PostgresSaver` and stategraph share a database.
//!
//! ```no_run
//! use stategraph_checkpoint::*;
//! use stategraph_postgres::PostgresSaver;
//!
//! # async fn demo() -> Result<(), Error> {
//! let saver = PostgresSaver::connect("postgres://postgres@127.0.0.1:5432/test").await?;
//! let mut cp = Checkpoint::empty();
//! cp.channel_values.insert("messages".into(), value!(["hi"]));
//! cp.channel_versions.insert("messages".into(), saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &cp.channel_versions).await?;
//! assert_eq!(saver.get_tuple(&at).await?.map(|t| t.checkpoint), Some(cp));
//! # Ok(()) }
//! ```
//!
//! (The example needs a running server, so it is compiled but not run as a doc test; the
//! conformance suite runs the same operations against a real server.)

mod config;
mod error;
mod saver;
mod schema;

pub use config::PostgresConfig;
pub use saver::PostgresSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
