//! `InMemorySaver`: checkpoints in process memory, laid out like LangGraph's.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::checkpoint::{Checkpoint, CheckpointTuple};
use crate::checkpoint_id::CheckpointId;
use crate::config::CheckpointConfig;
use crate::error::{Error, Result};
use crate::metadata::CheckpointMetadata;
use crate::prune::{self, PrunePlan, PruneRow, PruneTarget};
use crate::saver::{
    Capabilities, CheckpointSaver, Expect, ListOptions, PruneStrategy, validate_put,
    validate_put_writes,
};
use crate::version::ChannelVersions;
use crate::writes::{PendingWrite, all_special, write_idx};

mod blobs;
#[cfg(test)]
mod tests;

use blobs::{VersionBlobs, version_key};
use stategraph_value::Value;

/// Keeps checkpoints in memory, for tests and short-lived programs.
///
/// The layout follows LangGraph's `InMemorySaver`: a checkpoint is stored without its values,
/// and each channel value is stored once per (thread, namespace, channel, version), written
/// only when the version is in `new_versions`. So it behaves exactly like the database savers,
/// including what happens when `new_versions` is incomplete.
///
/// A read assembles a checkpoint with its values once and keeps it: later reads of the same
/// checkpoint (a history listed again, a state polled) share it instead of assembling a copy
/// ([`CheckpointTuple`] holds it behind an `Arc`). A kept checkpoint is dropped when a value
/// it was assembled from is stored again, so what a read returns never differs from a fresh
/// assembly; one with a channel whose value was not stored is never kept.
///
/// ```
/// # use stategraph_checkpoint::*;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let saver = InMemorySaver::new();
/// let mut cp = Checkpoint::empty();
/// cp.channel_values.insert("foo".into(), "bar".into());
/// cp.channel_versions.insert("foo", ChannelVersion::Int(1));
/// let versions = cp.channel_versions.clone();
/// let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
/// let config = saver.put(&CheckpointConfig::new("t1"), &cp, &meta, &versions).await?;
/// let tuple = saver.get_tuple(&config).await?.expect("stored");
/// assert_eq!(tuple.checkpoint.channel_values["foo"], Value::from("bar"));
/// # Ok::<(), Error>(()) }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct InMemorySaver {
    inner: Mutex<Inner>,
}

type NsMap = BTreeMap<String, BTreeMap<CheckpointId, Stored>>;
/// (task id, idx) → write.
type TaskWrites = BTreeMap<(String, i64), PendingWrite>;
/// namespace → checkpoint id → its writes.
type NsWrites = BTreeMap<String, IdWrites>;
/// checkpoint id → its writes.
type IdWrites = BTreeMap<String, TaskWrites>;
/// namespace → channel → version (as text) → value, or `None` for "no value at this
/// version".
type NsBlobs = BTreeMap<String, ChannelBlobs>;
/// channel → version (as text) → value.
type ChannelBlobs = BTreeMap<Arc<str>, VersionBlobs>;
/// The values and writes of one (thread, namespace), looked up once for all its checkpoints,
/// and the [`Inner::epoch`] they are read at.
#[derive(Clone, Copy)]
struct Scope<'a> {
    blobs: Option<&'a ChannelBlobs>,
    writes: Option<&'a IdWrites>,
    epoch: u64,
}

/// Nested maps keyed by text, so that a lookup borrows the caller's strings instead of
/// building a key (a listing looks up every channel of every checkpoint).
#[derive(Debug, Default, Clone)]
struct Inner {
    /// thread → namespace → checkpoint id → checkpoint.
    storage: HashMap<String, NsMap>,
    /// thread → namespace → checkpoint id → (task id, idx) → write.
    writes: HashMap<String, NsWrites>,
    /// thread → namespace → channel → version → value.
    blobs: HashMap<String, NsBlobs>,
    /// Counts the values stored again under a (channel, version) that already had one: a
    /// checkpoint assembled at an older epoch may hold the value replaced, and is assembled
    /// again. (Storing a value again is rare: a repaired or re-put checkpoint.)
    epoch: u64,
}

