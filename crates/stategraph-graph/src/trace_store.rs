//! The store a graph's nodes call, its calls traced.

use std::sync::Arc;

use async_trait::async_trait;
use stategraph_store::{IndexConfig, Op, OpResult, Store, StoreError, TtlConfig};
use tracing::Instrument;

/// A store whose calls are `tracing` spans (the store a graph's nodes call goes through one,
/// see `CompiledGraph::with_store`): `store.get`, `store.put`, `store.delete`,
/// `store.list_namespaces`, or `store.batch` for several ops, and `store.search` with
/// OpenInference's `RETRIEVER` kind; fields `store.namespace` (the first op's, labels joined
/// with `.`), `store.ops`, and `results` (items found). Keys, values and queries are not
/// recorded. Without a subscriber a call costs a check of a cached flag.
#[derive(Debug)]
pub(crate) struct TracedStore {
    inner: Arc<dyn Store>,
}

impl TracedStore {
    /// `inner`, traced.
    pub(crate) fn new(inner: Arc<dyn Store>) -> Self {
        Self { inner }
    }
}

/// The span of a batch of `ops`.
fn span_of(ops: &[Op]) -> tracing::Span {
    let namespace = || {
        let labels = match ops.first() {
            Some(Op::Get(op)) => &op.namespace,
            Some(Op::Search(op)) => &op.namespace_prefix,
            Some(Op::Put(op)) => &op.namespace,
            _ => return String::new(),
        };
        labels.join(".")
    };
    let count = i64::try_from(ops.len()).unwrap_or(i64::MAX);
    let empty = tracing::field::Empty;
    match ops {
        [Op::Get(_)] => tracing::info_span!(
            "store.get",
            store.namespace = namespace(),
            store.ops = count,
            results = empty
        ),
        [Op::Search(_)] => tracing::info_span!(
            "store.search",
            openinference.span.kind = "RETRIEVER",
            store.namespace = namespace(),
            store.ops = count,
            results = empty,
        ),
        [Op::Put(op)] if op.value.is_none() => tracing::info_span!(
            "store.delete",
            store.namespace = namespace(),
            store.ops = count,
            results = empty
        ),
        [Op::Put(_)] => tracing::info_span!(
            "store.put",
            store.namespace = namespace(),
            store.ops = count,
            results = empty
        ),
        [Op::ListNamespaces(_)] => {
            tracing::info_span!("store.list_namespaces", store.ops = count, results = empty)
        }
        _ => tracing::info_span!(
            "store.batch",
            store.namespace = namespace(),
            store.ops = count,
            results = empty
        ),
    }
}

#[async_trait]
impl Store for TracedStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let span = span_of(&ops);
        let out = self.inner.batch(ops).instrument(span.clone()).await;
        if !span.is_disabled() {
            match &out {
                Ok(results) => {
                    let found: usize = results
                        .iter()
                        .map(|r| match r {
                            OpResult::Get(item) => usize::from(item.is_some()),
                            OpResult::Search(items) => items.len(),
                            OpResult::ListNamespaces(n) => n.len(),
                            OpResult::Put => 0,
                        })
                        .sum();
                    span.record("results", i64::try_from(found).unwrap_or(i64::MAX));
                }
                Err(e) => span.in_scope(|| tracing::info!(error = %e, "the store call failed")),
            }
        }
        out
    }

    fn ttl_config(&self) -> &TtlConfig {
        self.inner.ttl_config()
    }

    fn index_config(&self) -> Option<&IndexConfig> {
        self.inner.index_config()
    }

    async fn sweep_ttl(&self) -> Result<usize, StoreError> {
        self.inner.sweep_ttl().await
    }

    fn process_local(&self) -> bool {
        self.inner.process_local()
    }
}
