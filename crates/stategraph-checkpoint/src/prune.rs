//! Planning `prune(keep_latest)`: which checkpoints of a thread go, shared by every saver.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::metadata::CheckpointMetadata;

/// One stored checkpoint of the thread being pruned.
#[derive(Clone, Debug)]
pub struct PruneRow {
    /// Its namespace.
    pub checkpoint_ns: String,
    /// Its id.
    pub checkpoint_id: String,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
}

/// What to do to one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// (namespace, checkpoint id) pairs to delete with their writes.
    pub delete: BTreeSet<(String, String)>,
    /// (namespace, checkpoint id) pairs that stay.
    pub keep: BTreeSet<(String, String)>,
    /// Kept checkpoints whose delta channels are rebuilt from the history the plan deletes;
    /// they must be re-snapshotted first (see `CompiledGraph::prune_keep_latest`).
    pub needs_history: BTreeSet<(String, String)>,
}

impl PrunePlan {
    /// Whether a kept checkpoint's parent link must be cleared because the parent goes.
    pub fn parent_deleted(&self, ns: &str, parent: Option<&str>) -> bool {
        parent.is_some_and(|p| self.delete.contains(&(ns.to_owned(), p.to_owned())))
    }
}

/// Metadata keys that mark a thread using delta channels, whose history cannot be cut.
const DELTA_MARKERS: [&str; 2] = ["counters_since_delta_snapshot", "delta_writes_versioned"];

/// Plans `keep_latest` for one thread, as LangGraph's Postgres saver does: keep the newest
/// checkpoint of every namespace; drop a subgraph namespace (one containing `:`) entirely when
/// the root checkpoint it ran under is stored but is not the kept root checkpoint. A kept
/// checkpoint that still rebuilds delta channels from its history (its metadata counts
/// updates since a snapshot) is refused, as cutting that history would lose data: re-snapshot
/// it first (`CompiledGraph::prune_keep_latest` does), or see [`plan_keep_latest_lenient`].
pub fn plan_keep_latest(thread_id: &str, rows: &[PruneRow]) -> Result<PrunePlan> {
    let plan = plan_keep_latest_lenient(rows);
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
                 rebuilt from the history keep_latest would delete (re-snapshot it first, e.g. \
                 with CompiledGraph::prune_keep_latest)"
            ),
        ));
    }
    Ok(plan)
}

/// [`plan_keep_latest`] without the delta check: the plan, with the kept checkpoints that
/// need their history listed in [`PrunePlan::needs_history`].
pub fn plan_keep_latest_lenient(rows: &[PruneRow]) -> PrunePlan {
    let mut heads: BTreeMap<&str, &PruneRow> = BTreeMap::new();
    for r in rows {
        let slot = heads.entry(&r.checkpoint_ns).or_insert(r);
        if r.checkpoint_id > slot.checkpoint_id {
            *slot = r;
        }
    }
    let root_ids: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.checkpoint_ns.is_empty())
        .map(|r| r.checkpoint_id.as_str())
        .collect();
    let root_head = heads.get("").map(|r| r.checkpoint_id.as_str());
    let mut plan = PrunePlan::default();
    let mut dropped_ns = BTreeSet::new();
    for (ns, head) in &heads {
        if ns.contains(':') {
            let root_parent = head
                .metadata
                .parents
                .as_ref()
                .and_then(|p| p.get(""))
                .map(String::as_str);
            if let Some(rp) = root_parent
                && root_ids.contains(rp)
                && Some(rp) != root_head
            {
                dropped_ns.insert(*ns);
                continue;
            }
        }
        plan.keep
            .insert((head.checkpoint_ns.clone(), head.checkpoint_id.clone()));
    }
    for r in rows {
        let key = (r.checkpoint_ns.clone(), r.checkpoint_id.clone());
        if dropped_ns.contains(r.checkpoint_ns.as_str()) || !plan.keep.contains(&key) {
            plan.delete.insert(key);
        } else if DELTA_MARKERS
            .iter()
            .any(|k| r.metadata.extra.contains_key(*k))
        {
            plan.needs_history.insert(key);
        }
    }
    if plan.delete.is_empty() {
        plan.needs_history.clear();
    }
    plan
}
