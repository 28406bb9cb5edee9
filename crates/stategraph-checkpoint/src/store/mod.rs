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
//! use stategraph_checkpoint::store::*;
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

mod embed;
pub mod filter;
mod memory;
pub mod path;
mod sealed;
mod time;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value as Json};

pub use embed::{EmbeddingError, Embeddings, HashingEmbeddings};
pub use memory::InMemoryStore;
pub use sealed::{SEALED_KEY, SealedStore};
pub use time::Timestamp;

use crate::BoxError;
use path::FieldPath;

/// A namespace: a path of non-empty labels without dots, e.g. `["users", "u1", "memories"]`.
pub type Namespace = Vec<String>;

/// A stored document.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The document (always a JSON object).
    pub value: Json,
    /// Its key, unique within the namespace.
    pub key: String,
    /// Its namespace.
    pub namespace: Namespace,
    /// When it was first put (kept by later puts of the same key).
    pub created_at: Timestamp,
    /// When it was last put.
    pub updated_at: Timestamp,
}

impl Item {
    /// LangGraph's `Item.dict()`: the namespace as a list and the timestamps in ISO format.
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.to_iso(),
            "updated_at": self.updated_at.to_iso(),
        })
    }
}

/// A search result: the item and, for a semantic search, its similarity to the query.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchItem {
    /// The item.
    pub item: Item,
    /// Cosine similarity of the item's best-matching field to the query (higher is closer);
    /// `None` when the search had no query or the item has no vectors.
    pub score: Option<f64>,
}

impl std::ops::Deref for SearchItem {
    type Target = Item;
    fn deref(&self) -> &Item {
        &self.item
    }
}

impl SearchItem {
    /// [`Item::to_json`] plus `score`.
    pub fn to_json(&self) -> Json {
        let mut j = self.item.to_json();
        j["score"] = self.score.map_or(Json::Null, Json::from);
        j
    }
}

/// Which fields of a put value get embedded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexFields {
    /// The store's configured fields (LangGraph's `index=None`).
    #[default]
    Default,
    /// None: the item is stored but not searchable by meaning (`index=False`).
    Disabled,
    /// These paths instead of the configured ones (`index=["a.b", …]`).
    Fields(Vec<String>),
}

/// How long a put item lives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Ttl {
    /// The store's `default_ttl` (LangGraph's `NOT_PROVIDED`).
    #[default]
    Default,
    /// Forever.
    Never,
    /// This many minutes after the put (or after the last read that refreshed it).
    Minutes(f64),
}

/// Read one item.
#[derive(Clone, Debug, PartialEq)]
pub struct GetOp {
    /// Its namespace.
    pub namespace: Namespace,
    /// Its key.
    pub key: String,
    /// Push its expiry back by its TTL.
    pub refresh_ttl: bool,
}

/// Find items under a namespace prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOp {
    /// Items whose namespace starts with these labels (empty: every item).
    pub namespace_prefix: Namespace,
    /// Conditions on the values (see [`filter`]).
    pub filter: Option<Map<String, Json>>,
    /// At most this many results.
    pub limit: usize,
    /// Skip this many first.
    pub offset: usize,
    /// Rank by similarity to this text (needs an index; ignored without one).
    pub query: Option<String>,
    /// Push the results' expiry back by their TTL.
    pub refresh_ttl: bool,
}

/// Store, replace or (with `value: None`) delete one item.
#[derive(Clone, Debug, PartialEq)]
pub struct PutOp {
    /// Its namespace.
    pub namespace: Namespace,
    /// Its key.
    pub key: String,
    /// The document (a JSON object), or `None` to delete.
    pub value: Option<Json>,
    /// Which fields to embed.
    pub index: IndexFields,
    /// Its lifetime, in minutes; `None` never expires. (Already resolved: the convenience
    /// methods turn [`Ttl::Default`] into the store's default.)
    pub ttl: Option<f64>,
}

