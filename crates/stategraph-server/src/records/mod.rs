//! The server's records in the project's `Store`: threads (what is not a run's), assistants
//! and their versions, and crons, kept as documents under the reserved namespace root
//! [`NAMESPACE_ROOT`], so they live in the same database as the checkpoints on every
//! backend. Runs, and what they leave their threads with, are the run queue's.
//!
//! Each kind of record is a serde struct with a flattened map for the fields it passes
//! through untouched; a record changes through its intent methods (`start_run`,
//! `merge_metadata`, …), not by editing JSON fields.

mod assistant;
mod run;
mod thread;

use std::sync::Arc;
use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map as JsonMap, Value as Json};
use stategraph_store::{GetOp, IndexFields, Op, OpResult, PutOp, SearchOptions, Store};

use crate::error::ApiError;

pub(crate) use assistant::{AssistantRecord, AssistantVersion, version_key};
pub(crate) use run::RunRecord;
pub(crate) use thread::{HasGraph, ThreadDoc, ThreadHead, ThreadRecord, ThreadTtl, TtlStrategy};

/// The first namespace label of every record the server keeps in the store.
pub const NAMESPACE_ROOT: &str = "stategraph_server";

/// Most records a search reads before sorting and paging.
const SCAN_LIMIT: usize = 100_000;

/// A JSON object.
pub(crate) type Object = JsonMap<String, Json>;

/// A time as the records write it (Python's `isoformat()` of a UTC datetime).
pub(crate) fn iso(t: SystemTime) -> String {
    let micros = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    };
    stategraph_checkpoint::iso_from_unix_micros(micros)
}

/// A kind of record, and the namespace it lives in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Thread,
    Assistant,
    /// One version of an assistant, keyed `{assistant_id}:{version}`.
    AssistantVersion,
    Cron,
    /// What the server notes of itself (what it migrated, say).
    Meta,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Thread => "threads",
            Kind::Assistant => "assistants",
            Kind::AssistantVersion => "assistant_versions",
            Kind::Cron => "crons",
            Kind::Meta => "meta",
        }
    }
}

/// A record the server keeps: its kind and its key.
pub(crate) trait Record: Serialize + DeserializeOwned {
    /// Where records of this type live.
    const KIND: Kind;
    /// This record's key.
    fn key(&self) -> String;
}

/// A note the server keeps of itself, by its name.
#[derive(Serialize, Deserialize)]
pub(crate) struct Marker {
    pub(crate) name: String,
    pub(crate) at: String,
}

impl Record for Marker {
    const KIND: Kind = Kind::Meta;
    fn key(&self) -> String {
        self.name.clone()
    }
}

/// `null` read as the type's default (an object field a record once stored as `null`).
pub(crate) fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Record access over the store.
#[derive(Clone, Debug)]
pub(crate) struct Records {
    store: Arc<dyn Store>,
}

impl Records {
    /// Records in `store`.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The store itself (for the store endpoints).
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Record `key`, if stored.
    pub(crate) async fn get<R: Record>(&self, key: &str) -> Result<Option<R>, ApiError> {
        let item = self
            .store
            .get(&[NAMESPACE_ROOT, R::KIND.label()], key)
            .await?;
        item.map(|i| read(key, i.value)).transpose()
    }

    /// Records `a` of type `A` and `b` of type `B`, read together (one statement where the
    /// store can).
    pub(crate) async fn get_both<A: Record, B: Record>(
        &self,
        a: &str,
        b: &str,
    ) -> Result<(Option<A>, Option<B>), ApiError> {
        let refresh_ttl = self.store.ttl_config().refresh_on_read;
        let get = |namespace: Vec<String>, key: &str| {
            Op::Get(GetOp {
                namespace,
                key: key.to_owned(),
                refresh_ttl,
            })
        };
        let results = self
            .store
            .batch(vec![
                get(namespace_of::<A>(), a),
                get(namespace_of::<B>(), b),
            ])
            .await?;
        let mut items = results.into_iter().map(|r| match r {
            OpResult::Get(item) => item,
            _ => None,
        });
        let first = items
            .next()
            .flatten()
            .map(|i| read(a, i.value))
            .transpose()?;
        let second = items
            .next()
            .flatten()
            .map(|i| read(b, i.value))
            .transpose()?;
        Ok((first, second))
    }

    /// Stores `record` under its key.
    pub(crate) async fn put<R: Record>(&self, record: &R) -> Result<(), ApiError> {
        self.put_all(vec![Self::put_op(record)?]).await
    }

    /// The store operation that stores `record` under its key (for [`put_all`](Self::put_all)).
    pub(crate) fn put_op<R: Record>(record: &R) -> Result<Op, ApiError> {
        Ok(record_op(
            namespace_of::<R>(),
            record.key(),
            Some(encode(record)?),
        ))
    }

    /// Stores records together ([`put_op`](Self::put_op)s): one transaction on the database
    /// backends, so they are all stored or none.
    pub(crate) async fn put_all(&self, ops: Vec<Op>) -> Result<(), ApiError> {
        self.store.batch(ops).await?;
        Ok(())
    }

