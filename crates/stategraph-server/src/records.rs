//! Threads, assistants and runs, kept as documents of the project's `Store` under the
//! reserved namespace root [`NAMESPACE_ROOT`], so they live in the same database as the
//! checkpoints on every backend.

use std::sync::Arc;

use serde_json::{Map as JsonMap, Value as Json};
use stategraph_checkpoint::store::{IndexFields, PutOptions, SearchOptions, Store, Ttl};

use crate::error::ApiError;

/// The first namespace label of every record the server keeps in the store.
pub const NAMESPACE_ROOT: &str = "stategraph_server";

/// Most records a search reads before sorting and paging.
const SCAN_LIMIT: usize = 100_000;

/// A kind of record, and the namespace it lives in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Thread,
    Assistant,
    /// One version of an assistant, keyed `{assistant_id}:{version}`.
    AssistantVersion,
    Run,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Thread => "threads",
            Kind::Assistant => "assistants",
            Kind::AssistantVersion => "assistant_versions",
            Kind::Run => "runs",
        }
    }
}

/// Record access over the store.
#[derive(Clone, Debug)]
pub(crate) struct Records {
    store: Arc<dyn Store>,
}

impl Records {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The store itself (for the store endpoints).
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) async fn get(&self, kind: Kind, key: &str) -> Result<Option<Json>, ApiError> {
        let item = self.store.get(&[NAMESPACE_ROOT, kind.label()], key).await?;
        Ok(item.map(|i| i.value))
    }

    pub(crate) async fn put(&self, kind: Kind, key: &str, value: Json) -> Result<(), ApiError> {
        let options = PutOptions {
            index: IndexFields::Disabled,
            ttl: Ttl::Never,
        };
        self.store
            .put_with(&[NAMESPACE_ROOT, kind.label()], key, value, options)
            .await?;
        Ok(())
    }

    pub(crate) async fn delete(&self, kind: Kind, key: &str) -> Result<(), ApiError> {
        self.store
            .delete(&[NAMESPACE_ROOT, kind.label()], key)
            .await?;
        Ok(())
    }

    /// Every record of `kind` matching `filter` (store filter syntax), unsorted.
    pub(crate) async fn search(
        &self,
        kind: Kind,
        filter: JsonMap<String, Json>,
    ) -> Result<Vec<Json>, ApiError> {
        let mut options = SearchOptions::new().limit(SCAN_LIMIT);
        if !filter.is_empty() {
            options = options.filter(Json::Object(filter));
        }
        let items = self
            .store
            .search(&[NAMESPACE_ROOT, kind.label()], options)
            .await?;
        Ok(items.into_iter().map(|i| i.item.value).collect())
    }
}

/// The order and paging fields of a search body, with the reference's defaults: by
/// `created_at`, newest first, 10 from the start. Read from the body on its own (not
/// flattened into the body's struct, which would hide the field's name from the message of a
/// value that does not fit).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct Paging {
    #[serde(deserialize_with = "crate::input::search_limit")]
    limit: Option<usize>,
    #[serde(deserialize_with = "crate::input::count")]
    offset: Option<usize>,
    sort_by: Option<String>,
    sort_order: Option<String>,
}

impl Paging {
    /// Every record, in the default order (for counting).
    pub(crate) fn all() -> Self {
        Self {
            limit: Some(usize::MAX),
            ..Self::default()
        }
    }

    /// Sorts and pages `records` as asked.
    pub(crate) fn apply(self, records: Vec<Json>) -> Vec<Json> {
        let key = self.sort_by.as_deref().unwrap_or("created_at");
        let desc = self.sort_order.as_deref() != Some("asc");
        sort_and_page(
            records,
            key,
            desc,
            self.offset.unwrap_or(0),
            self.limit.unwrap_or(10),
        )
    }
}

/// Sorts `records` by the string field `key` (`desc`: newest first) and pages them.
pub(crate) fn sort_and_page(
    mut records: Vec<Json>,
    key: &str,
    desc: bool,
    offset: usize,
    limit: usize,
) -> Vec<Json> {
    records.sort_by(|a, b| {
        let (x, y) = (field_str(a, key), field_str(b, key));
        if desc { y.cmp(x) } else { x.cmp(y) }
    });
    records.into_iter().skip(offset).take(limit).collect()
}

/// A string field of a JSON object, or `""`.
pub(crate) fn field_str<'a>(v: &'a Json, key: &str) -> &'a str {
    v.get(key).and_then(Json::as_str).unwrap_or("")
}
