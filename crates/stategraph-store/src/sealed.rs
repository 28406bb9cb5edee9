//! [`SealedStore`]: store values encrypted at rest, around any [`Store`].
//!
//! Each value's top-level fields are encrypted together into one field, [`SEALED_KEY`]
//! (`"<cipher>:<hex>"`), except the fields kept readable
//! ([`SealedStore::with_clear`]). What that means for the store's features:
//! - `get`, `put`, `delete`, `list_namespaces`, TTLs: unchanged.
//! - `search` filters on sealed fields run after decryption, in this process (the search asks
//!   the inner store for every candidate, then applies the filter, `offset` and `limit`);
//!   filters on clear fields run in the database.
//! - Semantic search embeds only clear fields: an index (or a per-put `index`) naming a sealed
//!   field, or the whole document (`$`), is refused — embedding vectors reveal much of the
//!   text they came from, so a field worth sealing is not worth indexing in the clear.
//! - Python's store sees the clear fields and the opaque [`SEALED_KEY`] entry.
//!
//! A wrong key or altered bytes is [`StoreError::Corrupt`] naming the item.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value as Json};

use super::filter::{Condition, matches, parse_filter};
use super::{
    IndexConfig, IndexFields, Item, Op, OpResult, PutOp, SearchItem, Store, StoreError, TtlConfig,
};
use stategraph_value::cipher::Cipher;
use stategraph_value::cipher::{hex, unhex};

pub use stategraph_value::cipher::SEALED_KEY;

/// A [`Store`] whose values are encrypted, except for chosen top-level fields.
#[derive(Clone, Debug)]
pub struct SealedStore {
    inner: Arc<dyn Store>,
    cipher: Arc<dyn Cipher>,
    clear: BTreeSet<String>,
}

