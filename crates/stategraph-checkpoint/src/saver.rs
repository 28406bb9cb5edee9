//! The `CheckpointSaver` trait: how a thread's checkpoints and pending writes are stored.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use serde_json::Value as Json;

use crate::checkpoint::{Checkpoint, CheckpointTuple};
use crate::checkpoint_id::CheckpointId;
use crate::config::CheckpointConfig;
use crate::delta::{DeltaChannelHistory, DeltaWalk};
use crate::error::{Error, Result};
use crate::metadata::CheckpointMetadata;
use crate::version::{ChannelVersion, ChannelVersions, next_version};
use stategraph_value::Value;

/// Which checkpoints [`CheckpointSaver::list`] returns. Every field narrows the result;
/// the default lists everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListOptions {
    /// Only this thread.
    pub thread_id: Option<String>,
    /// Only this namespace (`None`: every namespace).
    pub checkpoint_ns: Option<String>,
    /// Only this checkpoint.
    pub checkpoint_id: Option<CheckpointId>,
    /// Metadata keys that must all be equal (a `null` also matches a missing key).
    pub filter: serde_json::Map<String, Json>,
    /// Only checkpoints whose id is lower (older) than this one.
    pub before: Option<CheckpointId>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
    /// Leave the channel values out: each checkpoint comes back with its id, versions,
    /// metadata, parent and pending writes, and an empty `channel_values`. For listings that
    /// show only those (thread and history overviews); savers that can avoid reading and
    /// decoding the values do.
    pub skip_values: bool,
}

impl ListOptions {
    /// Every checkpoint of every thread.
    pub fn all() -> Self {
        Self::default()
    }

    /// Every checkpoint of `thread_id`, in every namespace.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self {
            thread_id: Some(thread_id.into()),
            ..Self::default()
        }
    }

    /// What LangGraph's `list(config)` means for a config: its thread, its namespace, and its
    /// checkpoint id if set.
    pub fn from_config(config: &CheckpointConfig) -> Self {
        Self {
            thread_id: Some(config.thread_id.clone()),
            checkpoint_ns: Some(config.checkpoint_ns.clone()),
            checkpoint_id: config.checkpoint_id.clone(),
            ..Self::default()
        }
    }

    /// Narrows to namespace `ns`.
    pub fn ns(mut self, ns: impl Into<String>) -> Self {
        self.checkpoint_ns = Some(ns.into());
        self
    }

    /// Adds a metadata filter key.
    pub fn filter(mut self, key: impl Into<String>, value: impl Into<Json>) -> Self {
        self.filter.insert(key.into(), value.into());
        self
    }

    /// Only checkpoints older than `checkpoint_id`.
    pub fn before(mut self, checkpoint_id: impl Into<CheckpointId>) -> Self {
        self.before = Some(checkpoint_id.into());
        self
    }

    /// At most `n` results.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Without channel values (see [`skip_values`](Self::skip_values)).
    pub fn without_values(mut self) -> Self {
        self.skip_values = true;
        self
    }
}

/// What [`CheckpointSaver::prune`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PruneStrategy {
    /// Keep the newest checkpoint of every namespace, with its writes; drop the rest.
    #[default]
    KeepLatest,
    /// Drop the threads entirely.
    Delete,
    /// Keep the newest `n` checkpoints (at least 1) of every namespace.
    KeepLast(usize),
    /// Drop the checkpoints created before this time (the newest of every namespace stays).
    OlderThan(std::time::SystemTime),
    /// Keep the history that leads to each namespace's newest checkpoint in full; on the
    /// branches left behind (by replays and `update_state` on past checkpoints) keep only the
    /// newest checkpoint of each step.
    AbandonedBranches,
    /// A thread TTL: delete the whole thread if its newest checkpoint was created before this
    /// time (it has been idle since); keep it untouched otherwise.
    IdleSince(std::time::SystemTime),
}

