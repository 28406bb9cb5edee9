//! [`InMemoryStore`]: the store in process memory, for development, tests and short-lived
//! programs. Same semantics as the database stores, TTL included.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::RwLock;

use super::{
    BatchStep, GetOp, IndexConfig, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, ReadOp,
    SearchItem, SearchOp, Store, StoreError, StoreOptions, Timestamp, TtlConfig, VectorPlan,
    cosine, filter, finish_list_namespaces, plan_batch,
};

#[derive(Debug)]
struct Entry {
    item: Item,
    ttl: Option<Duration>,
    expires_at: Option<Timestamp>,
    vectors: BTreeMap<String, Vec<f32>>,
}

impl Entry {
    fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|e| e > now)
    }

    fn refresh(&mut self, now: Timestamp) {
        if let Some(ttl) = self.ttl {
            self.expires_at = Some(now.plus(ttl));
        }
    }
}

type Items = BTreeMap<Namespace, BTreeMap<String, Entry>>;

/// A [`Store`] in process memory.
///
/// Unlike LangGraph's `InMemoryStore` it keeps `created_at` across updates, orders plain
/// searches by `updated_at` (newest first) and supports TTLs, exactly as the database stores
/// do, so code tested against it behaves the same in production.
///
/// Nothing to connect to: build it with [`new`](Self::new) and the `with_*` setters (or
/// [`from_options`](Self::from_options)), as the database stores' configs are built.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stategraph_store::*;
///
/// let store = InMemoryStore::new()
///     .with_index(IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))))
///     .with_ttl(TtlConfig::default().default_ttl(Duration::from_secs(3600)));
/// assert_eq!(store.ttl_config().default_ttl, Some(Duration::from_secs(3600)));
/// ```
#[derive(Debug, Default)]
pub struct InMemoryStore {
    items: RwLock<Items>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl InMemoryStore {
    /// An empty store without semantic search.
    pub fn new() -> Self {
        Self::default()
    }

    /// Embeds documents with `index` so `search` can rank by meaning.
    pub fn with_index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Uses `ttl` for default TTLs, read refresh and the clock.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// An empty store with `options`' index (if any) and TTL behaviour.
    pub fn from_options(options: StoreOptions) -> Self {
        let StoreOptions { index, ttl } = options;
        Self {
            items: RwLock::default(),
            index,
            ttl,
        }
    }

    fn get(items: &mut Items, op: &GetOp, now: Timestamp) -> Option<Item> {
        let entry = items.get_mut(&op.namespace)?.get_mut(&op.key)?;
        if !entry.live(now) {
            return None;
        }
        if op.refresh_ttl {
            entry.refresh(now);
        }
        Some(entry.item.clone())
    }

    fn search(
        items: &mut Items,
        op: &SearchOp,
        query: Option<&Vec<f32>>,
        now: Timestamp,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let conditions = match &op.filter {
            Some(f) => filter::parse_filter(f)?,
            None => Vec::new(),
        };
        let mut hits: Vec<(Option<f64>, &mut Entry)> = items
            .iter_mut()
            .filter(|(ns, _)| ns.starts_with(&op.namespace_prefix))
            .flat_map(|(_, m)| m.values_mut())
            .filter(|e| e.live(now) && filter::matches(&e.item.value, &conditions))
            .map(|e| {
                let score = query.and_then(|q| {
                    e.vectors
                        .values()
                        .map(|v| cosine(v, q))
                        .max_by(f64::total_cmp)
                });
                (score, e)
            })
            .collect();
        hits.sort_by(|(sa, a), (sb, b)| {
            // Scored before unscored, then by score, then newest first, then by address.
            sb.is_some()
                .cmp(&sa.is_some())
                .then_with(|| sb.unwrap_or(0.0).total_cmp(&sa.unwrap_or(0.0)))
                .then_with(|| b.item.updated_at.cmp(&a.item.updated_at))
                .then_with(|| a.item.namespace.cmp(&b.item.namespace))
                .then_with(|| a.item.key.cmp(&b.item.key))
        });
        Ok(hits
            .into_iter()
            .skip(op.offset)
            .take(op.limit)
            .map(|(score, e)| {
                if op.refresh_ttl {
                    e.refresh(now);
                }
                SearchItem {
                    item: e.item.clone(),
                    score,
                }
            })
            .collect())
    }

    /// Applies a run of consecutive puts (one per address, see [`BatchStep::Puts`]) with one
    /// embedding call.
    async fn put_run(&self, items: &mut Items, run: &[PutOp]) -> Result<(), StoreError> {
        let now = self.ttl.clock.now();
        // Plan the vectors against what is stored, then embed every new text at once.
        let mut plans = Vec::new();
        for op in run {
            let (Some(value), Some(index)) = (&op.value, &self.index) else {
                plans.push(VectorPlan::default());
                continue;
            };
            let paths = index.paths_for(&op.index)?;
            let old = items
                .get(&op.namespace)
                .and_then(|m| m.get(&op.key))
                .filter(|e| e.live(now))
                .map(|e| {
                    (
                        &e.item.value,
                        e.vectors.keys().cloned().collect::<BTreeSet<_>>(),
                    )
                });
            plans.push(VectorPlan::new(
                value,
                &paths,
                old.as_ref().map(|(v, f)| (*v, f)),
            ));
        }
        let texts: Vec<String> = plans
            .iter()
            .flat_map(|p| p.embed.iter().map(|(_, t)| t.clone()))
            .collect();
        let vectors = match &self.index {
            Some(index) => index.embed_texts(&texts).await?,
            None => BTreeMap::new(),
        };
        for (op, plan) in run.iter().zip(plans) {
            let Some(value) = &op.value else {
                if let Some(m) = items.get_mut(&op.namespace) {
                    m.remove(&op.key);
                    if m.is_empty() {
                        items.remove(&op.namespace);
                    }
                }
                continue;
            };
            let slot = items.entry(op.namespace.clone()).or_default();
            let old = slot.remove(&op.key).filter(|e| e.live(now));
            let created_at = old.as_ref().map_or(now, |e| e.item.created_at);
            let mut kept = old.map(|e| e.vectors).unwrap_or_default();
            kept.retain(|field, _| plan.keep.contains(field));
            for (field, text) in plan.embed {
                if let Some(v) = vectors.get(&text) {
                    kept.insert(field, v.clone());
                }
            }
            slot.insert(
                op.key.clone(),
                Entry {
                    item: Item {
                        value: value.clone(),
                        key: op.key.clone(),
                        namespace: op.namespace.clone(),
                        created_at,
                        updated_at: now,
                    },
                    ttl: op.ttl,
                    expires_at: op.ttl.map(|t| now.plus(t)),
                    vectors: kept,
                },
            );
        }
        Ok(())
    }

    fn list_namespaces(items: &Items, op: &ListNamespacesOp, now: Timestamp) -> Vec<Namespace> {
        let live = items
            .iter()
            .filter(|(_, m)| m.values().any(|e| e.live(now)))
            .map(|(ns, _)| ns.clone());
        finish_list_namespaces(live, op)
    }
}

#[async_trait]
impl Store for InMemoryStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let steps = plan_batch(ops, self.index.as_ref()).await?;
        let mut items = self.items.write().await;
        let mut results = Vec::new();
        for step in steps {
            match step {
                BatchStep::Puts { ops, given } => {
                    self.put_run(&mut items, &ops).await?;
                    results.extend((0..given).map(|_| OpResult::Put));
                }
                BatchStep::Reads(reads) => {
                    for read in reads {
                        let now = self.ttl.clock.now();
                        results.push(match &read {
                            ReadOp::Get(g) => OpResult::Get(Self::get(&mut items, g, now)),
                            ReadOp::Search(s, query) => {
                                OpResult::Search(Self::search(&mut items, s, query.as_ref(), now)?)
                            }
                            ReadOp::ListNamespaces(l) => {
                                OpResult::ListNamespaces(Self::list_namespaces(&items, l, now))
                            }
                        });
                    }
                }
            }
        }
        Ok(results)
    }

    fn ttl_config(&self) -> &TtlConfig {
        &self.ttl
    }

    fn index_config(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    fn process_local(&self) -> bool {
        true
    }

    async fn sweep_ttl(&self) -> Result<usize, StoreError> {
        let now = self.ttl.clock.now();
        let mut items = self.items.write().await;
        let mut n = 0;
        items.retain(|_, m| {
            m.retain(|_, e| {
                let keep = e.live(now);
                n += usize::from(!keep);
                keep
            });
            !m.is_empty()
        });
        Ok(n)
    }
}
