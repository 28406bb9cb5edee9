//! # stategraph
//!
//! LangGraph's stateful graph runtime in Rust, with its persistence layer at the centre: every
//! super-step of a graph is checkpointed into a *thread*, in LangGraph's own storage format, so
//! Python LangGraph and stategraph can share one database.
//!
//! This crate is the one to depend on. It re-exports what programs use of the checkpoint core
//! ([`stategraph_checkpoint`]) — the data model, the [`CheckpointSaver`] trait, serializers,
//! values, the memory [`store`] — while what only saver and store authors need (the shared
//! backend machinery, the storage format's helpers) is under [`backend`]. Behind one feature
//! each, the backends:
//!
//! | feature | backend | URL |
//! | --- | --- | --- |
//! | `sqlite` (default) | [`SqliteSaver`] | `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` |
//! | `postgres` | `PostgresSaver` | `postgres://…`, `postgresql://…` |
//! | `mysql` | `MySqlSaver` (MySQL, MariaDB) | `mysql://…` |
//! | `redis` | `RedisSaver` (plain Redis, no modules) | `redis://…` |
//! | `mongodb` | `MongoSaver` (the collections of Python's `langgraph-checkpoint-mongodb`) | `mongodb://…`, `mongodb+srv://…` |
//!
//! [`open_saver`] picks the backend from a database URL; `memory:` gives an [`InMemorySaver`].
//! [`open_store`] does the same for the cross-thread memory [`Store`](store::Store)
//! (`memory:`, `sqlite:`, `postgres://`); features `minilm` and `openai` add text embeddings
//! for its semantic search (`stategraph::embed`), `chrono` Python-compatible date and time
//! types (`stategraph::py`), `agent` chat models, tools and the prebuilt ReAct agent
//! (`stategraph::agent`), `server` the Agent Server HTTP API (`stategraph::server`).
//!
//! A graph over a typed state, checkpointed on SQLite:
//!
//! ```
//! use stategraph::prelude::*;
//!
//! #[derive(State, Clone, Debug, Default)]
//! struct Seed {
//!     foo: String,        // last value wins
//!     #[reducer(append)]
//!     bar: Vec<String>,   // lists are concatenated
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let mut graph = StateGraph::<Seed>::new();
//! graph.add_node("node_a", |_s, _ctx| async {
//!     Ok(SeedUpdate::default().foo("a").bar(["a"]))
//! });
//! graph.add_node("node_b", |s, _ctx| async move {
//!     Ok(SeedUpdate::default().foo(format!("{}b", s.foo)).bar(["b"]))
//! });
//! graph.add_edge(START, "node_a").add_edge("node_a", "node_b").add_edge("node_b", END);
//! let graph = graph.compile()?.with_checkpointer(stategraph::open_saver("sqlite::memory:").await?);
//!
//! let config = RunConfig::thread("1");
//! let input = SeedUpdate::default().foo("").bar(Vec::<String>::new());
//! let out = graph.invoke(input, config.clone()).await?;   // the typed final state
//! assert_eq!(out.foo, "ab");
//! assert_eq!(out.bar, ["a", "b"]);
//! assert_eq!(graph.get_state_history(&config, HistoryOptions::new()).await?.len(), 4);
//! # Ok::<(), stategraph::Error>(()) }).unwrap();
//! ```
//!
//! The checkpoint layer on its own:
//!
//! ```
//! use stategraph::prelude::*;
//!
//! # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
//! let saver = stategraph::open_saver("sqlite::memory:").await?;
//! let mut cp = Checkpoint::empty();
//! cp.channel_values.insert("greeting".into(), "hello".into());
//! cp.channel_versions.insert("greeting", saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &cp.channel_versions).await?;
//! assert_eq!(saver.get_tuple(&at).await?.map(|t| t.checkpoint).as_deref(), Some(&cp));
//! # Ok::<(), stategraph::Error>(()) }).unwrap();
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The features and their `##` comments in the manifest, listed.
#![doc = "\n## Feature flags\n"]
#![doc = document_features::document_features!()]

use std::sync::Arc;

mod error;
pub mod guide;
mod open;
pub use error::{Error, Result};
pub use open::*;
/// The checkpointers' error (also [`Error::Checkpoint`]).
pub use stategraph_checkpoint::Error as CheckpointError;

