//! `prune` for every saver: which checkpoints of a thread go, for every strategy ([`plan`]),
//! and the driver that carries a plan out ([`run`]) over a backend's few primitive
//! operations ([`PruneTarget`]), so that every saver prunes, refuses and collects garbage
//! the same way.

use std::collections::{BTreeMap, BTreeSet};

use crate::checkpoint_id::CheckpointId;
use crate::error::{Error, Result};
use crate::metadata::CheckpointMetadata;

/// One stored checkpoint of the thread being pruned.
#[derive(Clone, Debug)]
pub struct PruneRow {
    /// Its namespace.
    pub checkpoint_ns: String,
    /// Its id.
    pub checkpoint_id: CheckpointId,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// Its parent's id, if any.
    pub parent: Option<CheckpointId>,
}

impl PruneRow {
    /// The row of a stored checkpoint from its columns: its metadata's stored JSON is read
    /// strictly (anything but LangGraph metadata is an [`Error::Serialization`] naming the
    /// checkpoint, never empty metadata, which would switch the delta-history check off).
    pub fn read(
        thread: &str,
        checkpoint_ns: String,
        checkpoint_id: CheckpointId,
        parent: Option<CheckpointId>,
        metadata: serde_json::Value,
    ) -> Result<Self> {
        let loc = crate::Location::checkpoint(thread, &checkpoint_ns, &checkpoint_id);
        Ok(Self {
            metadata: crate::backend::metadata_from_json(metadata, &loc)?,
            checkpoint_ns,
            checkpoint_id,
            parent,
        })
    }

    /// The row of a stored checkpoint.
    pub fn from_tuple(t: &crate::CheckpointTuple) -> Self {
        Self {
            checkpoint_ns: t.config.checkpoint_ns.clone(),
            checkpoint_id: t.checkpoint.id.clone(),
            metadata: crate::CheckpointMetadata::clone(&t.metadata),
            parent: t
                .parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id.clone()),
        }
    }
}

/// What to do to one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// (namespace, checkpoint id) pairs to delete with their writes.
    pub delete: BTreeSet<(String, CheckpointId)>,
    /// (namespace, checkpoint id) pairs that stay.
    pub keep: BTreeSet<(String, CheckpointId)>,
    /// Kept checkpoints whose delta channels are rebuilt from the history the plan deletes;
    /// they must be re-snapshotted first (see `CompiledGraph::prune_keep_latest`).
    pub needs_history: BTreeSet<(String, CheckpointId)>,
}

impl PrunePlan {
    /// Whether a kept checkpoint's parent link must be cleared because the parent goes.
    pub fn parent_deleted(&self, ns: &str, parent: Option<&str>) -> bool {
        parent.is_some_and(|p| self.delete.contains(&(ns.to_owned(), p.into())))
    }

    /// Whether `row` stays but its parent goes (its parent link must be cleared).
    pub fn needs_unlink(&self, row: &PruneRow) -> bool {
        self.keep
            .contains(&(row.checkpoint_ns.clone(), row.checkpoint_id.clone()))
            && self.parent_deleted(&row.checkpoint_ns, row.parent.as_deref())
    }
}

/// Metadata keys that mark a thread using delta channels, whose history cannot be cut.
const DELTA_MARKERS: [&str; 2] = ["counters_since_delta_snapshot", "delta_writes_versioned"];

/// The storage operations [`run`] needs from a saver. Each is one statement or command of
/// the backend; the driver decides what to call, so the rules live in one place.
///
/// A transactional backend implements this on its open transaction, so that a refused plan
/// (or any error) leaves every thread untouched.
#[allow(async_fn_in_trait)] // implemented per backend on concrete types; Send is known there
pub trait PruneTarget {
    /// Every stored checkpoint of `thread` (all namespaces). Metadata that cannot be read is
    /// an error ([`Error::Serialization`] naming the checkpoint), never empty metadata: the
    /// plan's delta-history check depends on it.
    async fn rows(&mut self, thread: &str) -> Result<Vec<PruneRow>>;
    /// Removes every checkpoint, write and blob of `thread`.
    async fn delete_thread(&mut self, thread: &str) -> Result<()>;
    /// Removes one checkpoint and its writes (not its blobs).
    async fn delete_checkpoint(&mut self, thread: &str, ns: &str, id: &str) -> Result<()>;
    /// Clears the parent link of a kept checkpoint whose parent was deleted.
    async fn unlink_parent(&mut self, thread: &str, ns: &str, id: &str) -> Result<()>;
    /// Removes what the deleted checkpoints leave unreferenced (blobs, empty indexes). It
    /// must be conservative: a stored checkpoint that cannot be read keeps all it may use.
    async fn collect_garbage(&mut self, thread: &str, plan: &PrunePlan) -> Result<()>;
}

