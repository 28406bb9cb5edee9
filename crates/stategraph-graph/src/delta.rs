//! Delta channels in the engine (LangGraph's `DeltaChannel`): when a checkpoint stores a full
//! `_DeltaSnapshot`, how reads rebuild the values checkpoints leave out, and the
//! `counters_since_delta_snapshot` metadata both implementations keep.
//!
//! A delta channel's value at a checkpoint is its nearest stored snapshot plus the writes
//! stored after it on the parent chain — which holds only when the writes stored against a
//! checkpoint are exactly the ones its child applied. Wherever that is not so (a new branch
//! from a checkpoint whose writes belong to another child, an `update_state` whose writes are
//! not recorded, a run saving only at exit) the checkpoint snapshots the channel instead, as
//! LangGraph does. A snapshot is never wrong, only bigger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointSaver,
    CheckpointTuple, PendingWrite,
};

use crate::channel::ChannelSpec;
use crate::compiled::CompiledGraph;
use crate::error::GraphError;
use crate::state::State;
use crate::step::Channels;

/// The metadata key of the per-channel (updates, supersteps) counters.
pub(crate) const COUNTERS: &str = "counters_since_delta_snapshot";

/// Supersteps after which a delta channel snapshots even without updates (LangGraph's
/// `LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`, default 5000; read from the same variable).
pub(crate) fn max_supersteps() -> u64 {
    std::env::var("LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000)
}

/// LangGraph's synthetic task id for an `exit`-durability delta write of `step`: the step in
/// the first group keeps the ids in step order; never the null task id.
pub(crate) fn exit_task_id(step: i64, task_id: &str) -> String {
    let parts: Vec<&str> = task_id.split('-').collect();
    let id = match parts.as_slice() {
        [_, a, b, c, d] => format!("{step:08}-{a}-{b}-{c}-{d}"),
        _ => format!("{step:08}-0000-0000-0000-000000000000"),
    };
    if id == stategraph_checkpoint::NULL_TASK_ID {
        format!("{step:08}-0000-0000-0000-000000000001")
    } else {
        id
    }
}

/// The synthetic task id for a write of a later step than the run's first: sorts after every
/// real task id, in step order.
pub(crate) fn exit_late_task_id(step: i64, task_id: &str) -> String {
    let parts: Vec<&str> = task_id.split('-').collect();
    let (c, d) = match parts.as_slice() {
        [_, _, _, c, d] => (*c, *d),
        _ => ("0000", "000000000000"),
    };
    format!("ffffffff-{:04x}-{:04x}-{c}-{d}", step >> 16, step & 0xFFFF)
}

/// Delta channel → (updates, supersteps) since its last snapshot.
pub(crate) type Counters = BTreeMap<String, (u64, u64)>;

/// The counters a checkpoint's metadata carries (`{ch: [updates, supersteps]}`).
pub(crate) fn counters_of(metadata: &CheckpointMetadata) -> Counters {
    let Some(Json::Object(map)) = metadata.extra.get(COUNTERS) else {
        return Counters::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            let pair = v.as_array()?;
            Some((k.clone(), (pair.first()?.as_u64()?, pair.get(1)?.as_u64()?)))
        })
        .collect()
}

/// Records `counters` in `metadata`: the non-zero ones, or no key at all.
pub(crate) fn set_counters(metadata: &mut CheckpointMetadata, counters: &Counters) {
    let non_zero: serde_json::Map<String, Json> = counters
        .iter()
        .filter(|(_, c)| **c != (0, 0))
        .map(|(k, (u, s))| (k.clone(), json!([u, s])))
        .collect();
    if non_zero.is_empty() {
        metadata.extra.remove(COUNTERS);
    } else {
        metadata
            .extra
            .insert(COUNTERS.to_owned(), Json::Object(non_zero));
    }
}

/// What a new checkpoint's delta bookkeeping starts from.
pub(crate) struct StepDelta<'a> {
    /// The counters of the checkpoint it follows.
    pub(crate) previous: &'a Counters,
    /// The channels this step updated.
    pub(crate) updated: &'a BTreeSet<String>,
    /// Delta channels that must snapshot.
    pub(crate) forced: &'a BTreeSet<String>,
    /// The channel versions the saver last stored.
    pub(crate) stored: &'a ChannelVersions,
    /// Whether this checkpoint is saved (with `exit` durability only the last one is: the
    /// others only count).
    pub(crate) saved: bool,
    /// Whether to count this superstep; `false` when `previous` counts it already (the final
    /// checkpoint of an `exit` run, decided on the counts of its steps).
    pub(crate) count: bool,
}

/// What one new checkpoint does about delta channels.
pub(crate) struct Plan {
    /// Channels stored as full snapshots in it.
    pub(crate) snapshot: BTreeSet<String>,
    /// Its counters.
    pub(crate) counters: Counters,
}