/// Whether a [`MatchCondition`] anchors at the start or the end of a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchType {
    /// The namespace starts with the path.
    Prefix,
    /// The namespace ends with the path.
    Suffix,
}

/// A namespace pattern; the label `*` matches any one label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchCondition {
    /// Anchor.
    pub match_type: MatchType,
    /// Labels, `*` for any one.
    pub path: Vec<String>,
}

impl MatchCondition {
    /// Whether `ns` satisfies the condition.
    pub fn matches(&self, ns: &[String]) -> bool {
        if self.path.len() > ns.len() {
            return false;
        }
        let part = match self.match_type {
            MatchType::Prefix => &ns[..self.path.len()],
            MatchType::Suffix => &ns[ns.len() - self.path.len()..],
        };
        part.iter().zip(&self.path).all(|(l, p)| p == "*" || l == p)
    }
}

/// List the distinct namespaces.
#[derive(Clone, Debug, PartialEq)]
pub struct ListNamespacesOp {
    /// Every condition must hold.
    pub match_conditions: Vec<MatchCondition>,
    /// Truncate namespaces to this many labels (then deduplicate).
    pub max_depth: Option<usize>,
    /// At most this many.
    pub limit: usize,
    /// Skip this many first.
    pub offset: usize,
}

/// One operation of a [`Store::batch`].
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// See [`GetOp`].
    Get(GetOp),
    /// See [`SearchOp`].
    Search(SearchOp),
    /// See [`PutOp`].
    Put(PutOp),
    /// See [`ListNamespacesOp`].
    ListNamespaces(ListNamespacesOp),
}

/// The result of one [`Op`], in the same position.
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// The item, if present and not expired.
    Get(Option<Item>),
    /// The matches, best first.
    Search(Vec<SearchItem>),
    /// Puts return nothing.
    Put,
    /// The namespaces, sorted.
    ListNamespaces(Vec<Namespace>),
}

/// Semantic-search configuration (LangGraph's `IndexConfig`).
#[derive(Clone)]
pub struct IndexConfig {
    /// Vector length.
    pub dims: usize,
    /// The model.
    pub embed: Arc<dyn Embeddings>,
    /// Paths embedded by default (`["$"]`: the whole document).
    pub fields: Vec<String>,
}

impl fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("embed", &self.embed)
            .field("fields", &self.fields)
            .finish()
    }
}

impl IndexConfig {
    /// `dims`-dimensional vectors from `embed`, of the whole document.
    pub fn new(dims: usize, embed: Arc<dyn Embeddings>) -> Self {
        Self {
            dims,
            embed,
            fields: vec!["$".into()],
        }
    }

    /// Embed these paths by default instead of the whole document.
    pub fn with_fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the configured paths.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.dims == 0 {
            return Err(StoreError::InvalidConfig(
                "index dims must be at least 1".into(),
            ));
        }
        for f in &self.fields {
            FieldPath::parse(f)?;
        }
        Ok(())
    }

    /// The parsed paths a put embeds, or none for `index: false`.
    pub fn paths_for(&self, index: &IndexFields) -> Result<Vec<FieldPath>, StoreError> {
        match index {
            IndexFields::Disabled => Ok(Vec::new()),
            IndexFields::Default => self.fields.iter().map(|f| FieldPath::parse(f)).collect(),
            IndexFields::Fields(fs) => fs.iter().map(|f| FieldPath::parse(f)).collect(),
        }
    }

    /// Embeds `texts` (deduplicated, in one call), checking count and dimensions.
    pub async fn embed_texts(
        &self,
        texts: &[String],
    ) -> Result<BTreeMap<String, Vec<f32>>, StoreError> {
        let distinct: Vec<String> = texts
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if distinct.is_empty() {
            return Ok(BTreeMap::new());
        }
        let vectors = self.embed.embed_documents(&distinct).await?;
        if vectors.len() != distinct.len() {
            return Err(EmbeddingError::Count {
                expected: distinct.len(),
                got: vectors.len(),
            }
            .into());
        }
        for v in &vectors {
            self.check_dims(v)?;
        }
        Ok(distinct.into_iter().zip(vectors).collect())
    }

    /// Embeds a search query.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, StoreError> {
        let v = self.embed.embed_query(query).await?;
        self.check_dims(&v)?;
        Ok(v)
    }

    fn check_dims(&self, v: &[f32]) -> Result<(), StoreError> {
        if v.len() != self.dims {
            return Err(EmbeddingError::Dimensions {
                expected: self.dims,
                got: v.len(),
            }
            .into());
        }
        Ok(())
    }
}

