//! The operations of a [`Store::batch`](super::Store::batch) and their results.

use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::{Item, Namespace, SearchItem};

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
///
/// ```
/// use std::time::Duration;
/// use stategraph_store::{PutOptions, Ttl};
///
/// let options = PutOptions { ttl: Ttl::After(Duration::from_secs(90)), ..PutOptions::default() };
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ttl {
    /// The store's [`default_ttl`](super::TtlConfig::default_ttl) (LangGraph's
    /// `NOT_PROVIDED`).
    #[default]
    Default,
    /// Forever.
    Never,
    /// This long after the put (or after the last read that refreshed it); must not be zero.
    /// Stores keep it as LangGraph does, in fractional minutes.
    After(Duration),
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
    /// Conditions on the values (see [`filter`](super::filter)).
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
    /// Its lifetime (not zero); `None` never expires. (Already resolved: the convenience
    /// methods turn [`Ttl::Default`] into the store's default.)
    pub ttl: Option<Duration>,
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
            MatchType::Prefix => ns.get(..self.path.len()),
            MatchType::Suffix => ns.get(ns.len() - self.path.len()..),
        }
        .unwrap_or_default();
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

/// One operation of a [`Store::batch`](super::Store::batch).
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