impl<S: State> CompiledGraph<S> {
    /// The delta channels and their snapshot frequencies.
    pub(crate) fn delta_channels(&self) -> impl Iterator<Item = (&str, u32)> {
        self.channel_specs
            .iter()
            .filter_map(|(k, spec)| match spec {
                ChannelSpec::Delta {
                    snapshot_frequency, ..
                } => Some((&**k, *snapshot_frequency)),
                _ => None,
            })
    }

    /// The delta channels `writes` touch.
    pub(crate) fn delta_channels_in(&self, writes: &[PendingWrite]) -> BTreeSet<String> {
        let delta: BTreeSet<&str> = self.delta_channels().map(|(k, _)| k).collect();
        writes
            .iter()
            .filter(|w| delta.contains(w.channel.as_str()))
            .map(|w| w.channel.clone())
            .collect()
    }

    /// LangGraph's per-superstep bookkeeping for a new checkpoint: every delta channel counts
    /// a superstep, the `updated` ones an update; a channel snapshots when its updates reach
    /// its frequency, its supersteps the global bound, or it is `forced` — if it has a value
    /// and a version. A snapshot whose version has not moved since `stored` (what the saver
    /// last stored) gets a new version, as savers store values only for versions that moved;
    /// state keys trigger no node, so the bump wakes nothing.
    pub(crate) fn plan_snapshots(
        &self,
        checkpoint: &mut Checkpoint,
        channels: &Channels,
        step: &StepDelta<'_>,
        next_version: &dyn Fn(Option<&ChannelVersion>) -> ChannelVersion,
    ) -> Plan {
        let StepDelta {
            previous,
            updated,
            forced,
            stored,
            saved,
            count,
        } = step;
        let bound = max_supersteps();
        let mut counters = Counters::new();
        let mut snapshot = BTreeSet::new();
        for (name, frequency) in self.delta_channels() {
            let (u, s) = previous.get(name).copied().unwrap_or((0, 0));
            let (u, s) = if *count {
                (u + u64::from(updated.contains(name)), s + 1)
            } else {
                (u, s)
            };
            counters.insert(name.to_owned(), (u, s));
            let due = *saved && (u >= u64::from(frequency) || s >= bound || forced.contains(name));
            let has_value = channels.get(name).is_some_and(|c| c.is_available());
            if due && has_value && checkpoint.channel_versions.contains_key(name) {
                snapshot.insert(name.to_owned());
            }
        }
        for name in &snapshot {
            counters.insert(name.clone(), (0, 0));
            let current = checkpoint.channel_versions.get(name).cloned();
            if current.as_ref() == stored.get(name) {
                let bumped = next_version(current.as_ref());
                checkpoint.channel_versions.insert(name.clone(), bumped);
            }
        }
        Plan { snapshot, counters }
    }

    /// Puts back, into a loaded checkpoint, the values it leaves out: each delta channel (or
    /// reducer channel — a key that was a delta channel when written) that has a version but
    /// no stored value is rebuilt from its history, in one saver call for all of them.
    pub(crate) async fn hydrate(
        &self,
        saver: &dyn CheckpointSaver,
        tuple: &mut CheckpointTuple,
    ) -> Result<(), GraphError> {
        let cp = &tuple.checkpoint;
        let mut missing: Vec<String> = self
            .channel_specs
            .iter()
            .filter(|(k, spec)| {
                spec.rebuilds_from_history()
                    && !cp.channel_values.contains_key(&**k)
                    && cp.channel_versions.contains_key(k)
            })
            .map(|(k, _)| k.to_string())
            .collect();
        if missing.is_empty() {
            // Nothing left out (a listing's usual case): nothing to look up.
            return Ok(());
        }
        // Values this graph's own last run on the thread ended with need no walk.
        let (thread, ns) = (&tuple.config.thread_id, &tuple.config.checkpoint_ns);
        let checkpoint = Arc::make_mut(&mut tuple.checkpoint);
        let id = checkpoint.id.clone();
        let values = &mut checkpoint.channel_values;
        missing.retain(|k| match self.head.rebuilt(thread, ns, &id, k) {
            Some(v) => {
                values.insert(k.clone(), v);
                false
            }
            None => true,
        });
        if missing.is_empty() {
            return Ok(());
        }
        let histories = saver
            .get_delta_channel_history(&tuple.config, &missing)
            .await?;
        for (name, history) in histories {
            let Some((_, spec)) = self.channel_specs.iter().find(|(k, _)| **k == *name) else {
                continue;
            };
            let mut channel = spec.create(history.seed);
            for w in history.writes {
                channel.update(&name, vec![w.value])?;
            }
            if let Some(v) = channel.get() {
                Arc::make_mut(&mut tuple.checkpoint)
                    .channel_values
                    .insert(name, v);
            }
        }
        Ok(())
    }

