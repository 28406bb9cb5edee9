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
//! cp.channel_versions.insert("messages", saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &cp.channel_versions).await?;
//! assert_eq!(saver.get_tuple(&at).await?.map(|t| t.checkpoint), Some(cp));
//! # Ok(()) }
//! ```
//!
//! (The example needs a running server, so it is compiled but not run as a doc test; the
//! conformance suite runs the same operations against a real server.)
//!
//! [`PostgresStore`] is LangGraph's Postgres `BaseStore` on the same terms: LangGraph's
//! `store` / `store_vectors` tables and migrations (`store_migrations` v0–v3,
//! `vector_migrations` v0–v2, pgvector with an HNSW cosine index), so Python's `PostgresStore`
//! and stategraph share items. Semantic search needs the `vector` extension
//! (`scripts/install-pgvector.sh` builds it for PostgreSQL 15 on Debian).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde_json::json;
//! use stategraph_checkpoint::store::*;
//! use stategraph_postgres::PostgresStoreConfig;
//!
//! # async fn demo() -> Result<(), StoreError> {
//! let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64)));
//! let store = PostgresStoreConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
//!     .index(index)
//!     .ttl(TtlConfig::default().default_ttl(Duration::from_secs(60 * 60)))
//!     .connect() // creates or upgrades the tables
//!     .await?;
//! store.put(&["user-1", "memories"], "m1", json!({"food": "I like pizza"})).await?;
//! let hits = store.search(&["user-1"], SearchOptions::new().query("pizza")).await?;
//! assert_eq!(hits[0].key, "m1");
//! # Ok(()) }
//! ```
//!
//! How it differs from Python's on purpose (see [`PostgresStore`]): timestamps come from the
//! client's clock; `$gt`-style filters compare numbers as numbers (Python compares text);
//! fractional TTLs are kept exactly; expired items are never read; `created_at` resets when an
//! expired item is put again.

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod config;
mod error;
mod migrate;
mod saver;
mod schema;
mod store;

pub use config::PostgresConfig;
pub use saver::PostgresSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
pub use store::{PostgresStore, PostgresStoreConfig};