/// Which vectors a put must (re)compute, given what the stored item had.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorPlan {
    /// `(field_name, text)` to embed and upsert.
    pub embed: Vec<(String, String)>,
    /// Field names whose stored vectors stay as they are.
    pub keep: Vec<String>,
}

impl VectorPlan {
    /// Plans a put of `new_value` with `paths`, over the stored `old_value` whose vectors
    /// exist for `old_fields`: a field is re-embedded only if it had no vector or its text
    /// changed. Every stored vector not in `embed` or `keep` must be deleted.
    pub fn new(
        new_value: &Json,
        paths: &[FieldPath],
        old: Option<(&Json, &BTreeSet<String>)>,
    ) -> Self {
        let wanted = path::texts_to_embed(new_value, paths);
        let old_texts: BTreeMap<String, String> = match old {
            Some((v, _)) => path::texts_to_embed(v, paths).into_iter().collect(),
            None => BTreeMap::new(),
        };
        let mut plan = Self::default();
        for (field, text) in wanted {
            let unchanged = old.is_some_and(|(_, fields)| fields.contains(&field))
                && old_texts.get(&field) == Some(&text);
            if unchanged {
                plan.keep.push(field);
            } else {
                plan.embed.push((field, text));
            }
        }
        plan
    }
}

/// TTL behaviour of a store (LangGraph's `TTLConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct TtlConfig {
    /// Minutes an item lives when a put does not say (`None`: forever).
    pub default_ttl: Option<f64>,
    /// Whether reads refresh expiry by default.
    pub refresh_on_read: bool,
    /// How often [`spawn_ttl_sweeper`] deletes expired items, in minutes (default 5).
    pub sweep_interval_minutes: Option<f64>,
}

impl Default for TtlConfig {
    fn default() -> Self {
        Self {
            default_ttl: None,
            refresh_on_read: true,
            sweep_interval_minutes: None,
        }
    }
}

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

