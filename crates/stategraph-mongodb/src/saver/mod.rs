//! `MongoSaver`: checkpoints in the collections of Python's `langgraph-checkpoint-mongodb`.

mod cursor;
mod delta;
pub(crate) mod docs;
mod pruning;
mod read;
mod setup;

use stategraph_checkpoint::backend::Timed as _;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::{Client, Collection, Database};
use stategraph_checkpoint::backend::{Expect, Timeouts, prune};
use stategraph_checkpoint::delta::DeltaChannelHistory;
use stategraph_checkpoint::{
    Capabilities, ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig,
    CheckpointMetadata, CheckpointSaver, CheckpointTuple, EncodedWrites, Error, ListOptions,
    Location, PruneStrategy, Result, Serializer, Value, encode_writes, latest_conflict,
    next_int_version, validate_put,
};

use crate::error::{BACKEND, DUPLICATE_KEY, db, is_duplicate_key};
use cursor::Find;
use docs::{binary, claim, key, metadata_doc};

/// The largest serialized checkpoint that fits in a MongoDB document (16 MiB) with room for
/// its other fields.
const MAX_CHECKPOINT_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

/// The names of the two collections.
#[derive(Clone, Debug)]
pub(crate) struct Collections {
    pub(crate) checkpoints: String,
    pub(crate) writes: String,
}

impl Default for Collections {
    fn default() -> Self {
        Self {
            checkpoints: "checkpoints".to_owned(),
            writes: "checkpoint_writes".to_owned(),
        }
    }
}

impl Collections {
    /// Names MongoDB accepts: not empty, no `$` or NUL, not a `system.` collection.
    pub(crate) fn validate(&self) -> Result<()> {
        for name in [&self.checkpoints, &self.writes] {
            if name.is_empty() || name.contains(['$', '\0']) || name.starts_with("system.") {
                return Err(Error::invalid(
                    "collection name",
                    format!("`{name}` is not a usable MongoDB collection name"),
                ));
            }
        }
        if self.checkpoints == self.writes {
            return Err(Error::invalid(
                "collection name",
                format!(
                    "checkpoints and writes cannot share the collection `{}`",
                    self.writes
                ),
            ));
        }
        Ok(())
    }
}

/// Stores checkpoints in MongoDB, in the layout of Python's `langgraph-checkpoint-mongodb`
/// (database `checkpointing_db`, collections `checkpoints` and `checkpoint_writes`, the same
/// documents and unique indexes), so both read and continue each other's threads.
///
/// The conditional put ([`CheckpointSaver::put_if_latest`], what keeps two runs on one thread
/// from interleaving) needs no transaction and no index of its own, so it works on a
/// standalone server as on a replica set: a checkpoint it stores gets as `_id` the document
/// `{thread_id, checkpoint_ns, stategraph_after}` naming the checkpoint that was the newest
/// when it was written, and since `_id` is unique, only one writer can claim each
/// predecessor. Python's saver never reads `_id`; its documents keep their `ObjectId`s.
///
/// Operations that touch many documents (`delete_thread`, `copy_thread`, `prune`) are not
/// transactions: they order their steps so that a failure in the middle leaves only
/// unreachable leftovers (writes of deleted checkpoints), never a checkpoint without its
/// writes.
#[derive(Clone)]
pub struct MongoSaver {
    client: Client,
    db: Database,
    checkpoints: Collection<Document>,
    writes: Collection<Document>,
    ttl: Option<Duration>,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
    /// The newest checkpoint this saver stored per (thread, namespace): a conditional put
    /// expecting it needs no read first (see [`Self::put_checked`]).
    written: Arc<Mutex<HashMap<(String, String), String>>>,
}

/// How many (thread, namespace) pairs the saver remembers its last write for.
const REMEMBERED: usize = 10_000;

