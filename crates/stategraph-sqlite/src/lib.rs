//! The embedded default backend of stategraph: [`SqliteSaver`], a [`CheckpointSaver`] on
//! bundled SQLite that uses LangGraph's own SQLite schema and byte formats, so Python
//! LangGraph (`langgraph-checkpoint-sqlite`) and stategraph can read and continue each other's
//! threads in one database file.
//!
//! - WAL mode; one writer connection per [`SqliteDatabase`] handle, shared by the saver, the
//!   store and the run queue built from it, plus a pool of readers; all database work runs on tokio's
//!   blocking pool, so async tasks never block on disk.
//! - Group commit: concurrent writes share one transaction and one disk sync (each in a
//!   savepoint of its own, so one write's failure rolls back only its changes); a write
//!   returns once the commit that holds it is done, so durability per write is unchanged.
//! - Every optional operation is implemented: `copy_thread`, `prune`, `delete_for_runs`.
//! - Corrupt rows produce [`Error::Serialization`](stategraph_checkpoint::Error) naming the
//!   thread, checkpoint and channel.
//!
//! Open a saver with [`SqliteSaver::connect`]`(url)` or, for every setting,
//! [`SqliteConfig`]`::from_url(url)?.….connect().await`.
//!
//! It also has [`SqliteStore`], the cross-thread memory [`Store`] on LangGraph's own SQLite
//! store schema (`store`, `store_migrations`, and for semantic search `store_vectors` with the
//! sqlite-vec extension's cosine distance), so Python's `langgraph.store.sqlite.SqliteStore`
//! and stategraph can share items in one file. Its semantics (filters, ordering, TTLs,
//! re-embedding only changed texts) are those of
//! [`InMemoryStore`](stategraph_store::InMemoryStore), checked by the shared store
//! conformance suite; corrupt rows produce
//! [`StoreError::Corrupt`](stategraph_store::StoreError) naming the namespace and
//! key. Open one with [`SqliteStore::connect`]`(url)` or [`SqliteStoreConfig`].
//!
//! And it has [`SqliteRunQueue`], the durable [`RunQueue`] of an Agent Server whose processes
//! share one SQLite file: runs, their stream events, the states they leave their threads
//! with and keys taken once, in tables of its own (`stategraph_runs`, …) next to the
//! checkpoints, with the semantics of
//! [`InMemoryRunQueue`](stategraph_runs::InMemoryRunQueue) (checked by the shared
//! run queue conformance suite). Claims, ends and strategies are transactions of the file's
//! writer (SQLite's file lock serialises the processes); notifications cross processes by
//! Unix datagrams, without polling; a saver on the same file fences a run's checkpoint
//! writes by its lease ([`FencingSaver::fenced`](stategraph_runs::FencingSaver::fenced)) when
//! both are built from one [`SqliteDatabase`]. Open one with
//! [`SqliteRunQueue::connect`]`(url)` or [`SqliteRunQueueConfig`]. Any number of processes
//! may open and set up one file at once, saver, store and queue alike.
//!
//! And it has [`SqliteCache`], a node cache on the table of LangGraph's `SqliteCache`, so
//! cached node results are shared with Python graphs and outlive the process.
//!
//! ```
//! use stategraph_checkpoint::*;
//! use stategraph_sqlite::SqliteSaver;
//!
//! # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
//! # let dir = std::env::temp_dir().join(format!("sg-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let url = format!("sqlite:{}", dir.join("threads.sqlite").display());
//! let saver = SqliteSaver::connect(&url).await?; // e.g. "sqlite:threads.sqlite"
//! let mut cp = Checkpoint::empty();
//! cp.channel_values.insert("foo".into(), "bar".into());
//! cp.channel_versions.insert("foo", saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let config = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &cp.channel_versions).await?;
//! let back = saver.get_tuple(&config).await?.expect("stored");
//! assert_eq!(*back.checkpoint, cp);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), Error>(()) }).unwrap();
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod cache;
mod config;
mod database;
mod error;
mod pool;
mod runs;
mod saver;
mod schema;
mod store;

pub use cache::SqliteCache;
pub use config::{DEFAULT_MMAP_SIZE, SqliteConfig, Synchronous};
pub use database::SqliteDatabase;
pub use runs::{SqliteRunQueue, SqliteRunQueueConfig};
pub use saver::SqliteSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
#[doc(no_inline)]
pub use stategraph_runs::RunQueue;
#[doc(no_inline)]
pub use stategraph_store::Store;
pub use store::{SqliteStore, SqliteStoreConfig};