#[derive(Debug, Clone)]
struct Stored {
    /// The checkpoint without channel values.
    checkpoint: Checkpoint,
    metadata: Arc<CheckpointMetadata>,
    parent: Option<CheckpointId>,
    /// The checkpoint with its values, as the first read at an epoch assembled it (only read
    /// and written under the saver's lock).
    assembled: RefCell<Option<(u64, Arc<Checkpoint>)>>,
}

impl InMemorySaver {
    /// An empty saver.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn put(
        &mut self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> CheckpointConfig {
        let thread = &config.thread_id;
        let ns = &config.checkpoint_ns;
        let inner = self;
        if !new_versions.is_empty() {
            let blobs = inner
                .blobs
                .entry(thread.clone())
                .or_default()
                .entry(ns.clone())
                .or_default();
            let mut replaced = false;
            for (channel, version) in new_versions {
                let versions = match blobs.get_mut(channel) {
                    Some(v) => v,
                    None => blobs.entry(channel.into()).or_default(),
                };
                replaced |= versions
                    .insert(
                        version_key(version),
                        checkpoint.channel_values.get(channel).cloned(),
                    )
                    .is_some();
            }
            if replaced {
                inner.epoch += 1;
            }
        }
        // Everything but the values, which live in `blobs` (copying them only to drop them
        // was most of a put's cost).
        let bare = checkpoint.without_values();
        inner
            .storage
            .entry(thread.clone())
            .or_default()
            .entry(ns.clone())
            .or_default()
            .insert(
                checkpoint.id.clone(),
                Stored {
                    checkpoint: bare,
                    metadata: Arc::new(metadata.clone()),
                    parent: config.checkpoint_id.clone(),
                    assembled: RefCell::new(None),
                },
            );
        CheckpointConfig::new(thread.clone())
            .with_ns(ns.clone())
            .with_checkpoint_id(checkpoint.id.clone())
    }

    fn scope(&self, thread: &str, ns: &str) -> Scope<'_> {
        Scope {
            epoch: self.epoch,
            blobs: self.blobs.get(thread).and_then(|nss| nss.get(ns)),
            writes: self.writes.get(thread).and_then(|nss| nss.get(ns)),
        }
    }

    fn tuple(&self, thread: &str, ns: &str, id: &CheckpointId, stored: &Stored) -> CheckpointTuple {
        Self::tuple_in(self.scope(thread, ns), (thread, ns, id), stored, true)
    }

    /// The tuple of checkpoint `id` of (`thread`, `ns`), whose values and writes are in
    /// `scope` (without its values when `values` is false).
    fn tuple_in(
        scope: Scope<'_>,
        (thread, ns, id): (&str, &str, &CheckpointId),
        stored: &Stored,
        values: bool,
    ) -> CheckpointTuple {
        let pending_writes: Vec<PendingWrite> = scope
            .writes
            .and_then(|ids| ids.get(id.as_str()))
            .map(|w| w.values().cloned().collect())
            .unwrap_or_default();
        CheckpointTuple::from_parts(
            thread,
            ns,
            id.clone(),
            stored.parent.clone(),
            if values {
                Self::assembled(scope, stored)
            } else {
                Arc::new(stored.checkpoint.clone())
            },
            Arc::clone(&stored.metadata),
            pending_writes,
        )
    }

    /// `stored` with its values, kept for the next read when every channel's value was
    /// found (see [`InMemorySaver`]).
    fn assembled(scope: Scope<'_>, stored: &Stored) -> Arc<Checkpoint> {
        if let Some((epoch, checkpoint)) = &*stored.assembled.borrow()
            && *epoch == scope.epoch
        {
            return Arc::clone(checkpoint);
        }
        let mut checkpoint = stored.checkpoint.clone();
        let mut complete = true;
        for (channel, version) in &stored.checkpoint.channel_versions {
            match scope
                .blobs
                .and_then(|b| b.get(channel))
                .and_then(|versions| versions.get(&*version.text()))
            {
                Some(Some(v)) => {
                    checkpoint
                        .channel_values
                        .insert(channel.to_owned(), v.clone());
                }
                Some(None) => {}
                None => complete = false,
            }
        }
        let checkpoint = Arc::new(checkpoint);
        if complete {
            *stored.assembled.borrow_mut() = Some((scope.epoch, Arc::clone(&checkpoint)));
        }
        checkpoint
    }

    fn remove_checkpoint(&mut self, thread: &str, ns: &str, id: &str) {
        if let Some(cps) = self.storage.get_mut(thread).and_then(|nss| nss.get_mut(ns)) {
            cps.remove(id);
        }
        if let Some(nss) = self.writes.get_mut(thread) {
            if let Some(ids) = nss.get_mut(ns) {
                ids.remove(id);
                if ids.is_empty() {
                    nss.remove(ns);
                }
            }
            if nss.is_empty() {
                self.writes.remove(thread);
            }
        }
    }

    /// Drops blobs of `thread` that no remaining checkpoint references, and empty maps.
    fn collect_garbage(&mut self, thread: &str) {
        if let Some(nss) = self.storage.get_mut(thread) {
            nss.retain(|_, cps| !cps.is_empty());
            if nss.is_empty() {
                self.storage.remove(thread);
            }
        }
        // (namespace, channel, version) of every value a checkpoint of the thread refers to.
        let mut referenced: BTreeSet<(&str, &str, Cow<'_, str>)> = BTreeSet::new();
        for (ns, cps) in self.storage.get(thread).into_iter().flatten() {
            for s in cps.values() {
                for (ch, v) in &s.checkpoint.channel_versions {
                    referenced.insert((ns, ch, v.text()));
                }
            }
        }
        let Some(nss) = self.blobs.get_mut(thread) else {
            return;
        };
        nss.retain(|ns, channels| {
            channels.retain(|ch, versions| {
                versions
                    .retain(|v, _| referenced.contains(&(ns.as_str(), &**ch, Cow::Borrowed(&**v))));
                !versions.is_empty()
            });
            !channels.is_empty()
        });
        if nss.is_empty() {
            self.blobs.remove(thread);
        }
    }
}