/// Prunes `thread_ids` by `strategy` through `target`: every thread is planned first, so a
/// thread the plan refuses (see [`plan`]) leaves all of them untouched, then each plan is
/// carried out (deletions, parent links of kept checkpoints, garbage).
pub async fn run<T: PruneTarget + ?Sized>(
    target: &mut T,
    thread_ids: &[String],
    strategy: crate::PruneStrategy,
) -> Result<()> {
    if strategy == crate::PruneStrategy::Delete {
        for thread in thread_ids {
            target.delete_thread(thread).await?;
        }
        return Ok(());
    }
    let mut plans = Vec::with_capacity(thread_ids.len());
    for thread in thread_ids {
        let rows = target.rows(thread).await?;
        let plan = plan(thread, strategy, &rows)?;
        plans.push((thread, rows, plan));
    }
    for (thread, rows, plan) in plans {
        for (ns, id) in &plan.delete {
            target.delete_checkpoint(thread, ns, id).await?;
        }
        for r in &rows {
            if plan.needs_unlink(r) {
                target
                    .unlink_parent(thread, &r.checkpoint_ns, &r.checkpoint_id)
                    .await?;
            }
        }
        target.collect_garbage(thread, &plan).await?;
    }
    Ok(())
}

/// [`run`] for a target whose operations never wait (an embedded database called on a
/// blocking thread, memory): drives it to completion on the calling thread.
pub fn run_now<T: PruneTarget + ?Sized>(
    target: &mut T,
    thread_ids: &[String],
    strategy: crate::PruneStrategy,
) -> Result<()> {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(run(target, thread_ids, strategy));
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => result,
        Poll::Pending => Err(Error::invalid(
            "prune target",
            "run_now needs a target whose operations complete without waiting; use run",
        )),
    }
}

/// Plans `keep_latest` for one thread, as LangGraph's Postgres saver does: keep the newest
/// checkpoint of every namespace; drop a subgraph namespace (one containing `:`) entirely when
/// the root checkpoint it ran under is stored but is not the kept root checkpoint (the rule
/// [`plan`] applies to every strategy; `KeepLatest` is `KeepLast(1)`).
pub fn plan_keep_latest(thread_id: &str, rows: &[PruneRow]) -> Result<PrunePlan> {
    plan(thread_id, crate::PruneStrategy::KeepLatest, rows)
}

/// Plans `strategy` for one thread (every strategy but `Delete`, which needs no plan).
/// Checkpoints of a subgraph namespace go with the root checkpoint they ran under. Kept
/// checkpoints that would lose the history their delta channels are rebuilt from are refused
/// (see [`plan_keep_latest`]); [`plan_lenient`] lists them instead.
pub fn plan(
    thread_id: &str,
    strategy: crate::PruneStrategy,
    rows: &[PruneRow],
) -> Result<PrunePlan> {
    let plan = plan_lenient(strategy, rows);
    if let Some((ns, id)) = plan.needs_history.iter().next() {
        let at = if ns.is_empty() {
            String::new()
        } else {
            format!(" (namespace `{ns}`)")
        };
        return Err(Error::invalid(
            "prune strategy",
            format!(
                "thread `{thread_id}` uses delta channels: its kept checkpoint {id}{at} is \
                 rebuilt from history this prune would delete (re-snapshot it first, e.g. \
                 with CompiledGraph::prune)"
            ),
        ));
    }
    Ok(plan)
}

