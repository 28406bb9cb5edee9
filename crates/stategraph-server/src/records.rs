//! Threads, assistants and runs, kept as documents of the project's `Store` under the
//! reserved namespace root [`NAMESPACE_ROOT`], so they live in the same database as the
//! checkpoints on every backend.
//!
//! Each kind of record is a serde struct ([`ThreadRecord`], [`RunRecord`],
//! [`AssistantRecord`], [`AssistantVersion`]) with typed statuses shared with the run queue
//! and a flattened map for the fields it passes through untouched; a record changes through
//! its intent methods (`settle`, `mark`, …), not by editing JSON fields.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map as JsonMap, Value as Json};
use stategraph_checkpoint::now_iso;
use stategraph_checkpoint::runs::{
    Multitask, RecordWrite, RecordWrites, RunQueue, RunStatus, ThreadStatus,
};
use stategraph_checkpoint::store::{
    GetOp, IndexFields, Op, OpResult, PutOp, SearchOptions, Store, StoreLocation,
};

use crate::error::ApiError;
use crate::request::merge_objects;

/// The first namespace label of every record the server keeps in the store.
pub const NAMESPACE_ROOT: &str = "stategraph_server";

/// Most records a search reads before sorting and paging.
const SCAN_LIMIT: usize = 100_000;

/// A JSON object.
pub(crate) type Object = JsonMap<String, Json>;

/// A kind of record, and the namespace it lives in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Thread,
    Assistant,
    /// One version of an assistant, keyed `{assistant_id}:{version}`.
    AssistantVersion,
    Run,
    Cron,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Thread => "threads",
            Kind::Assistant => "assistants",
            Kind::AssistantVersion => "assistant_versions",
            Kind::Run => "runs",
            Kind::Cron => "crons",
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