/// The optional operations a saver implements. The conformance suite runs the matching cases
/// for every declared capability, and checks that undeclared ones fail with
/// [`Error::Unsupported`] — nothing is skipped silently. New optional operations may be
/// added, so the struct cannot be built field by field outside this crate: start from
/// [`Capabilities::NONE`] or [`Capabilities::ALL`] and set fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`CheckpointSaver::delete_for_runs`].
    pub delete_for_runs: bool,
    /// [`CheckpointSaver::copy_thread`].
    pub copy_thread: bool,
    /// [`CheckpointSaver::prune`].
    pub prune: bool,
}

impl Capabilities {
    /// No optional operation.
    pub const NONE: Capabilities = Capabilities {
        delete_for_runs: false,
        copy_thread: false,
        prune: false,
    };

    /// Every optional operation.
    pub const ALL: Capabilities = Capabilities {
        delete_for_runs: true,
        copy_thread: true,
        prune: true,
    };
}

/// Stores checkpoints and pending writes: LangGraph's `BaseCheckpointSaver`, async.
///
/// # Contract
/// (each point is a case of the shared conformance suite, `stategraph-conformance`)
/// - [`put`](Self::put) stores `checkpoint` under `config.thread_id` / `config.checkpoint_ns`,
///   with `config.checkpoint_id` (if any) as its parent, and returns the config addressing the
///   new checkpoint. Values of channels not in `new_versions` may be taken from the stored
///   value of the same (channel, version), as LangGraph's blob-based savers do.
/// - [`put_writes`](Self::put_writes) stores writes against `config.checkpoint_id` (required),
///   each at `idx` = its position, or the fixed negative index of a special channel
///   (`__error__` −1, `__scheduled__` −2, `__interrupt__` −3, `__resume__` −4). If every write
///   is special the call replaces rows with the same (task, idx); otherwise existing rows win.
/// - [`get_tuple`](Self::get_tuple) returns that checkpoint, or the newest of the
///   (thread, namespace) without an id, or `None`; pending writes in (task path, task id, idx)
///   order.
/// - [`list`](Self::list) returns newest first (checkpoint id descending).
/// - Errors are typed: bad arguments are [`Error::InvalidInput`], undecodable rows
///   [`Error::Serialization`] naming thread, checkpoint and channel, optional operations a
///   backend lacks [`Error::Unsupported`].
#[async_trait]
pub trait CheckpointSaver: Send + Sync + fmt::Debug {
    /// A short name for errors and logs (`memory`, `sqlite`, …).
    fn name(&self) -> &'static str;

    /// Which optional operations this saver implements.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Whether what it stores lives in this process's memory only, where no other process
    /// can open it (`false` by default): a server over it may keep its runs in memory too.
    fn process_local(&self) -> bool {
        false
    }

    /// The checkpoint `config` addresses (the latest of its namespace without an id).
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>>;

    /// Checkpoints matching `options`, newest first.
    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>>;

    /// Stores a checkpoint; `config.checkpoint_id` is its parent. Returns its address.
    ///
    /// With [`Expect::Latest`] the put happens only if the newest checkpoint of the thread's
    /// namespace is still the expected one (`None`: the namespace has no checkpoint yet);
    /// otherwise it is an [`Error::Conflict`] and nothing is written. The check and the write
    /// are atomic, across processes sharing the database too. This is the one put a saver
    /// implements; [`put`](Self::put) and [`put_if_latest`](Self::put_if_latest) call it.
    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig>;