/// `prune` on the locked storage (nothing here waits).
impl PruneTarget for Inner {
    async fn rows(&mut self, thread: &str) -> Result<Vec<PruneRow>> {
        Ok(self
            .storage
            .get(thread)
            .into_iter()
            .flat_map(|nss| nss.iter())
            .flat_map(|(ns, cps)| {
                cps.iter().map(|(id, s)| PruneRow {
                    checkpoint_ns: ns.clone(),
                    checkpoint_id: id.clone(),
                    metadata: CheckpointMetadata::clone(&s.metadata),
                    parent: s.parent.clone(),
                })
            })
            .collect())
    }

    async fn delete_thread(&mut self, thread: &str) -> Result<()> {
        self.storage.remove(thread);
        self.writes.remove(thread);
        self.blobs.remove(thread);
        Ok(())
    }

    async fn delete_checkpoint(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        self.remove_checkpoint(thread, ns, id);
        Ok(())
    }

    async fn unlink_parent(&mut self, thread: &str, ns: &str, id: &str) -> Result<()> {
        if let Some(s) = self
            .storage
            .get_mut(thread)
            .and_then(|nss| nss.get_mut(ns))
            .and_then(|cps| cps.get_mut(id))
        {
            s.parent = None;
        }
        Ok(())
    }

    async fn collect_garbage(&mut self, thread: &str, _plan: &PrunePlan) -> Result<()> {
        Inner::collect_garbage(self, thread);
        Ok(())
    }
}