impl fmt::Debug for MongoSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MongoSaver")
            .field("database", &self.db.name())
            .field("checkpoints", &self.checkpoints.name())
            .field("writes", &self.writes.name())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl MongoSaver {
    /// Connects to the server a `mongodb://` URL names (database from its path, default
    /// `checkpointing_db`) and sets up the indexes: shorthand for
    /// [`MongoConfig::from_url`](crate::MongoConfig::from_url)`(url)?.`[`connect`](crate::MongoConfig::connect)`()`,
    /// which has every other setting.
    pub async fn connect(url: &str) -> Result<Self> {
        crate::MongoConfig::from_url(url)?.connect().await
    }

    pub(crate) fn new(
        client: Client,
        database: &str,
        collections: &Collections,
        ttl: Option<Duration>,
        serializer: Arc<dyn Serializer>,
        timeouts: Timeouts,
    ) -> Self {
        let db = client.database(database);
        Self {
            checkpoints: db.collection(&collections.checkpoints),
            writes: db.collection(&collections.writes),
            db,
            client,
            ttl,
            serializer,
            timeouts,
            written: Arc::default(),
        }
    }

    /// The driver's client (for the database's other collections).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The database the saver uses.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// A `find` on the checkpoints collection.
    fn find(&self, filter: Document) -> Find {
        Find::new(self.checkpoints.name(), filter)
    }

    /// `created_at` for new documents when a TTL is set (Python's field).
    fn created_at(&self) -> Option<DateTime> {
        self.ttl.map(|_| DateTime::now())
    }

    /// The newest checkpoint id of a namespace.
    async fn latest_id(&self, thread: &str, ns: &str) -> Result<Option<String>> {
        let found = self
            .find(doc! { "thread_id": thread, "checkpoint_ns": ns })
            .sort(doc! { "checkpoint_id": -1 })
            .projection(doc! { "_id": 0, "checkpoint_id": 1 })
            .one(&self.db, "finding the latest checkpoint")
            .await?;
        Ok(found.and_then(|d| d.get_str("checkpoint_id").ok().map(str::to_owned)))
    }

    /// Whether `id` is the newest checkpoint this saver stored in the namespace.
    fn wrote_last(&self, thread: &str, ns: &str, id: &str) -> bool {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        written
            .get(&(thread.to_owned(), ns.to_owned()))
            .is_some_and(|last| last == id)
    }

    /// Remembers `id` as stored in the namespace (if newer than what is remembered).
    fn remember(&self, thread: &str, ns: &str, id: &str) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if written.len() >= REMEMBERED {
            written.clear();
        }
        let last = written
            .entry((thread.to_owned(), ns.to_owned()))
            .or_default();
        if id > last.as_str() {
            id.clone_into(last);
        }
    }

    /// Forgets what this saver wrote (deletions may have removed it).
    fn forget(&self, thread: Option<&str>) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        match thread {
            Some(t) => written.retain(|(thread, _), _| thread != t),
            None => written.clear(),
        }
    }

    /// Deletes checkpoints by key, then their writes (a failure in between leaves writes
    /// nothing reaches, never a checkpoint without its writes).
    async fn delete_keys(&self, keys: Vec<Document>, doing: &'static str) -> Result<()> {
        for chunk in keys.chunks(500) {
            let any = doc! { "$or": chunk.to_vec() };
            self.checkpoints
                .delete_many(any.clone())
                .await
                .map_err(db(doing))?;
            self.writes.delete_many(any).await.map_err(db(doing))?;
        }
        Ok(())
    }
}

