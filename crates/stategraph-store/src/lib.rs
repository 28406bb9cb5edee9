//! The cross-thread memory [`Store`]: LangGraph's `BaseStore`.
//!
//! A store keeps JSON documents ([`Item`]s) under hierarchical namespaces (`("users", "u1",
//! "memories")`), independent of any thread: what one conversation saves, another can find.
//! With an [`IndexConfig`] the store embeds chosen fields of each document and `search` ranks
//! by meaning (cosine similarity), otherwise by recency.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use stategraph_store::*;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64)));
//! let store = InMemoryStore::new().with_index(index);
//! let ns = ["user-1", "memories"];
//! store.put(&ns, "m1", json!({"food": "I like pizza"})).await?;
//! store.put(&ns, "m2", json!({"hobby": "I climb on weekends"})).await?;
//!
//! let hits = store.search(&["user-1"], SearchOptions::new().query("pizza").limit(1)).await?;
//! assert_eq!(hits[0].key, "m1");
//! assert!(hits[0].score.unwrap() > 0.0);
//!
//! let item = store.get(&ns, "m2").await?.unwrap();
//! assert_eq!(item.value["hobby"], "I climb on weekends");
//! # Ok::<(), StoreError>(()) }).unwrap();
//! ```

mod batch;
mod clock;
mod embed;
mod error;
pub mod filter;
mod item;
mod memory;
mod ops;
mod options;
pub mod path;
mod sealed;
mod time;
mod ttl;
mod vector;

use std::fmt;

use async_trait::async_trait;
use serde_json::Value as Json;

pub use batch::{
    BatchStep, ReadOp, finish_list_namespaces, plan_batch, validate_namespace, validate_ops,
};
pub use clock::{Clock, ManualClock};
pub use embed::{EmbeddingError, Embeddings, HashingEmbeddings};
pub use error::StoreError;
pub use item::{Item, SearchItem};
pub use memory::InMemoryStore;
pub use ops::{
    GetOp, IndexFields, ListNamespacesOp, MatchCondition, MatchType, Op, OpResult, PutOp, SearchOp,
    Ttl,
};
pub use options::{ListNamespacesOptions, PutOptions, SearchOptions, StoreOptions};
pub use sealed::{SEALED_KEY, SealedStore};
pub use time::Timestamp;
pub use ttl::{TtlConfig, spawn_ttl_sweeper};
pub use vector::{IndexConfig, VectorPlan, cosine};

/// A namespace: a path of non-empty labels without dots, e.g. `["users", "u1", "memories"]`.
pub type Namespace = Vec<String>;

/// A namespace from string labels.
pub fn ns(labels: &[&str]) -> Namespace {
    labels.iter().map(|l| (*l).to_owned()).collect()
}

/// A cross-thread key-value store with optional semantic search (LangGraph's `BaseStore`).
///
/// Backends implement [`Store::batch`]; everything else is built on it. Ops in a batch take
/// effect in order (a get after a put in the same batch sees the put); a batch is validated as
/// a whole first, so a bad op makes the batch fail before anything changes.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// Runs `ops` and returns one result per op, in order.
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError>;

    /// The TTL configuration.
    fn ttl_config(&self) -> &TtlConfig;

    /// The index configuration, if the store embeds documents.
    fn index_config(&self) -> Option<&IndexConfig>;

    /// Deletes expired items now; returns how many.
    async fn sweep_ttl(&self) -> Result<usize, StoreError>;

    /// Whether its items live in this process's memory only, where no other process can
    /// open them (`false` by default): a server over it may keep its runs in memory too.
    fn process_local(&self) -> bool {
        false
    }

    /// The item at `namespace`/`key`, refreshing its TTL per the store's `refresh_on_read`.
    async fn get(&self, namespace: &[&str], key: &str) -> Result<Option<Item>, StoreError> {
        let op = GetOp {
            namespace: ns(namespace),
            key: key.to_owned(),
            refresh_ttl: self.ttl_config().refresh_on_read,
        };
        match self.batch(vec![Op::Get(op)]).await?.pop() {
            Some(OpResult::Get(item)) => Ok(item),
            _ => Err(StoreError::Internal(
                "batch returned the wrong kind of result".into(),
            )),
        }
    }

    /// Items under `namespace_prefix` (see [`SearchOptions`]).
    async fn search(
        &self,
        namespace_prefix: &[&str],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let filter = match options.filter {
            None => None,
            Some(Json::Object(m)) => Some(m),
            Some(other) => {
                return Err(StoreError::InvalidFilter {
                    key: String::new(),
                    reason: format!("a filter must be a JSON object, got {other}"),
                });
            }
        };
        let op = SearchOp {
            namespace_prefix: ns(namespace_prefix),
            filter,
            limit: options.limit,
            offset: options.offset,
            query: options.query,
            refresh_ttl: options
                .refresh_ttl
                .unwrap_or(self.ttl_config().refresh_on_read),
        };
        match self.batch(vec![Op::Search(op)]).await?.pop() {
            Some(OpResult::Search(items)) => Ok(items),
            _ => Err(StoreError::Internal(
                "batch returned the wrong kind of result".into(),
            )),
        }
    }

    /// Stores `value` (a JSON object) at `namespace`/`key`, indexed with the configured fields
    /// and the default TTL.
    async fn put(&self, namespace: &[&str], key: &str, value: Json) -> Result<(), StoreError> {
        self.put_with(namespace, key, value, PutOptions::default())
            .await
    }

    /// [`Store::put`] with explicit index fields and TTL.
    async fn put_with(
        &self,
        namespace: &[&str],
        key: &str,
        value: Json,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        let ttl = match options.ttl {
            Ttl::Default => self.ttl_config().default_ttl,
            Ttl::Never => None,
            Ttl::After(d) => Some(d),
        };
        let op = PutOp {
            namespace: ns(namespace),
            key: key.to_owned(),
            value: Some(value),
            index: options.index,
            ttl,
        };
        self.batch(vec![Op::Put(op)]).await.map(drop)
    }

    /// Deletes `namespace`/`key` (nothing happens if it is absent).
    async fn delete(&self, namespace: &[&str], key: &str) -> Result<(), StoreError> {
        let op = PutOp {
            namespace: ns(namespace),
            key: key.to_owned(),
            value: None,
            index: IndexFields::Default,
            ttl: None,
        };
        self.batch(vec![Op::Put(op)]).await.map(drop)
    }

    /// The distinct namespaces (see [`ListNamespacesOptions`]), sorted label by label.
    async fn list_namespaces(
        &self,
        options: ListNamespacesOptions,
    ) -> Result<Vec<Namespace>, StoreError> {
        let mut match_conditions = Vec::new();
        if let Some(p) = options.prefix {
            match_conditions.push(MatchCondition {
                match_type: MatchType::Prefix,
                path: p,
            });
        }
        if let Some(s) = options.suffix {
            match_conditions.push(MatchCondition {
                match_type: MatchType::Suffix,
                path: s,
            });
        }
        let op = ListNamespacesOp {
            match_conditions,
            max_depth: options.max_depth,
            limit: options.limit,
            offset: options.offset,
        };
        match self.batch(vec![Op::ListNamespaces(op)]).await?.pop() {
            Some(OpResult::ListNamespaces(n)) => Ok(n),
            _ => Err(StoreError::Internal(
                "batch returned the wrong kind of result".into(),
            )),
        }
    }
}