/// [`plan`] without the delta check: kept checkpoints that need deleted history are listed
/// in [`PrunePlan::needs_history`].
pub fn plan_lenient(strategy: crate::PruneStrategy, rows: &[PruneRow]) -> PrunePlan {
    use crate::PruneStrategy as S;
    if let S::IdleSince(time) = strategy {
        let first = stategraph_value::id::first_uuid6_at(time);
        let idle = rows
            .iter()
            .all(|r| r.checkpoint_id.as_str() < first.as_str());
        let mut plan = PrunePlan::default();
        for r in rows {
            let key = (r.checkpoint_ns.clone(), r.checkpoint_id.clone());
            if idle {
                plan.delete.insert(key);
            } else {
                plan.keep.insert(key);
            }
        }
        return plan;
    }
    let mut by_ns: BTreeMap<&str, Vec<&PruneRow>> = BTreeMap::new();
    for r in rows {
        by_ns.entry(&r.checkpoint_ns).or_default().push(r);
    }
    let mut keep: BTreeSet<(String, CheckpointId)> = BTreeSet::new();
    for (ns, mut members) in by_ns {
        // Newest first.
        members.sort_by(|a, b| b.checkpoint_id.cmp(&a.checkpoint_id));
        let key = |r: &PruneRow| (ns.to_owned(), r.checkpoint_id.clone());
        match strategy {
            S::KeepLatest => keep.extend(members.iter().take(1).map(|r| key(r))),
            S::KeepLast(n) => keep.extend(members.iter().take(n.max(1)).map(|r| key(r))),
            S::OlderThan(time) => {
                let first = stategraph_value::id::first_uuid6_at(time);
                keep.extend(
                    members
                        .iter()
                        .enumerate()
                        .filter(|(i, r)| *i == 0 || r.checkpoint_id.as_str() >= first.as_str())
                        .map(|(_, r)| key(r)),
                );
            }
            S::AbandonedBranches => {
                let ids: BTreeMap<&str, &PruneRow> = members
                    .iter()
                    .map(|r| (r.checkpoint_id.as_str(), *r))
                    .collect();
                // The line of history behind the newest checkpoint.
                let mut line = BTreeSet::new();
                let mut cursor = members.first().copied();
                while let Some(r) = cursor {
                    if !line.insert(r.checkpoint_id.as_str()) {
                        break;
                    }
                    cursor = r.parent.as_deref().and_then(|p| ids.get(p).copied());
                }
                let mut steps_seen = BTreeSet::new();
                for r in &members {
                    if line.contains(r.checkpoint_id.as_str()) || steps_seen.insert(r.metadata.step)
                    {
                        keep.insert(key(r));
                    }
                }
            }
            _ => keep.extend(members.iter().map(|r| key(r))),
        }
    }
    // A subgraph namespace goes with the root checkpoint it ran under.
    let root_ids: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.checkpoint_ns.is_empty())
        .map(|r| r.checkpoint_id.as_str())
        .collect();
    let mut plan = PrunePlan::default();
    for r in rows {
        let key = (r.checkpoint_ns.clone(), r.checkpoint_id.clone());
        let orphaned = r.checkpoint_ns.contains(':')
            && r.metadata
                .parents
                .as_ref()
                .and_then(|p| p.get(""))
                .is_some_and(|rp| {
                    root_ids.contains(rp.as_str()) && !keep.contains(&(String::new(), rp.into()))
                });
        if orphaned || !keep.contains(&key) {
            plan.delete.insert(key);
        } else {
            plan.keep.insert(key);
        }
    }
    // Kept checkpoints still counting delta updates whose parent chain loses a checkpoint.
    let parents: BTreeMap<(&str, &str), Option<&str>> = rows
        .iter()
        .map(|r| {
            (
                (r.checkpoint_ns.as_str(), r.checkpoint_id.as_str()),
                r.parent.as_deref(),
            )
        })
        .collect();
    for r in rows {
        let key = (r.checkpoint_ns.clone(), r.checkpoint_id.clone());
        if !plan.keep.contains(&key)
            || !DELTA_MARKERS
                .iter()
                .any(|k| r.metadata.extra.contains_key(*k))
        {
            continue;
        }
        let mut cursor = r.parent.as_deref();
        let mut hops = 0;
        while let Some(p) = cursor {
            if plan.delete.contains(&(r.checkpoint_ns.clone(), p.into())) {
                plan.needs_history.insert(key.clone());
                break;
            }
            hops += 1;
            if hops > rows.len() {
                break;
            }
            cursor = parents
                .get(&(r.checkpoint_ns.as_str(), p))
                .copied()
                .flatten();
        }
    }
    plan
}