    /// [`CheckpointSaver::prune`] of one thread that also works when it has delta keys:
    /// every kept root-namespace checkpoint that would lose the history its delta (or
    /// left-out reducer) keys are rebuilt from is first rewritten with full `_DeltaSnapshot`s
    /// of them (computed with this graph's reducers, its delta counters reset). Subgraph
    /// namespaces that still need their history make the saver refuse, naming them.
    pub async fn prune(
        &self,
        thread_id: &str,
        strategy: stategraph_checkpoint::PruneStrategy,
    ) -> Result<(), GraphError> {
        let saver = self.saver()?;
        if strategy != stategraph_checkpoint::PruneStrategy::Delete {
            let tuples = saver
                .list(&stategraph_checkpoint::ListOptions::thread(thread_id))
                .await?;
            let rows: Vec<stategraph_checkpoint::prune::PruneRow> = tuples
                .iter()
                .map(stategraph_checkpoint::prune::PruneRow::from_tuple)
                .collect();
            let plan = stategraph_checkpoint::prune::plan_lenient(strategy, &rows);
            for raw in tuples.iter().filter(|t| {
                t.config.checkpoint_ns.is_empty()
                    && plan
                        .needs_history
                        .contains(&(String::new(), t.checkpoint.id.clone()))
            }) {
                self.resnapshot(saver.as_ref(), raw).await?;
            }
        }
        saver.prune(&[thread_id.to_owned()], strategy).await?;
        Ok(())
    }

    /// [`prune`](Self::prune) with [`PruneStrategy::KeepLatest`](stategraph_checkpoint::PruneStrategy::KeepLatest).
    pub async fn prune_keep_latest(&self, thread_id: &str) -> Result<(), GraphError> {
        self.prune(thread_id, stategraph_checkpoint::PruneStrategy::KeepLatest)
            .await
    }

    /// Rewrites a stored checkpoint with a full snapshot of every delta (or reducer) key it
    /// leaves out, and its delta counters reset: afterwards it needs no history.
    async fn resnapshot(
        &self,
        saver: &dyn CheckpointSaver,
        raw: &CheckpointTuple,
    ) -> Result<(), GraphError> {
        let mut head = raw.clone();
        self.hydrate(saver, &mut head).await?;
        let mut checkpoint = Checkpoint::clone(&raw.checkpoint);
        let mut versions = ChannelVersions::new();
        // The values hydrate put back are exactly the ones the record leaves out.
        for (name, value) in Arc::unwrap_or_clone(head.checkpoint).channel_values {
            if raw.checkpoint.channel_values.contains_key(&name) {
                continue;
            }
            if let Some(version) = raw.checkpoint.channel_versions.get(&name) {
                versions.insert(name.clone(), version.clone());
                checkpoint
                    .channel_values
                    .insert(name, crate::channel::snapshot_of(&value));
            }
        }
        let mut metadata = CheckpointMetadata::clone(&raw.metadata);
        set_counters(&mut metadata, &Counters::new());
        let parent = raw.parent_config.clone().unwrap_or_else(|| {
            stategraph_checkpoint::CheckpointConfig::new(raw.config.thread_id.clone())
                .with_ns(raw.config.checkpoint_ns.clone())
        });
        saver
            .put(&parent, &checkpoint, &metadata, &versions)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_exit_task_ids_match_langgraph() {
        // Values printed by langgraph 1.2.22's exit_delta_task_id / exit_delta_late_task_id.
        let t = "1f0e5c3a-7b2d-8e91-a4c6-0123456789ab";
        assert_eq!(exit_task_id(3, t), "00000003-7b2d-8e91-a4c6-0123456789ab");
        assert_eq!(
            exit_late_task_id(70000, t),
            "ffffffff-0001-1170-a4c6-0123456789ab"
        );
        assert_eq!(
            exit_task_id(0, stategraph_checkpoint::NULL_TASK_ID),
            "00000000-0000-0000-0000-000000000001"
        );
    }

    #[test]
    fn counters_roundtrip_through_metadata() {
        let mut meta = CheckpointMetadata::default();
        let mut c = Counters::new();
        c.insert("messages".into(), (3, 4));
        c.insert("other".into(), (0, 0));
        set_counters(&mut meta, &c);
        assert_eq!(meta.extra[COUNTERS], json!({"messages": [3, 4]}));
        c.remove("other");
        assert_eq!(counters_of(&meta), c);
        set_counters(&mut meta, &Counters::new());
        assert!(!meta.extra.contains_key(COUNTERS));
    }
}