// The checkpoint core, explicitly: what programs that run graphs, read threads or call a
// saver use. What only saver and store authors need is in `backend`.
pub use stategraph_checkpoint::{
    AesEaxCipher, BoxError, Capabilities, ChannelVersion, ChannelVersions, Checkpoint,
    CheckpointConfig, CheckpointId, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    CheckpointTuple, Cipher, DeltaChannelHistory, EncryptedSerializer, Expect, InMemorySaver,
    JsonPlusSerializer, ListOptions, Location, PendingWrite, PruneStrategy, SEALED_KEY, SaveOp,
    SealedMetadata, SealedMetadataSaver, SerdeError, Serializer, VersionsSeen, checkpoint_id,
    codec, redact_url,
};
/// LangChain's chat messages (also in the [`prelude`]).
pub use stategraph_messages::{
    AiMessageChunk, ChunkMergeError, Message, MessageFields, ToolCall, ToolCallChunk,
    parse_partial_json,
};
/// The run queue of the Agent Server: typed run records, leases and the queue trait.
pub use stategraph_runs as runs;
/// The cross-thread memory store (LangGraph's `BaseStore`).
pub use stategraph_store as store;
/// The msgpack value model: [`Value`] and its codecs.
pub use stategraph_value as value;
/// `value!({...})`: a [`Value`] from JSON syntax.
pub use stategraph_value::value;
pub use stategraph_value::{
    Ext, ExtCode, List, Map, PyObject, Value, allowlist, now_iso, py, uuid4, uuid6,
};
/// For saver and store authors (and tools that work on stored data): the machinery every
/// backend shares, and the low-level helpers of LangGraph's storage format.
pub mod backend {
    pub use stategraph_checkpoint::backend::*;
    pub use stategraph_checkpoint::{
        CHECKPOINT_ID, CHECKPOINT_NS, EncodedWrites, LATEST_VERSION, NS_END, NS_SEP, NULL_TASK_ID,
        StoredWrite, THREAD_ID, all_special, channels, checkpoint_value_ranges, delta, format_uuid,
        iso_from_unix_micros, layer, next_int_version, next_version, sort_writes,
        special_write_idx, tags, version_map, write_idx,
    };
    /// How many bytes of a SQLite file the saver's and the store's read connections map
    /// into memory by default (`SqliteConfig::mmap_size`).
    #[cfg(feature = "sqlite")]
    pub use stategraph_sqlite::DEFAULT_MMAP_SIZE as SQLITE_DEFAULT_MMAP_SIZE;
}
/// Agents (feature `agent`): chat models (an OpenAI-compatible client with token
/// streaming), tools, the tool node and LangGraph's prebuilt ReAct agent.
#[cfg(feature = "agent")]
pub use stategraph_agent as agent;
pub use stategraph_checkpoint::cache::{Cache, InMemoryCache};
#[cfg(feature = "client")]
pub use stategraph_client as client;
/// `#[derive(State)]`: one channel per field, per-field reducers, a generated update type.
pub use stategraph_derive::State;
/// Text embeddings for the memory store (features `minilm`, `openai`).
#[cfg(any(feature = "minilm", feature = "openai"))]
pub use stategraph_embed as embed;
/// The graph engine (what programs use of it is also re-exported at the top level; LangGraph's
/// `Send` is here, as `stategraph::graph::Send`, so that it does not shadow
/// `std::marker::Send`).
pub use stategraph_graph as graph;
/// The state trait `#[derive(State)]` implements.
pub use stategraph_graph::State;
/// The Functional API: durable workflows as async functions ([`functional::entrypoint`])
/// calling saved units of work ([`functional::task`]).
pub use stategraph_graph::functional;
/// Streaming a run: [`StreamEvent`] and the payload types of its variants.
pub use stategraph_graph::stream;
pub use stategraph_graph::{
    AsNode, CachePolicy, ChannelRepair, ChannelSpec, Command, CompiledGraph, ConditionalEdges,
    Durability, DynState, END, GraphError, GraphOutput, HistoryOptions, Interrupt, IoSchema,
    Managed, NodeContext, NodeDefaults, NodeError, NodeFailure, NodeOutput, NodeTimeoutError,
    Overwrite, PathMapEntry, PregelTask, Reducer, RefreshOn, RepairPlan, Resume, RetryPolicies,
    RetryPolicy, RunCommand, RunConfig, RunStream, START, Schema, StateGraph, StateSnapshot,
    StateUpdate, StreamEvent, StreamMode, TimeoutPolicy, UpdatesEvent, Values, error_handler_node,
};
#[cfg(feature = "mongodb")]
pub use stategraph_mongodb::{MongoConfig, MongoSaver};
#[cfg(feature = "mysql")]
pub use stategraph_mysql::{MySqlConfig, MySqlSaver};
#[cfg(feature = "postgres")]
pub use stategraph_postgres::{
    PostgresConfig, PostgresDatabase, PostgresRunQueue, PostgresSaver, PostgresStore,
    PostgresStoreConfig, RunQueueConfig,
};
#[cfg(feature = "redis")]
pub use stategraph_redis::{RedisCache, RedisConfig, RedisSaver};
#[doc(hidden)]
pub use stategraph_value::__serde_json;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "sqlite")]
pub use stategraph_sqlite::{
    SqliteCache, SqliteConfig, SqliteDatabase, SqliteRunQueue, SqliteRunQueueConfig, SqliteSaver,
    SqliteStore, SqliteStoreConfig, Synchronous,
};

