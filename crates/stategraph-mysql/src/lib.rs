//! [`MySqlSaver`]: a [`CheckpointSaver`] on MySQL or MariaDB, with the three tables of the
//! project's MySQL layout — `checkpoints`, `checkpoint_writes`, `checkpoint_blobs`, linked by
//! `thread_id` + `checkpoint_ns_hash` (MD5 of the namespace), with `gmt_create` /
//! `gmt_modified` — and LangGraph's value layout and serializer inside them.
//!
//! The audit queries of that layout work on it as they are, for example the writes each task
//! made to one checkpoint:
//!
//! ```sql
//! SELECT task_id, idx, channel, task_path, LENGTH(blob_data) AS data_size, gmt_create
//! FROM checkpoint_writes
//! WHERE thread_id = 'thread_001' AND checkpoint_id = '…' AND checkpoint_ns = ''
//! ORDER BY gmt_create, idx;
//! ```
//!
//! ```no_run
//! use stategraph_checkpoint::*;
//! use stategraph_mysql::MySqlSaver;
//!
//! # async fn demo() -> Result<(), Error> {
//! let saver = MySqlSaver::connect("mysql://root@127.0.0.1:3306/test").await?;
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

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod config;
mod error;
mod saver;
mod schema;

pub use config::MySqlConfig;
pub use saver::MySqlSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