    /// Stores a checkpoint; `config.checkpoint_id` is its parent. Returns its address.
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        self.put_checked(config, checkpoint, metadata, new_versions, Expect::Any)
            .await
    }

    /// [`put`](Self::put), but only if the newest checkpoint of the thread's namespace is
    /// still `expected_latest` (`None`: the namespace has no checkpoint yet); otherwise
    /// [`Error::Conflict`] and nothing is written. The check and the write are atomic, across
    /// processes sharing the database too. This is how runs on one thread are kept from
    /// interleaving: each run saves its checkpoints conditioned on the last one it saw.
    async fn put_if_latest(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<&str>,
    ) -> Result<CheckpointConfig> {
        self.put_checked(
            config,
            checkpoint,
            metadata,
            new_versions,
            Expect::Latest(expected_latest),
        )
        .await
    }

    /// Stores the writes of task `task_id` (path `task_path`) against `config.checkpoint_id`.
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()>;

    /// Applies `ops` in order, with the effect of applying them one by one (a failed op
    /// stops the batch; the ops before it stay applied). The graph's background saver (the
    /// `async` durability) hands over whatever queued up while the previous batch was being
    /// written, so a saver that can write them in one transaction (SQLite, group commit)
    /// pays one commit for many steps. The default applies them one by one.
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        SaveOp::apply_each(ops, self).await
    }

    /// Removes every checkpoint, write and blob of a thread, in every namespace. Deleting a
    /// thread that does not exist is not an error.
    async fn delete_thread(&self, thread_id: &str) -> Result<()>;

    /// Removes the checkpoints whose `metadata.run_id` is one of `run_ids`, with their writes.
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        let _ = run_ids;
        Err(self.unsupported("delete_for_runs"))
    }

    /// Copies every checkpoint, write and blob of `source` (all namespaces, same checkpoint
    /// ids) to the new thread `target`. `NotFound` if `source` has nothing, `Conflict` if
    /// `target` already has checkpoints.
    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let _ = (source, target);
        Err(self.unsupported("copy_thread"))
    }

    /// Drops old checkpoints of `thread_ids` according to `strategy`.
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let _ = (thread_ids, strategy);
        Err(self.unsupported("prune"))
    }

    /// For each of `channels`, what its value at the checkpoint `config` addresses is rebuilt
    /// from when it is a delta channel: the nearest stored value on the parent chain (the
    /// seed) and the channel's writes after it (see [`crate::delta`]). Empty `channels` give
    /// an empty map; a checkpoint that does not exist gives empty histories.
    ///
    /// The default walks `get_tuple` up the parent chain, once for all channels; savers with
    /// direct storage access override it with a constant number of queries.
    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        if channels.is_empty() {
            return Ok(DeltaWalk::new(channels).finish());
        }
        let Some(target) = self.get_tuple(config).await? else {
            return Ok(DeltaWalk::new(channels).finish());
        };
        let mut walk = DeltaWalk::new(channels).below(&target.checkpoint.id);
        let mut cursor = target.parent_config;
        while let Some(at) = cursor.take() {
            if walk.is_done() {
                break;
            }
            let Some(t) = self.get_tuple(&at).await? else {
                break;
            };
            let values = &t.checkpoint.channel_values;
            if !walk.visit(&t.checkpoint.id, t.pending_writes.clone(), |ch| {
                values.get(ch).cloned()
            }) {
                break;
            }
            cursor = t.parent_config;
        }
        Ok(walk.finish())
    }

    /// The version that follows `current` (LangGraph's `get_next_version`).
    fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
        next_version(current)
    }

    /// The checkpoint `config` addresses, without metadata and writes.
    async fn get(&self, config: &CheckpointConfig) -> Result<Option<Checkpoint>> {
        Ok(self
            .get_tuple(config)
            .await?
            .map(|t| std::sync::Arc::unwrap_or_clone(t.checkpoint)))
    }

    /// The [`Error::Unsupported`] for `operation` on this saver.
    fn unsupported(&self, operation: &'static str) -> Error {
        Error::Unsupported {
            operation,
            backend: self.name(),
        }
    }
}

/// What a conditional put ([`CheckpointSaver::put_checked`]) requires of the thread's
/// namespace before it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Expect<Id> {
    /// Nothing: the put always happens (a plain [`CheckpointSaver::put`]).
    #[default]
    Any,
    /// The namespace's newest checkpoint must be this one (`None`: it must have none).
    Latest(Option<Id>),
}

impl<Id: AsRef<str>> Expect<Id> {
    /// The same expectation, borrowing the id.
    pub fn as_deref(&self) -> Expect<&str> {
        match self {
            Expect::Any => Expect::Any,
            Expect::Latest(id) => Expect::Latest(id.as_ref().map(AsRef::as_ref)),
        }
    }