/// The top-level field a filter condition or index path reads.
fn top_field(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

impl SealedStore {
    /// `inner`, every field of its values sealed with `cipher` (e.g.
    /// [`AesEaxCipher`](stategraph_value::cipher::AesEaxCipher)). Fails if `inner` embeds documents (see
    /// [`with_clear`](Self::with_clear)).
    pub fn new(inner: Arc<dyn Store>, cipher: Arc<dyn Cipher>) -> Result<Self, StoreError> {
        Self::with_clear(inner, cipher, Vec::<String>::new())
    }

    /// Like [`new`](Self::new), keeping the top-level `fields` readable (filterable in the
    /// database, embeddable). Fails if `inner`'s index embeds any other field, or `$`.
    pub fn with_clear<I: IntoIterator<Item = S>, S: Into<String>>(
        inner: Arc<dyn Store>,
        cipher: Arc<dyn Cipher>,
        fields: I,
    ) -> Result<Self, StoreError> {
        let s = Self {
            inner,
            cipher,
            clear: fields.into_iter().map(Into::into).collect(),
        };
        s.check_index()?;
        Ok(s)
    }

    fn check_index(&self) -> Result<(), StoreError> {
        match self.inner.index_config() {
            Some(index) => self.check_fields(&index.fields),
            None => Ok(()),
        }
    }

    fn check_fields(&self, fields: &[String]) -> Result<(), StoreError> {
        for f in fields {
            if f == "$" || !self.clear.contains(top_field(f)) {
                return Err(StoreError::InvalidConfig(format!(
                    "the index field `{f}` would embed sealed data: index only fields kept \
                     clear (SealedStore::with_clear), never `$`"
                )));
            }
        }
        Ok(())
    }

    fn seal(&self, op: &PutOp, value: &Json) -> Result<Json, StoreError> {
        let Json::Object(fields) = value else {
            return Ok(value.clone());
        };
        let (clear, sealed): (Map<String, Json>, Map<String, Json>) = fields
            .clone()
            .into_iter()
            .partition(|(k, _)| self.clear.contains(k));
        if sealed.is_empty() {
            return Ok(Json::Object(clear));
        }
        let corrupt = |reason: String| StoreError::Corrupt {
            namespace: op.namespace.clone(),
            key: op.key.clone(),
            reason,
        };
        let plain = serde_json::to_vec(&sealed).map_err(|e| corrupt(e.to_string()))?;
        let (name, bytes) = self
            .cipher
            .encrypt(&plain)
            .map_err(|e| corrupt(format!("cannot encrypt: {e}")))?;
        let mut out = clear;
        out.insert(
            SEALED_KEY.into(),
            Json::String(format!("{name}:{}", hex(&bytes))),
        );
        Ok(Json::Object(out))
    }

    fn unseal(&self, item: &mut Item) -> Result<(), StoreError> {
        let Json::Object(fields) = &mut item.value else {
            return Ok(());
        };
        let Some(sealed) = fields.remove(SEALED_KEY) else {
            return Ok(());
        };
        let corrupt = |reason: &str| StoreError::Corrupt {
            namespace: item.namespace.clone(),
            key: item.key.clone(),
            reason: format!("sealed value: {reason}"),
        };
        let text = sealed.as_str().ok_or_else(|| corrupt("not a string"))?;
        let (name, hexed) = text
            .split_once(':')
            .ok_or_else(|| corrupt("not `<cipher>:<hex>`"))?;
        let bytes = unhex(hexed).ok_or_else(|| corrupt("not hex"))?;
        let plain = self
            .cipher
            .decrypt(name, &bytes)
            .map_err(|e| corrupt(&e.to_string()))?;
        let opened: Map<String, Json> =
            serde_json::from_slice(&plain).map_err(|e| corrupt(&e.to_string()))?;
        fields.extend(opened);
        Ok(())
    }
}

/// What to do with a search's results here: conditions on sealed fields, and the page.
struct LocalPage {
    conditions: Vec<Condition>,
    offset: usize,
    limit: usize,
}

#[async_trait]
impl Store for SealedStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let mut local: Vec<Option<LocalPage>> = Vec::with_capacity(ops.len());
        let mut sent = Vec::with_capacity(ops.len());
        for op in ops {
            let mut page = None;
            let op = match op {
                Op::Put(mut put) => {
                    if let IndexFields::Fields(fields) = &put.index
                        && self.inner.index_config().is_some()
                    {
                        self.check_fields(fields)?;
                    }
                    if let Some(value) = &put.value {
                        put.value = Some(self.seal(&put, value)?);
                    }
                    Op::Put(put)
                }
                Op::Search(mut search) => {
                    if let Some(filter) = search.filter.take() {
                        let (clear, sealed): (Map<String, Json>, Map<String, Json>) = filter
                            .into_iter()
                            .partition(|(k, _)| self.clear.contains(top_field(k)));
                        let conditions = parse_filter(&sealed)?;
                        search.filter = (!clear.is_empty()).then_some(clear);
                        if !conditions.is_empty() {
                            page = Some(LocalPage {
                                conditions,
                                offset: search.offset,
                                limit: search.limit,
                            });
                            search.offset = 0;
                            search.limit = usize::MAX;
                        }
                    }
                    Op::Search(search)
                }
                other => other,
            };
            local.push(page);
            sent.push(op);
        }
        let mut results = self.inner.batch(sent).await?;
        for (result, page) in results.iter_mut().zip(local) {
            match result {
                OpResult::Get(Some(item)) => self.unseal(item)?,
                OpResult::Search(items) => {
                    for hit in items.iter_mut() {
                        self.unseal(&mut hit.item)?;
                    }
                    if let Some(page) = page {
                        let kept: Vec<SearchItem> = std::mem::take(items)
                            .into_iter()
                            .filter(|h| matches(&h.item.value, &page.conditions))
                            .skip(page.offset)
                            .take(page.limit)
                            .collect();
                        *items = kept;
                    }
                }
                _ => {}
            }
        }
        Ok(results)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::InMemoryStore;
    use stategraph_value::cipher::AesEaxCipher;

    proptest::proptest! {
        /// Whatever text sits in a stored value's sealed field (another program's, a damaged
        /// row's), reading it is the item or a `Corrupt` error, never a panic.
        #[test]
        fn unsealing_any_text_never_panics(
            text in proptest::prop_oneof![
                proptest::arbitrary::any::<String>(),
                "[a-z0-9-]{0,12}:[0-9a-fA-F+é]{0,40}",
            ],
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let inner: Arc<dyn Store> = Arc::new(InMemoryStore::new());
                let cipher = Arc::new(AesEaxCipher::new(b"0123456789abcdef").unwrap());
                let sealed = SealedStore::new(Arc::clone(&inner), cipher).unwrap();
                inner.put(&["ns"], "k", json!({ SEALED_KEY: text })).await.unwrap();
                match sealed.get(&["ns"], "k").await {
                    Ok(_) | Err(StoreError::Corrupt { .. }) => {}
                    Err(other) => panic!("unexpected error: {other}"),
                }
            });
        }
    }
}
