//! How to open a store, and the options of its convenience methods.

use serde_json::Value as Json;

use super::{IndexConfig, IndexFields, Ttl, TtlConfig, ns};

/// How to open a store: semantic search (if any) and TTL behaviour.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    /// Semantic search; `None` stores documents without vectors.
    pub index: Option<IndexConfig>,
    /// TTL behaviour.
    pub ttl: TtlConfig,
}

impl StoreOptions {
    /// No index, no default TTL.
    pub fn new() -> Self {
        Self::default()
    }

    /// Embeds documents with `index`.
    pub fn index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Uses `ttl`.
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }
}

/// Options of [`Store::search`](super::Store::search).
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOptions {
    /// See [`SearchOp::query`](super::SearchOp::query).
    pub query: Option<String>,
    /// See [`SearchOp::filter`](super::SearchOp::filter); must be a JSON object.
    pub filter: Option<Json>,
    /// See [`SearchOp::limit`](super::SearchOp::limit) (default 10).
    pub limit: usize,
    /// See [`SearchOp::offset`](super::SearchOp::offset).
    pub offset: usize,
    /// `None`: the store's `refresh_on_read`.
    pub refresh_ttl: Option<bool>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            query: None,
            filter: None,
            limit: 10,
            offset: 0,
            refresh_ttl: None,
        }
    }
}

impl SearchOptions {
    /// Limit 10, no query, no filter.
    pub fn new() -> Self {
        Self::default()
    }
    /// Rank by similarity to `query`.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }
    /// Keep only values matching `filter` (a JSON object; see [`filter`](super::filter)).
    pub fn filter(mut self, filter: Json) -> Self {
        self.filter = Some(filter);
        self
    }
    /// At most `n` results.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n;
        self
    }
    /// Skip `n` results.
    pub fn offset(mut self, n: usize) -> Self {
        self.offset = n;
        self
    }
    /// Refresh (or not) the results' TTL.
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }
}

/// Options of [`Store::list_namespaces`](super::Store::list_namespaces).
#[derive(Clone, Debug, PartialEq)]
pub struct ListNamespacesOptions {
    /// Namespaces starting with these labels (`*` = any one).
    pub prefix: Option<Vec<String>>,
    /// Namespaces ending with these labels (`*` = any one).
    pub suffix: Option<Vec<String>>,
    /// Truncate to this many labels.
    pub max_depth: Option<usize>,
    /// At most this many (default 100).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
}

impl Default for ListNamespacesOptions {
    fn default() -> Self {
        Self {
            prefix: None,
            suffix: None,
            max_depth: None,
            limit: 100,
            offset: 0,
        }
    }
}

impl ListNamespacesOptions {
    /// Every namespace, at most 100.
    pub fn new() -> Self {
        Self::default()
    }
    /// Only namespaces starting with `labels`.
    pub fn prefix(mut self, labels: &[&str]) -> Self {
        self.prefix = Some(ns(labels));
        self
    }
    /// Only namespaces ending with `labels`.
    pub fn suffix(mut self, labels: &[&str]) -> Self {
        self.suffix = Some(ns(labels));
        self
    }
    /// Truncate to `depth` labels.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }
    /// At most `n`.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n;
        self
    }
    /// Skip `n`.
    pub fn offset(mut self, n: usize) -> Self {
        self.offset = n;
        self
    }
}

/// Options of [`Store::put_with`](super::Store::put_with).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PutOptions {
    /// Which fields to embed.
    pub index: IndexFields,
    /// How long the item lives.
    pub ttl: Ttl,
}