/// `null` read as the type's default (an object field a record once stored as `null`).
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A field that may hold `null` and is kept as given (`Some(Null)`), absent being `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Json>, D::Error> {
    Json::deserialize(d).map(Some)
}

/// A thread, as `GET /threads/{thread_id}` answers it (its status as stored: readers take
/// [`live`](Self::live) from the run queue).
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Thread)]
pub(crate) struct ThreadRecord {
    pub(crate) thread_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[serde(default)]
    pub(crate) state_updated_at: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default)]
    #[schema(value_type = String)]
    pub(crate) status: ThreadStatus,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    /// The values of its latest checkpoint (`null` before the first).
    #[serde(default)]
    pub(crate) values: serde_json::Value,
    /// The interrupts it waits on, by task id, once a run or update left some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interrupts: Option<serde_json::Value>,
    /// The error its last run ended with (`null` after a run without), once one ran.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) error: Option<serde_json::Value>,
    /// Fields kept as they were given.
    #[serde(flatten)]
    pub(crate) extra: Object,
}

/// What reading a thread's state needs of its record: that it exists, and its graph. Read
/// without the rest (its latest values above all, which a history answer carries anyway).
#[derive(Serialize, Deserialize)]
pub(crate) struct ThreadHead {
    pub(crate) thread_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
}

impl Record for ThreadHead {
    const KIND: Kind = Kind::Thread;
    fn key(&self) -> String {
        self.thread_id.clone()
    }
}

/// A thread's graph, as its record's metadata names it.
pub(crate) trait HasGraph {
    /// The graph its runs use, if one ran on it.
    fn graph_id(&self) -> Option<&str>;
}

impl HasGraph for ThreadHead {
    fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Json::as_str)
    }
}

impl HasGraph for ThreadRecord {
    fn graph_id(&self) -> Option<&str> {
        ThreadRecord::graph_id(self)
    }
}

impl Record for ThreadRecord {
    const KIND: Kind = Kind::Thread;
    fn key(&self) -> String {
        self.thread_id.clone()
    }
}

impl ThreadRecord {
    /// A new idle thread without checkpoints.
    pub(crate) fn new(thread_id: &str, metadata: Object) -> Self {
        let now = now_iso();
        Self {
            thread_id: thread_id.to_owned(),
            created_at: now.clone(),
            updated_at: now.clone(),
            state_updated_at: Some(now),
            metadata,
            status: ThreadStatus::Idle,
            config: Object::new(),
            values: Json::Null,
            interrupts: None,
            error: None,
            extra: Object::new(),
        }
    }

    /// Its status as the run queue, the truth across processes, makes it: `busy` while a run
    /// of the thread is pending or running (in any process), else the status its last run
    /// left (a `busy` no run holds any more, left by a process that died mid-run, reads
    /// `idle`). So a process settling the thread as its run ends cannot hide the run another
    /// process enqueued meanwhile.
    pub(crate) fn live(&mut self, busy: bool) {
        if busy {
            self.status = ThreadStatus::Busy;
        } else if self.status == ThreadStatus::Busy {
            self.status = ThreadStatus::Idle;
        }
    }

    /// Records that a run of graph `graph_id` and assistant `assistant` starts on the idle
    /// thread: `busy`, the run's graph and assistant in its metadata, and its config merged
    /// as LangGraph's server merges it (the assistant's, the thread's, the run's, then
    /// `configurable` from the assistant's and the thread's only).
    pub(crate) fn start_run(
        &mut self,
        graph_id: &str,
        assistant: &AssistantRecord,
        run_config: Option<&Json>,
    ) {
        self.status = ThreadStatus::Busy;
        self.touch();
        self.metadata
            .insert("graph_id".into(), Json::String(graph_id.to_owned()));
        self.metadata.insert(
            "assistant_id".into(),
            Json::String(assistant.assistant_id.clone()),
        );
        let assistant_config = Json::Object(assistant.config.clone());
        let own = Json::Object(std::mem::take(&mut self.config));
        let mut config = merge_objects([Some(&assistant_config), Some(&own), run_config]);
        let kept = merge_objects([
            assistant_config.get("configurable"),
            own.get("configurable"),
        ]);
        config.insert("configurable".into(), Json::Object(kept));
        self.config = config;
    }

    /// The fields that record how its run ended ([`Records::merge_write`]): `status`, the
    /// state it left (values and interrupts, when known) and the run's `error` (`null` for
    /// none), changed now.
    pub(crate) fn settled(
        status: ThreadStatus,
        state: Option<(Json, Json)>,
        error: Json,
    ) -> Object {
        let now = Json::String(now_iso());
        let mut fields = Object::new();
        fields.insert("status".into(), Json::String(status.as_str().to_owned()));
        if let Some((values, interrupts)) = state {
            fields.insert("values".into(), values);
            fields.insert("interrupts".into(), interrupts);
        }
        fields.insert("error".into(), error);
        fields.insert("updated_at".into(), now.clone());
        fields.insert("state_updated_at".into(), now);
        fields
    }

    /// Records the values and interrupts of its latest checkpoint.
    pub(crate) fn set_state(&mut self, values: Json, interrupts: Json) {
        self.values = values;
        self.interrupts = Some(interrupts);
        self.touch();
        self.state_updated_at = Some(self.updated_at.clone());
    }

    /// Marks it idle (its run is gone without settling it).
    pub(crate) fn settle_idle(&mut self) {
        self.status = ThreadStatus::Idle;
        self.touch();
    }

    /// Merges `metadata` into its own.
    pub(crate) fn merge_metadata(&mut self, metadata: Object) {
        self.metadata.extend(metadata);
        self.touch();
    }

    /// A copy under `thread_id`, created now, with the same metadata, state and status.
    pub(crate) fn copied_to(&self, thread_id: &str) -> Self {
        let mut copy = Self::new(thread_id, self.metadata.clone());
        copy.values = self.values.clone();
        copy.interrupts = self.interrupts.clone();
        copy.error = self.error.clone();
        copy.status = self.status;
        copy.config = self.config.clone();
        copy
    }

    /// The graph its runs use, if one ran on it.
    pub(crate) fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Json::as_str)
    }

    /// The assistant of its latest run, if one ran on it.
    pub(crate) fn assistant_id(&self) -> Option<&str> {
        self.metadata.get("assistant_id").and_then(Json::as_str)
    }

    fn touch(&mut self) {
        self.updated_at = now_iso();
    }
}

/// A run, as `GET /threads/{thread_id}/runs/{run_id}` answers it.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Run)]
pub(crate) struct RunRecord {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    #[serde(default)]
    pub(crate) assistant_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[schema(value_type = String)]
    pub(crate) status: RunStatus,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    /// What the run was asked: input, command, config, context, stream modes, … (as LangGraph's
    /// server records them).
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) kwargs: Object,
    #[serde(default)]
    #[schema(value_type = String)]
    pub(crate) multitask_strategy: Multitask,
    /// Fields kept as they were given (`langsmith_session_name`).
    #[serde(flatten)]
    pub(crate) extra: Object,
}

impl Record for RunRecord {
    const KIND: Kind = Kind::Run;
    fn key(&self) -> String {
        self.run_id.clone()
    }
}

impl RunRecord {
    /// Sets its status.
    pub(crate) fn mark(&mut self, status: RunStatus) {
        self.status = status;
        self.updated_at = now_iso();
    }

    /// Marks it `running`, with `metadata` (what the engine added as it started) added to
    /// its config's metadata.
    pub(crate) fn started(&mut self, metadata: Object) {
        self.mark(RunStatus::Running);
        if let Some(Json::Object(m)) = self
            .kwargs
            .get_mut("config")
            .and_then(|c| c.get_mut("metadata"))
        {
            m.extend(metadata);
        }
    }

    /// Whether it is a stateless run on a temporary thread.
    pub(crate) fn temporary(&self) -> bool {
        self.kwargs
            .get("temporary")
            .and_then(Json::as_bool)
            .unwrap_or(false)
    }

    /// Whether it is pending or running.
    pub(crate) fn in_flight(&self) -> bool {
        !self.status.is_final()
    }

    /// Object `pointer` of its `kwargs` (e.g. `/config/configurable`), or an empty one.
    pub(crate) fn kwargs_object(&self, pointer: &str) -> Object {
        Json::Object(self.kwargs.clone())
            .pointer(pointer)
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default()
    }
}

/// An assistant, as `GET /assistants/{assistant_id}` answers it.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Assistant)]
pub(crate) struct AssistantRecord {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) context: Object,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default = "first_version")]
    pub(crate) version: u64,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Fields kept as they were given.
    #[serde(flatten)]
    pub(crate) extra: Object,
}

fn first_version() -> u64 {
    1
}

impl Record for AssistantRecord {
    const KIND: Kind = Kind::Assistant;
    fn key(&self) -> String {
        self.assistant_id.clone()
    }
}

impl AssistantRecord {
    /// A new assistant, at version 1.
    pub(crate) fn new(assistant_id: String, graph_id: String, name: String) -> Self {
        let now = now_iso();
        Self {
            assistant_id,
            graph_id,
            config: Object::new(),
            context: Object::new(),
            created_at: now.clone(),
            updated_at: now,
            metadata: Object::new(),
            version: 1,
            name,
            description: None,
            extra: Object::new(),
        }
    }

    /// Its current fields as its version `version` (created now).
    pub(crate) fn as_version(&self, version: u64) -> AssistantVersion {
        AssistantVersion {
            assistant_id: self.assistant_id.clone(),
            graph_id: self.graph_id.clone(),
            config: self.config.clone(),
            context: self.context.clone(),
            metadata: self.metadata.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            version,
            created_at: now_iso(),
        }
    }

    /// Makes `version` its current one.
    pub(crate) fn restore(&mut self, version: &AssistantVersion) {
        self.graph_id.clone_from(&version.graph_id);
        self.config.clone_from(&version.config);
        self.context.clone_from(&version.context);
        self.metadata.clone_from(&version.metadata);
        self.name.clone_from(&version.name);
        self.description.clone_from(&version.description);
        self.version = version.version;
        self.updated_at = now_iso();
    }
}

/// One version of an assistant, as `POST /assistants/{assistant_id}/versions` lists them.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub(crate) struct AssistantVersion {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) config: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) context: Object,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) metadata: Object,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    pub(crate) version: u64,
    pub(crate) created_at: String,
}

impl Record for AssistantVersion {
    const KIND: Kind = Kind::AssistantVersion;
    fn key(&self) -> String {
        version_key(&self.assistant_id, self.version)
    }
}

/// The key of version `version` of assistant `assistant_id`.
pub(crate) fn version_key(assistant_id: &str, version: u64) -> String {
    format!("{assistant_id}:{version}")
}

/// Record access over the store.
#[derive(Clone, Debug)]
pub(crate) struct Records {
    store: Arc<dyn Store>,
    /// Where the store keeps them, when the run queue can write them in its own transactions
    /// (the same database): a run's records then change with the queue change they go with.
    colocated: Option<StoreLocation>,
}

impl Records {
    /// Records in `store`, written by `queue` with its changes where it can.
    pub(crate) fn new(store: Arc<dyn Store>, queue: &dyn RunQueue) -> Self {
        let colocated = store.location().filter(|at| queue.writes_records_at(at));
        Self { store, colocated }
    }

    /// Whether the run queue writes records with its changes ([`with_queue`](Self::with_queue)
    /// hands them over).
    pub(crate) fn colocated(&self) -> bool {
        self.colocated.is_some()
    }

    /// The write that stores `record` whole.
    pub(crate) fn put_write<R: Record>(record: &R) -> Result<RecordWrite, ApiError> {
        Ok(RecordWrite::Put {
            namespace: namespace_of::<R>(),
            key: record.key(),
            value: encode(record)?,
        })
    }

    /// The write that deletes record `key` of type `R`.
    pub(crate) fn delete_write<R: Record>(key: &str) -> RecordWrite {
        RecordWrite::Delete {
            namespace: namespace_of::<R>(),
            key: key.to_owned(),
        }
    }

    /// The write that sets `fields` of record `key` of type `R`, keeping its other fields
    /// (nothing if it is not stored).
    pub(crate) fn merge_write<R: Record>(key: &str, fields: Object) -> RecordWrite {
        RecordWrite::Merge {
            namespace: namespace_of::<R>(),
            key: key.to_owned(),
            fields,
        }
    }

    /// `writes` for the run queue to make in the transaction of the change they go with,
    /// where it can (`Some`: nothing is written here); otherwise they are made now, through
    /// the store (`None`).
    pub(crate) async fn with_queue(
        &self,
        writes: Vec<RecordWrite>,
    ) -> Result<Option<RecordWrites>, ApiError> {
        match &self.colocated {
            Some(at) => Ok(Some(RecordWrites::new(at.clone(), writes))),
            None => {
                self.apply(writes).await?;
                Ok(None)
            }
        }
    }

    /// Makes `writes` through the store: the records merged into are read first, then
    /// everything is written in one batch (one transaction on the database backends).
    pub(crate) async fn apply(&self, writes: Vec<RecordWrite>) -> Result<(), ApiError> {
        let mut ops = Vec::with_capacity(writes.len());
        for write in writes {
            let (namespace, key, value) = match write {
                RecordWrite::Put {
                    namespace,
                    key,
                    value,
                } => (namespace, key, Some(value)),
                RecordWrite::Delete { namespace, key } => (namespace, key, None),
                RecordWrite::Merge {
                    namespace,
                    key,
                    fields,
                } => {
                    let labels: Vec<&str> = namespace.iter().map(String::as_str).collect();
                    let Some(item) = self.store.get(&labels, &key).await? else {
                        continue;
                    };
                    let Json::Object(mut value) = item.value else {
                        continue;
                    };
                    value.extend(fields);
                    (namespace, key, Some(Json::Object(value)))
                }
                other => {
                    return Err(ApiError::internal(format!(
                        "a record write the server cannot make: {other:?}"
                    )));
                }
            };
            ops.push(record_op(namespace, key, value));
        }
        self.put_all(ops).await
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
    /// The field asked to sort by, if any.
    pub(crate) fn sort_by(&self) -> Option<&str> {
        self.sort_by.as_deref()
    }

    /// The first `limit` (default 10) after `offset`, newest first.
    pub(crate) fn newest(limit: Option<usize>, offset: Option<usize>) -> Self {
        Self {
            limit,
            offset,
            ..Self::default()
        }
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
    fn records_keep_the_fields_they_do_not_know() {
        let stored = json!({
            "thread_id": "t", "created_at": "a", "updated_at": "b", "status": "busy",
            "metadata": null, "error": null, "custom": {"x": 1},
        });
        let mut thread: ThreadRecord = serde_json::from_value(stored).unwrap();
        assert_eq!(thread.status, ThreadStatus::Busy);
        assert_eq!(thread.error, Some(Json::Null));
        thread.live(false);
        let out = serde_json::to_value(&thread).unwrap();
        assert_eq!(out["status"], "idle");
        assert_eq!(out["custom"], json!({"x": 1}));
        assert_eq!(out["metadata"], json!({}));
        assert!(out.get("error").is_some_and(Json::is_null));
        assert!(out.get("interrupts").is_none());
    }

    #[test]
    fn a_record_that_does_not_fit_names_itself() {
        let e = read::<RunRecord>("r1", json!({"run_id": "r1"})).unwrap_err();
        assert!(e.detail.contains("runs record `r1`"), "{}", e.detail);
    }

    #[test]
    fn paging_sorts_newest_first() {
        let rows = vec![
            json!({"created_at": "1"}),
            json!({"created_at": "3"}),
            json!({"created_at": "2"}),
        ];
        let page = Paging::newest(Some(2), Some(0)).apply(rows);
        assert_eq!(
            page,
            vec![json!({"created_at": "3"}), json!({"created_at": "2"})]
        );
    }
}