#[async_trait]
impl CheckpointSaver for MongoSaver {
    fn name(&self) -> &'static str {
        "mongodb"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    /// Integer versions, as Python's MongoDB saver (which keeps LangGraph's default), so that
    /// each side can continue the other's threads.
    fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
        next_int_version(current)
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.timed("reading a checkpoint", async {
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let filter = match &config.checkpoint_id {
                Some(id) => key(thread, ns, id),
                None => doc! { "thread_id": thread, "checkpoint_ns": ns },
            };
            let found = self
                .find(filter)
                .sort(doc! { "checkpoint_id": -1 })
                .one(&self.db, "reading a checkpoint")
                .await?;
            let Some(doc) = found else { return Ok(None) };
            Ok(self.assemble(vec![doc]).await?.pop())
        })
        .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.timed("listing checkpoints", async {
            let mut tuples = self.list_tuples(options).await?;
            if options.skip_values {
                for t in &mut tuples {
                    std::sync::Arc::make_mut(&mut t.checkpoint)
                        .channel_values
                        .clear();
                }
            }
            Ok(tuples)
        })
        .await
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        _new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        self.timed("storing a checkpoint", async {
            validate_put(config, checkpoint)?;
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let id = checkpoint.id.as_str();
            let loc = Location::checkpoint(thread, ns, id);
            let (tag, bytes) = self
                .serializer
                .dumps_typed(&checkpoint.to_value())
                .map_err(|e| Error::serialization(loc.clone(), e))?;
            if bytes.len() > MAX_CHECKPOINT_BYTES {
                return Err(Error::invalid(
                    format!("checkpoint {id} of thread `{thread}`"),
                    format!(
                        "serializes to {} bytes; a MongoDB document holds at most 16 MiB",
                        bytes.len()
                    ),
                ));
            }
            let mut set = doc! {
                "parent_checkpoint_id": config.checkpoint_id.as_deref().map_or(Bson::Null, Bson::from),
                "type": tag,
                "checkpoint": binary(bytes),
                "metadata": metadata_doc(self.serializer.as_ref(), metadata, &loc)?,
            };
            if let Some(at) = self.created_at() {
                set.insert("created_at", at);
            }
            let expected = match expect {
                Expect::Any => None,
                Expect::Latest(expected) => {
                    // The claim (`_id`) refuses a second stategraph writer after the same
                    // checkpoint. The read first also refuses a put after anything else that
                    // became the newest (Python's writes, unconditional puts, deletions); it is
                    // skipped when the expected checkpoint is the one this saver stored last
                    // (each step of a run after its first).
                    let ours = expected.is_some_and(|e| self.wrote_last(thread, ns, e));
                    if !ours {
                        let found = self.latest_id(thread, ns).await?;
                        if found.as_deref() != expected {
                            return Err(latest_conflict(config, expected, found.as_deref()));
                        }
                    }
                    Some(expected)
                }
            };
            let mut update = doc! { "$set": set };
            // Re-putting the newest checkpoint itself claims nothing new.
            if let Some(expected) = expected.filter(|e| *e != Some(id)) {
                update.insert("$setOnInsert", doc! { "_id": claim(thread, ns, expected) });
            }
            let stored = self
                .checkpoints
                .update_one(key(thread, ns, id), update)
                .upsert(true)
                .await;
            match (stored, expected) {
                (Ok(_), _) => {
                    self.remember(thread, ns, id);
                    Ok(config.clone().with_checkpoint_id(checkpoint.id.clone()))
                }
                (Err(e), Some(expected)) if is_duplicate_key(&e) => {
                    // Another writer claimed the same predecessor first.
                    let found = self.latest_id(thread, ns).await?;
                    Err(latest_conflict(config, expected, found.as_deref()))
                }
                (Err(e), _) => Err(db("storing a checkpoint")(e)),
            }
        })
        .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.timed("storing writes", async {
            let EncodedWrites {
                checkpoint_id,
                replace,
                rows,
            } = encode_writes(self.serializer.as_ref(), config, writes, task_id)?;
            if rows.is_empty() {
                return Ok(());
            }
            let at = key(&config.thread_id, &config.checkpoint_ns, checkpoint_id);
            let created = self.created_at();
            let updates: Vec<Document> = rows
                .into_iter()
                .map(|row| docs::write_statement(&at, task_id, task_path, row, replace, created))
                .collect();
            let command = doc! {
                "update": self.writes.name(),
                "updates": updates,
                "ordered": true,
            };
            // Two writers upserting the same new row at once: one insert loses on the unique
            // index. Kept rows win anyway without `replace`; with it, once more updates it.
            for attempt in 0..2 {
                let reply = self
                    .db
                    .run_command(command.clone())
                    .await
                    .map_err(db("storing writes"))?;
                let errors = match reply.get("writeErrors") {
                    Some(Bson::Array(errors)) if !errors.is_empty() => errors,
                    _ => return Ok(()),
                };
                let only_duplicates = errors.iter().all(|e| {
                    matches!(e, Bson::Document(d) if d.get_i32("code").ok() == Some(DUPLICATE_KEY))
                });
                if only_duplicates && (!replace || attempt == 0) {
                    if !replace {
                        return Ok(());
                    }
                    continue;
                }
                return Err(Error::backend(
                    BACKEND,
                    "storing writes",
                    format!(
                        "the server refused a write: {}",
                        Bson::Array(errors.clone())
                    ),
                ));
            }
            Ok(())
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.forget(Some(thread_id));
        self.timed("deleting a thread", async {
            let filter = doc! { "thread_id": thread_id };
            self.checkpoints
                .delete_many(filter.clone())
                .await
                .map_err(db("deleting a thread"))?;
            self.writes
                .delete_many(filter)
                .await
                .map_err(db("deleting a thread"))?;
            Ok(())
        })
        .await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.timed("deleting runs", async {
            if run_ids.is_empty() {
                return Ok(());
            }
            self.forget(None);
            let keys = self.keys_of_runs(run_ids).await?;
            self.delete_keys(keys, "deleting runs").await
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.timed("copying a thread", self.copy(source, target))
            .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.timed("pruning", async {
            for thread in thread_ids {
                self.forget(Some(thread));
            }
            // No multi-document transaction to plan under: every thread is planned first, so
            // a refused thread leaves all of them untouched, then each plan is applied.
            prune::run(&mut pruning::Pruning(self), thread_ids, strategy).await
        })
        .await
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        self.timed(
            "reading delta channel history",
            self.delta_history(config, channels),
        )
        .await
    }
}

impl stategraph_checkpoint::backend::Timed for MongoSaver {
    const BACKEND: &'static str = BACKEND;

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }
}