    /// The same expectation, owning the id.
    pub fn to_owned(&self) -> Expect<CheckpointId> {
        match self {
            Expect::Any => Expect::Any,
            Expect::Latest(id) => Expect::Latest(id.as_ref().map(|i| i.as_ref().into())),
        }
    }

    /// `Some(expected latest)` for a conditional put, `None` for a plain one.
    pub fn latest(&self) -> Option<Option<&str>> {
        match self {
            Expect::Any => None,
            Expect::Latest(id) => Some(id.as_ref().map(AsRef::as_ref)),
        }
    }
}

/// Checks the arguments every `put` needs.
pub fn validate_put(config: &CheckpointConfig, checkpoint: &Checkpoint) -> Result<()> {
    if config.thread_id.is_empty() {
        return Err(Error::invalid(
            "config.thread_id",
            "a thread id is required",
        ));
    }
    if checkpoint.id.is_empty() {
        return Err(Error::invalid(
            "checkpoint.id",
            "a checkpoint id is required",
        ));
    }
    Ok(())
}

/// One save of a run, as [`CheckpointSaver::apply_batch`] takes them.
#[derive(Clone, Debug)]
pub enum SaveOp {
    /// [`CheckpointSaver::put_if_latest`] of a checkpoint.
    Put {
        /// Where (the parent checkpoint's config).
        config: CheckpointConfig,
        /// The checkpoint.
        checkpoint: Box<Checkpoint>,
        /// Its metadata.
        metadata: CheckpointMetadata,
        /// The channel versions that moved since the parent.
        new_versions: ChannelVersions,
        /// The namespace's newest checkpoint the put expects to follow.
        expected_latest: Option<CheckpointId>,
    },
    /// [`CheckpointSaver::put_writes`] of one task's writes.
    Writes {
        /// The checkpoint the writes belong to.
        config: CheckpointConfig,
        /// `(channel, value)` in the task's order.
        writes: Vec<(String, Value)>,
        /// The task's id.
        task_id: String,
        /// The task's path.
        task_path: String,
    },
}

impl SaveOp {
    /// Applies `ops` one by one, stopping at the first error (what `apply_batch` means, and
    /// what a batching saver falls back to).
    pub async fn apply_each<S: CheckpointSaver + ?Sized>(ops: &[SaveOp], saver: &S) -> Result<()> {
        for op in ops {
            op.apply(saver).await?;
        }
        Ok(())
    }

    /// Applies this op alone.
    pub async fn apply<S: CheckpointSaver + ?Sized>(&self, saver: &S) -> Result<()> {
        match self {
            SaveOp::Put {
                config,
                checkpoint,
                metadata,
                new_versions,
                expected_latest,
            } => saver
                .put_if_latest(
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    expected_latest.as_deref(),
                )
                .await
                .map(drop),
            SaveOp::Writes {
                config,
                writes,
                task_id,
                task_path,
            } => saver.put_writes(config, writes, task_id, task_path).await,
        }
    }
}

/// The [`Error::Conflict`] of a `put_if_latest` that lost the race.
pub fn latest_conflict(
    config: &CheckpointConfig,
    expected: Option<&str>,
    found: Option<&str>,
) -> Error {
    Error::Conflict {
        message: format!(
            "thread `{}` (namespace `{}`) moved on: expected its latest checkpoint to be {}, \
             found {}; another run is writing to this thread",
            config.thread_id,
            config.checkpoint_ns,
            expected.unwrap_or("none"),
            found.unwrap_or("none"),
        ),
    }
}

/// Checks the arguments every `put_writes` needs and returns the checkpoint id.
pub fn validate_put_writes(config: &CheckpointConfig) -> Result<&str> {
    if config.thread_id.is_empty() {
        return Err(Error::invalid(
            "config.thread_id",
            "a thread id is required",
        ));
    }
    config.checkpoint_id.as_deref().ok_or_else(|| {
        Error::invalid(
            "config.checkpoint_id",
            format!(
                "put_writes on thread `{}` needs the checkpoint the writes belong to",
                config.thread_id
            ),
        )
    })
}