    /// Deletes record `key` of type `R` (nothing if there is none).
    pub(crate) async fn delete<R: Record>(&self, key: &str) -> Result<(), ApiError> {
        self.store
            .delete(&[NAMESPACE_ROOT, R::KIND.label()], key)
            .await?;
        Ok(())
    }

    /// Deletes every record of type `R` matching `filter` (a thread's runs or crons, deleted
    /// with it).
    pub(crate) async fn delete_matching<R: Record>(&self, filter: Object) -> Result<(), ApiError> {
        for record in self.search::<R>(filter).await? {
            self.delete::<R>(&record.key()).await?;
        }
        Ok(())
    }

    /// Every record of type `R` matching `filter` (store filter syntax on its fields),
    /// unsorted.
    pub(crate) async fn search<R: Record>(&self, filter: Object) -> Result<Vec<R>, ApiError> {
        let mut options = SearchOptions::new().limit(SCAN_LIMIT);
        if !filter.is_empty() {
            options = options.filter(Json::Object(filter));
        }
        let items = self
            .store
            .search(&[NAMESPACE_ROOT, R::KIND.label()], options)
            .await?;
        items
            .into_iter()
            .map(|i| read(&i.item.key, i.item.value))
            .collect()
    }
}

/// `record` as stored; one that cannot be is the server's fault (500), named.
fn encode<R: Record>(record: &R) -> Result<Json, ApiError> {
    serde_json::to_value(record).map_err(|e| {
        ApiError::internal(format!(
            "cannot store {} record `{}`: {e}",
            R::KIND.label(),
            record.key()
        ))
    })
}

/// The store operation that stores `value` (deletes, with `None`) under `key` of `namespace`,
/// as records are kept: not indexed, no TTL.
fn record_op(namespace: Vec<String>, key: String, value: Option<Json>) -> Op {
    Op::Put(PutOp {
        namespace,
        key,
        value,
        index: IndexFields::Disabled,
        ttl: None,
    })
}

/// The namespace records of type `R` live in.
fn namespace_of<R: Record>() -> Vec<String> {
    vec![NAMESPACE_ROOT.to_owned(), R::KIND.label().to_owned()]
}

/// A stored record as `R`; one that does not fit is the store's fault (500), named.
fn read<R: Record>(key: &str, value: Json) -> Result<R, ApiError> {
    serde_json::from_value(value).map_err(|e| {
        ApiError::internal(format!(
            "stored {} record `{key}` does not fit: {e}",
            R::KIND.label()
        ))
    })
}

/// A one-field filter.
pub(crate) fn filter(field: &str, value: impl Into<Json>) -> Object {
    Object::from_iter([(field.to_owned(), value.into())])
}

/// The order and paging fields of a search body, with LangGraph's defaults: by
/// `created_at`, newest first, 10 from the start. Read from the body on its own (not
/// flattened into the body's struct, which would hide the field's name from the message of a
/// value that does not fit).
#[derive(serde::Deserialize, serde::Serialize, Default, utoipa::ToSchema)]
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
    /// Refuses (422, as LangGraph's schemas word it) a `sort_by` that is not one of
    /// `sortable` and a `sort_order` that is not `asc` or `desc`.
    pub(crate) fn check(&self, sortable: &[&str]) -> Result<(), ApiError> {
        use crate::input::not_one_of;
        if let Some(by) = self.sort_by.as_deref()
            && !sortable.contains(&by)
        {
            return Err(not_one_of(&["sort_by"], &Json::from(by), sortable));
        }
        if let Some(order) = self.sort_order.as_deref()
            && !matches!(order, "asc" | "desc")
        {
            return Err(not_one_of(
                &["sort_order"],
                &Json::from(order),
                &["asc", "desc"],
            ));
        }
        Ok(())
    }

    /// Sorts and pages `records` as asked, as JSON.
    pub(crate) fn apply<R: Serialize>(self, records: Vec<R>) -> Vec<Json> {
        let key = self.sort_by.as_deref().unwrap_or("created_at");
        let desc = self.sort_order.as_deref() != Some("asc");
        let mut records: Vec<Json> = records
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect();
        let field = |v: &Json| v.get(key).and_then(Json::as_str).unwrap_or("").to_owned();
        records.sort_by(|a, b| {
            let (x, y) = (field(a), field(b));
            if desc { y.cmp(&x) } else { x.cmp(&y) }
        });
        records
            .into_iter()
            .skip(self.offset.unwrap_or(0))
            .take(self.limit.unwrap_or(10))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_record_that_does_not_fit_names_itself() {
        let e = read::<ThreadDoc>("t1", json!({"thread_id": "t1"})).unwrap_err();
        assert!(e.detail.contains("threads record `t1`"), "{}", e.detail);
    }

    #[test]
    fn paging_sorts_newest_first() {
        let rows = vec![
            json!({"created_at": "1"}),
            json!({"created_at": "3"}),
            json!({"created_at": "2"}),
        ];
        let paging: Paging = serde_json::from_value(json!({"limit": 2})).unwrap();
        let page = paging.apply(rows);
        assert_eq!(
            page,
            vec![json!({"created_at": "3"}), json!({"created_at": "2"})]
        );
    }
}