#[async_trait]
impl CheckpointSaver for InMemorySaver {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn process_local(&self) -> bool {
        true
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let inner = self.lock();
        let Some(cps) = inner
            .storage
            .get(&config.thread_id)
            .and_then(|nss| nss.get(&config.checkpoint_ns))
        else {
            return Ok(None);
        };
        let found = match &config.checkpoint_id {
            Some(id) => cps.get_key_value(id),
            None => cps.iter().next_back(),
        };
        Ok(found.map(|(id, s)| inner.tuple(&config.thread_id, &config.checkpoint_ns, id, s)))
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let inner = self.lock();
        let mut hits: Vec<(&str, &str, &CheckpointId, &Stored)> = Vec::new();
        for (thread, nss) in &inner.storage {
            if options.thread_id.as_ref().is_some_and(|t| t != thread) {
                continue;
            }
            for (ns, cps) in nss {
                if options.checkpoint_ns.as_ref().is_some_and(|n| n != ns) {
                    continue;
                }
                for (id, stored) in cps {
                    if options.checkpoint_id.as_ref().is_some_and(|c| c != id)
                        || options.before.as_ref().is_some_and(|b| id >= b)
                        || !stored.metadata.matches(&options.filter)
                    {
                        continue;
                    }
                    hits.push((thread, ns, id, stored));
                }
            }
        }
        hits.sort_by(|a, b| b.2.cmp(a.2).then_with(|| a.0.cmp(b.0)));
        hits.truncate(options.limit.unwrap_or(usize::MAX));
        // Hits of one (thread, namespace) come together in a listing of one thread.
        let mut scope: Option<(&str, &str, Scope<'_>)> = None;
        Ok(hits
            .into_iter()
            .map(|(t, ns, id, s)| {
                let here = match scope {
                    Some((st, sns, here)) if st == t && sns == ns => here,
                    _ => {
                        let here = inner.scope(t, ns);
                        scope = Some((t, ns, here));
                        here
                    }
                };
                Inner::tuple_in(here, (t, ns, id), s, !options.skip_values)
            })
            .collect())
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        validate_put(config, checkpoint)?;
        let mut inner = self.lock();
        if let Some(expected_latest) = expect.latest() {
            let latest = inner
                .storage
                .get(&config.thread_id)
                .and_then(|nss| nss.get(&config.checkpoint_ns))
                .and_then(|cps| cps.keys().next_back());
            if latest.map(CheckpointId::as_str) != expected_latest {
                return Err(crate::saver::latest_conflict(
                    config,
                    expected_latest,
                    latest.map(CheckpointId::as_str),
                ));
            }
        }
        Ok(inner.put(config, checkpoint, metadata, new_versions))
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let checkpoint_id = validate_put_writes(config)?;
        let replace = all_special(writes);
        let mut inner = self.lock();
        let stored = inner
            .writes
            .entry(config.thread_id.clone())
            .or_default()
            .entry(config.checkpoint_ns.clone())
            .or_default()
            .entry(checkpoint_id.to_owned())
            .or_default();
        for (position, (channel, value)) in writes.iter().enumerate() {
            let idx = write_idx(channel, position);
            let key = (task_id.to_owned(), idx);
            if !replace && stored.contains_key(&key) {
                continue;
            }
            stored.insert(
                key,
                PendingWrite {
                    task_id: task_id.to_owned(),
                    channel: channel.clone(),
                    value: value.clone(),
                    task_path: task_path.to_owned(),
                    idx,
                },
            );
        }
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let mut inner = self.lock();
        inner.storage.remove(thread_id);
        inner.writes.remove(thread_id);
        inner.blobs.remove(thread_id);
        Ok(())
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        let mut doomed = Vec::new();
        for (thread, nss) in &inner.storage {
            for (ns, cps) in nss {
                for (id, s) in cps {
                    if s.metadata
                        .run_id()
                        .is_some_and(|r| run_ids.iter().any(|x| x == r))
                    {
                        doomed.push((thread.clone(), ns.clone(), id.clone()));
                    }
                }
            }
        }
        let threads: BTreeSet<String> = doomed.iter().map(|d| d.0.clone()).collect();
        for (t, ns, id) in &doomed {
            inner.remove_checkpoint(t, ns, id);
        }
        for t in threads {
            inner.collect_garbage(&t);
        }
        Ok(())
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let mut inner = self.lock();
        let Some(nss) = inner.storage.get(source).cloned() else {
            return Err(Error::NotFound {
                what: format!("thread `{source}` to copy"),
            });
        };
        if inner.storage.contains_key(target) {
            return Err(Error::Conflict {
                message: format!("copy_thread target `{target}` already has checkpoints"),
            });
        }
        let writes = inner.writes.get(source).cloned();
        let blobs = inner.blobs.get(source).cloned();
        inner.storage.insert(target.to_owned(), nss);
        if let Some(writes) = writes {
            inner.writes.insert(target.to_owned(), writes);
        }
        if let Some(blobs) = blobs {
            inner.blobs.insert(target.to_owned(), blobs);
        }
        Ok(())
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        // One lock for the whole prune: planned and carried out atomically.
        let mut inner = self.lock();
        prune::run_now(&mut *inner, thread_ids, strategy)
    }
}