/// The names most programs need, in one import.
pub mod prelude {
    pub use crate::Error;
    pub use stategraph_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata, CheckpointSaver,
        CheckpointSource, CheckpointTuple, InMemorySaver, ListOptions, Value, value,
    };
    pub use stategraph_derive::State;
    pub use stategraph_graph::{
        AsNode, Command, CompiledGraph, Durability, DynState, END, GraphError, HistoryOptions,
        NodeContext, NodeError, NodeOutput, Reducer, Resume, RunCommand, RunConfig, START, Schema,
        State, StateGraph, StreamEvent, StreamMode,
    };
    #[cfg(feature = "sqlite")]
    pub use stategraph_sqlite::{SqliteConfig, SqliteSaver};
    pub use stategraph_store::{
        InMemoryStore, IndexConfig, Item, SearchItem, SearchOptions, Store, StoreOptions,
    };
}

/// The README's Rust blocks, compiled (and the quick start run) as doc tests, so they cannot
/// drift from the API.
#[cfg(all(
    doctest,
    feature = "sqlite",
    feature = "minilm",
    feature = "server",
    feature = "postgres",
    feature = "agent",
    feature = "mcp"
))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scheme this build lacks names the feature to turn on; the ones it has open.
    #[tokio::test]
    async fn schemes() {
        assert_eq!(open_saver("memory:").await.unwrap().name(), "memory");
        let sqlite = open_saver("sqlite::memory:").await;
        if cfg!(feature = "sqlite") {
            assert_eq!(sqlite.unwrap().name(), "sqlite");
        } else {
            let err = sqlite.err().unwrap();
            assert!(err.to_string().contains("feature"), "{err}");
        }
        for url in [
            "postgres://u@127.0.0.1:1/db?connect_timeout=0.2",
            "mysql://u@127.0.0.1:1/db?connect_timeout=0.2",
            "redis://127.0.0.1:1?connect_timeout=0.2",
            "mongodb://127.0.0.1:1/db?connect_timeout=0.2",
        ] {
            let scheme = url.split(':').next().unwrap();
            let enabled = match scheme {
                "postgres" => cfg!(feature = "postgres"),
                "mysql" => cfg!(feature = "mysql"),
                "mongodb" => cfg!(feature = "mongodb"),
                _ => cfg!(feature = "redis"),
            };
            // Port 1 refuses: a backend that is built fails to connect, one that is not
            // says which feature it needs.
            let err = open_saver(url).await.err().unwrap();
            let names_feature = matches!(&err, CheckpointError::InvalidInput { message, .. }
                if message.contains("feature"));
            assert_eq!(names_feature, !enabled, "{url}: {err}");
        }
        for url in ["ftp://x", "oracle://x"] {
            assert!(matches!(
                open_saver(url).await,
                Err(CheckpointError::InvalidInput { .. })
            ));
        }
    }

    #[tokio::test]
    async fn store_schemes() {
        let mut urls = vec!["memory:"];
        if cfg!(feature = "sqlite") {
            urls.push("sqlite::memory:");
        }
        for url in urls {
            let store = open_store(url, store::StoreOptions::new()).await.unwrap();
            store
                .put(&["a"], "k", serde_json::json!({"v": 1}))
                .await
                .unwrap();
            assert_eq!(
                store.get(&["a"], "k").await.unwrap().unwrap().value,
                serde_json::json!({"v": 1})
            );
        }
        let err = open_store("oracle://x", store::StoreOptions::new())
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("unknown scheme"), "{err}");
    }
}