/// What can go wrong in a store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace breaks the rules (no empty labels, no `.`, not empty for a put, not under
    /// the reserved root `langgraph`).
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The namespace as given.
        namespace: Namespace,
        /// The rule it breaks.
        reason: String,
    },
    /// A put value is not a JSON object.
    #[error("invalid value for {namespace:?}/{key}: {reason}")]
    InvalidValue {
        /// Its namespace.
        namespace: Namespace,
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A search filter is malformed.
    #[error("invalid filter on `{key}`: {reason}")]
    InvalidFilter {
        /// The filtered field.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An index path is malformed.
    #[error("invalid index path `{path}`: {reason}")]
    InvalidIndexPath {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The store's configuration is unusable.
    #[error("invalid store configuration: {0}")]
    InvalidConfig(String),
    /// Embedding failed.
    #[error(transparent)]
    Embedding(#[from] EmbeddingError),
    /// A stored row cannot be read back.
    #[error("corrupt store row {namespace:?}/{key}: {reason}")]
    Corrupt {
        /// Its namespace.
        namespace: Namespace,
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The database failed.
    #[error("{backend} store: {source}")]
    Backend {
        /// `sqlite`, `postgres`, …
        backend: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
}

impl StoreError {
    /// Wraps a driver error.
    pub fn backend(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            backend,
            source: source.into(),
        }
    }
}

/// Checks a namespace: labels non-empty, without `.` or NUL; for a put also non-empty and not
/// under the reserved root `langgraph`.
pub fn validate_namespace(namespace: &[String], for_put: bool) -> Result<(), StoreError> {
    let bad = |reason: String| StoreError::InvalidNamespace {
        namespace: namespace.to_vec(),
        reason,
    };
    if for_put && namespace.is_empty() {
        return Err(bad("a put needs a non-empty namespace".into()));
    }
    for (i, label) in namespace.iter().enumerate() {
        if label.is_empty() {
            return Err(bad(format!("label {i} is empty")));
        }
        if label.contains('.') {
            return Err(bad(format!("label {i} ({label:?}) contains `.`")));
        }
        if label.contains('\0') {
            return Err(bad(format!("label {i} contains a NUL character")));
        }
    }
    if for_put && namespace.first().is_some_and(|l| l == "langgraph") {
        return Err(bad("the root label `langgraph` is reserved".into()));
    }
    Ok(())
}

/// A read op of a batch, a search's query already embedded.
#[derive(Debug)]
pub enum ReadOp {
    /// A get.
    Get(GetOp),
    /// A search, with its `query` embedded when the store has an index.
    Search(SearchOp, Option<Vec<f32>>),
    /// A list-namespaces.
    ListNamespaces(ListNamespacesOp),
}

/// One step of a batch as backends run it, in the batch's order.
#[derive(Debug)]
pub enum BatchStep {
    /// Consecutive puts, applied together.
    Puts {
        /// One put per address (the last one given for it), in the order the addresses
        /// first appear.
        ops: Vec<PutOp>,
        /// How many puts the batch gave (one `OpResult::Put` is due for each).
        given: usize,
    },
    /// Consecutive reads; each yields one result.
    Reads(Vec<ReadOp>),
}

/// Prepares a batch for a backend: validates every op ([`validate_ops`]), embeds the search
/// queries (before any database work, so no transaction waits on the model), and groups the
/// ops into [`BatchStep`]s.
pub async fn plan_batch(
    ops: Vec<Op>,
    index: Option<&IndexConfig>,
) -> Result<Vec<BatchStep>, StoreError> {
    validate_ops(&ops)?;
    let mut steps: Vec<BatchStep> = Vec::new();
    let mut positions: std::collections::HashMap<(Namespace, String), usize> =
        std::collections::HashMap::new();
    for op in ops {
        match op {
            Op::Put(put) => {
                if !matches!(steps.last(), Some(BatchStep::Puts { .. })) {
                    steps.push(BatchStep::Puts {
                        ops: Vec::new(),
                        given: 0,
                    });
                    positions.clear();
                }
                if let Some(BatchStep::Puts { ops, given }) = steps.last_mut() {
                    *given += 1;
                    let address = (put.namespace.clone(), put.key.clone());
                    match positions.get(&address) {
                        Some(&i) => ops[i] = put,
                        None => {
                            positions.insert(address, ops.len());
                            ops.push(put);
                        }
                    }
                }
            }
            Op::Get(get) => push_read(&mut steps, ReadOp::Get(get)),
            Op::ListNamespaces(list) => push_read(&mut steps, ReadOp::ListNamespaces(list)),
            Op::Search(search) => {
                let query = match (&search.query, index) {
                    (Some(q), Some(index)) => Some(index.embed_query(q).await?),
                    _ => None,
                };
                push_read(&mut steps, ReadOp::Search(search, query));
            }
        }
    }
    Ok(steps)
}

fn push_read(steps: &mut Vec<BatchStep>, read: ReadOp) {
    match steps.last_mut() {
        Some(BatchStep::Reads(reads)) => reads.push(read),
        _ => steps.push(BatchStep::Reads(vec![read])),
    }
}

/// Validates every op of a batch before anything runs: namespaces, put values, filters and
/// index paths. Backends call it first so a bad batch changes nothing.
pub fn validate_ops(ops: &[Op]) -> Result<(), StoreError> {
    for op in ops {
        match op {
            Op::Get(g) => validate_namespace(&g.namespace, false)?,
            Op::Search(s) => {
                validate_namespace(&s.namespace_prefix, false)?;
                if let Some(f) = &s.filter {
                    filter::parse_filter(f)?;
                }
            }
            Op::Put(p) => {
                validate_namespace(&p.namespace, true)?;
                if let Some(v) = &p.value
                    && !v.is_object()
                {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: "a stored value must be a JSON object".into(),
                    });
                }
                if let Some(ttl) = p.ttl
                    && !(ttl.is_finite() && ttl > 0.0)
                {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: format!("ttl must be a positive number of minutes, got {ttl}"),
                    });
                }
                if let IndexFields::Fields(fs) = &p.index {
                    for f in fs {
                        FieldPath::parse(f)?;
                    }
                }
            }
            Op::ListNamespaces(l) => {
                for c in &l.match_conditions {
                    validate_namespace(
                        &c.path
                            .iter()
                            .filter(|l| *l != "*")
                            .cloned()
                            .collect::<Vec<_>>(),
                        false,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Orders and pages the namespaces of a [`ListNamespacesOp`]: filter, truncate to
/// `max_depth`, deduplicate, sort label by label, then offset and limit. Backends that list
/// distinct namespaces in SQL finish with this.
pub fn finish_list_namespaces(
    namespaces: impl IntoIterator<Item = Namespace>,
    op: &ListNamespacesOp,
) -> Vec<Namespace> {
    let set: BTreeSet<Namespace> = namespaces
        .into_iter()
        .filter(|ns| op.match_conditions.iter().all(|c| c.matches(ns)))
        .map(|mut ns| {
            if let Some(d) = op.max_depth {
                ns.truncate(d);
            }
            ns
        })
        .collect();
    set.into_iter().skip(op.offset).take(op.limit).collect()
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Options of [`Store::search`].
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOptions {
    /// See [`SearchOp::query`].
    pub query: Option<String>,
    /// See [`SearchOp::filter`]; must be a JSON object.
    pub filter: Option<Json>,
    /// See [`SearchOp::limit`] (default 10).
    pub limit: usize,
    /// See [`SearchOp::offset`].
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
    /// Keep only values matching `filter` (a JSON object; see [`filter`]).
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

/// Options of [`Store::list_namespaces`].
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

/// Options of [`Store::put_with`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PutOptions {
    /// Which fields to embed.
    pub index: IndexFields,
    /// How long the item lives.
    pub ttl: Ttl,
}

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

    /// The item at `namespace`/`key`, refreshing its TTL per the store's `refresh_on_read`.
    async fn get(&self, namespace: &[&str], key: &str) -> Result<Option<Item>, StoreError> {
        let op = GetOp {
            namespace: ns(namespace),
            key: key.to_owned(),
            refresh_ttl: self.ttl_config().refresh_on_read,
        };
        match self.batch(vec![Op::Get(op)]).await?.pop() {
            Some(OpResult::Get(item)) => Ok(item),
            _ => Err(StoreError::InvalidConfig(
                "batch returned the wrong result".into(),
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
            _ => Err(StoreError::InvalidConfig(
                "batch returned the wrong result".into(),
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
            Ttl::Minutes(m) => Some(m),
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
            _ => Err(StoreError::InvalidConfig(
                "batch returned the wrong result".into(),
            )),
        }
    }
}

/// Starts a background task that calls [`Store::sweep_ttl`] every `interval` (default: the
/// store's `sweep_interval_minutes`, else 5 minutes) until the handle is aborted or dropped
/// with the runtime. Sweep errors are retried at the next tick.
pub fn spawn_ttl_sweeper(
    store: Arc<dyn Store>,
    interval: Option<std::time::Duration>,
) -> tokio::task::JoinHandle<()> {
    let every = interval.unwrap_or_else(|| {
        let minutes = store.ttl_config().sweep_interval_minutes.unwrap_or(5.0);
        std::time::Duration::from_secs_f64((minutes * 60.0).max(0.001))
    });
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let _ = store.sweep_ttl().await;
        }
    })
}
