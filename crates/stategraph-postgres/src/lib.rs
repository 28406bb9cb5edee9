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
//! assert_eq!(saver.get_tuple(&at).await?.map(|t| t.checkpoint).as_deref(), Some(&cp));
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
//! use stategraph_store::*;
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
//!
//! All three are built from one [`PostgresDatabase`] — one connection pool — opened from a
//! URL or from a pool you own: `PostgresDatabase::from_url(url)?` then `.saver()`,
//! `.store()` and `.run_queue()`, each `.connect().await` (the `from_url` of each component's
//! config opens a database of its own). A saver fences a run's checkpoint writes by the lease
//! of a run in the queue built from the same database.
//!
//! [`PostgresRunQueue`] is the durable [`RunQueue`] of agent runs for several Agent Server
//! processes on one database (stategraph's own tables `stategraph_runs` — LangGraph's run
//! records in typed columns —, `stategraph_run_events`, `stategraph_run_threads` (what each
//! thread's last run left it with) and `stategraph_run_claims` (a cron's ticks, taken once),
//! migrations in `stategraph_run_migrations`; nothing of LangGraph's is touched). Workers claim
//! runs with `SELECT … FOR UPDATE SKIP LOCKED`, oldest first and FIFO per thread; a unique
//! partial index lets the database itself refuse a second running run on a thread. A claim is
//! a lease kept alive by heartbeats: when a worker dies, [`RunQueue::requeue_expired`] hands
//! its run to another ([`RunRow::attempt`] tells the takeover), up to
//! [`RunQueueConfig::max_attempts`]. Enqueueing applies LangGraph's multitask strategies
//! ([`Multitask`]) under a per-thread advisory lock; a run's end ([`RunEnd`]: its status,
//! output, last events, its thread's state, the worker's next claim) is one statement; stop
//! requests reach a run's worker in its heartbeat and as a `NOTIFY`; stream events are
//! numbered per run for joiners and `Last-Event-ID`. [`PostgresRunQueue::listen`] turns the
//! queue's notifications (ids only, on a channel of its schema) into [`Notification`]s.
//!
//! ```no_run
//! use serde_json::json;
//! use stategraph_postgres::{
//!     Multitask, NewRun, RunEnd, RunEvents, RunQueue, RunQueueConfig, RunStatus,
//! };
//!
//! # async fn demo() -> Result<(), stategraph_checkpoint::Error> {
//! let queue = RunQueueConfig::from_url("postgres://postgres@127.0.0.1:5432/test")?
//!     .schema("agents")
//!     .connect() // creates or upgrades the queue's tables
//!     .await?;
//! let mut wake = queue.listen().await?;
//! queue
//!     .enqueue(NewRun::new("run-1", "thread-1").assistant("agent").multitask(Multitask::Enqueue))
//!     .await?;
//! let _ = wake.recv().await; // Notification::Enqueued { .. }
//! if let Some(run) = queue.claim("host-a/worker-1", None).await? {
//!     let event = ("values".to_owned(), json!({"n": 1}));
//!     queue.append_events(&run.run_id, "host-a/worker-1", &[event]).await?;
//!     let lease = queue.heartbeat(&run.run_id, "host-a/worker-1").await?;
//!     assert!(lease.held && lease.cancel.is_none());
//!     let output = json!({"n": 1});
//!     let end = RunEnd::new(&run.run_id, "host-a/worker-1", RunStatus::Success);
//!     queue.finish(end.output(Some(&output))).await?;
//! }
//! let events = queue.events_after("run-1", 0, 100).await?;
//! assert_eq!(events[0].seq, 1);
//! # Ok(()) }
//! ```
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod config;
mod database;
mod error;
mod migrate;
mod nul_char;
mod runs;
mod saver;
mod schema;
mod store;

pub use config::{BlobCompression, PostgresConfig};
pub use database::PostgresDatabase;
pub use runs::{Listener, PostgresRunQueue, RunQueueConfig};
pub use saver::PostgresSaver;
#[doc(no_inline)]
pub use stategraph_checkpoint::CheckpointSaver;
#[doc(no_inline)]
pub use stategraph_runs::{
    CancelAction, CancelOutcome, Deletion, Enqueued, Expired, Finished, Lease, Multitask, NewRun,
    Notification, Notifications, OnceKeys, QueueStats, RunEnd, RunEvent, RunEvents, RunQuery,
    RunQueue, RunRow, RunStatus, ThreadEnd, ThreadRow, ThreadState, ThreadStatus,
};
pub use store::{PostgresStore, PostgresStoreConfig};
