//! What delta channels are rebuilt from: LangGraph's `get_delta_channel_history`.
//!
//! A delta channel (LangGraph's `DeltaChannel`) stores no value in most checkpoints: its value
//! at a checkpoint is the value stored at the nearest ancestor that has one (a full
//! `_DeltaSnapshot`, or a plain value from before the channel became a delta channel) — the
//! *seed* — followed by the channel's writes stored against every checkpoint from that
//! ancestor down to the target's parent, oldest first. The target's own writes belong to its
//! child and are not part of it. The walk follows `parent_checkpoint_id` (not id order), so on a
//! forked thread only the checkpoints on the path count, and it ends independently for each
//! channel at that channel's seed.
//!
//! [`DeltaWalk`] is that walk, fed one ancestor at a time (nearest first) by any saver:
//! [`CheckpointSaver::get_delta_channel_history`]'s default implementation feeds it from
//! `get_tuple`, and savers with direct storage access feed it from one query over the chain.
//!
//! [`CheckpointSaver::get_delta_channel_history`]: crate::CheckpointSaver::get_delta_channel_history

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::writes::PendingWrite;
use stategraph_value::Value;

/// One channel's history at a checkpoint.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeltaChannelHistory {
    /// The value stored at the nearest ancestor that stores one (a `_DeltaSnapshot` ext value,
    /// or a plain value); `None` when the walk reached the root without finding one, which
    /// means "start empty".
    pub seed: Option<Value>,
    /// The channel's writes from the seed's checkpoint (included) to the target's parent,
    /// oldest first; within one checkpoint in LangGraph's write order (task path, task id,
    /// idx).
    pub writes: Vec<PendingWrite>,
}

/// The walk behind `get_delta_channel_history`, fed ancestors nearest first.
#[derive(Debug)]
pub struct DeltaWalk {
    /// Channels still looking for their seed.
    active: BTreeSet<String>,
    seeds: BTreeMap<String, Value>,
    /// Per channel, its writes per visited checkpoint, nearest checkpoint first.
    chunks: BTreeMap<String, Vec<Vec<PendingWrite>>>,
    visited: HashSet<String>,
}

impl DeltaWalk {
    /// A walk for `channels` (duplicates ignored).
    pub fn new(channels: &[String]) -> Self {
        Self {
            active: channels.iter().cloned().collect(),
            seeds: BTreeMap::new(),
            chunks: channels.iter().map(|c| (c.clone(), Vec::new())).collect(),
            visited: HashSet::new(),
        }
    }

    /// Counts `target` (the checkpoint whose ancestors are walked) as visited, so a parent
    /// chain that loops back to it stops there.
    pub fn below(mut self, target: &str) -> Self {
        self.visited.insert(target.to_owned());
        self
    }

    /// Whether every channel has found its seed (the walk can stop).
    pub fn is_done(&self) -> bool {
        self.active.is_empty()
    }

    /// The channels still walking.
    pub fn active(&self) -> impl Iterator<Item = &str> {
        self.active.iter().map(String::as_str)
    }

    /// Visits the next ancestor: `writes` are its pending writes (any channels, any order),
    /// `stored(channel)` the value it stores for a channel, if any. Returns `false` — and
    /// visits nothing — when the chain comes back to a checkpoint already visited (a loop made
    /// by re-putting an id under a descendant), so the caller stops.
    pub fn visit(
        &mut self,
        checkpoint_id: &str,
        writes: impl IntoIterator<Item = PendingWrite>,
        mut stored: impl FnMut(&str) -> Option<Value>,
    ) -> bool {
        if !self.visited.insert(checkpoint_id.to_owned()) {
            return false;
        }
        let mut here: BTreeMap<&str, Vec<PendingWrite>> = BTreeMap::new();
        for w in writes {
            if let Some(ch) = self.active.get(w.channel.as_str()) {
                here.entry(ch.as_str()).or_default().push(w);
            }
        }
        let mut seeded = Vec::new();
        for ch in &self.active {
            let mut chunk = here.remove(ch.as_str()).unwrap_or_default();
            crate::writes::sort_writes(&mut chunk);
            if let Some(c) = self.chunks.get_mut(ch) {
                c.push(chunk);
            }
            if let Some(v) = stored(ch) {
                self.seeds.insert(ch.clone(), v);
                seeded.push(ch.clone());
            }
        }
        for ch in seeded {
            self.active.remove(&ch);
        }
        true
    }

    /// The histories, one per requested channel.
    pub fn finish(self) -> BTreeMap<String, DeltaChannelHistory> {
        let mut seeds = self.seeds;
        self.chunks
            .into_iter()
            .map(|(ch, chunks)| {
                let writes = chunks.into_iter().rev().flatten().collect();
                let seed = seeds.remove(&ch);
                (ch, DeltaChannelHistory { seed, writes })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(channel: &str, task_path: &str, v: i64) -> PendingWrite {
        PendingWrite {
            task_id: format!("t{v}"),
            channel: channel.to_owned(),
            value: Value::Int(v),
            task_path: task_path.to_owned(),
            idx: 0,
        }
    }

    #[test]
    fn walks_nearest_first_and_returns_oldest_first() {
        let mut walk = DeltaWalk::new(&["a".to_owned(), "b".to_owned()]);
        assert!(walk.visit("c3", [w("a", "", 3), w("b", "", 3)], |_| None));
        assert!(
            walk.visit("c2", [w("a", "~b", 22), w("a", "~a", 21)], |ch| {
                (ch == "b").then_some(Value::Int(200))
            })
        );
        assert_eq!(walk.active().collect::<Vec<_>>(), ["a"]);
        assert!(walk.visit("c1", [w("a", "", 1), w("b", "", 1)], |ch| {
            (ch == "a").then_some(Value::Int(100))
        }));
        assert!(walk.is_done());
        assert!(!walk.visit("c1", [], |_| None), "a loop stops the walk");
        let h = walk.finish();
        let vals =
            |ch: &str| -> Vec<Value> { h[ch].writes.iter().map(|w| w.value.clone()).collect() };
        assert_eq!(vals("a"), [1, 21, 22, 3].map(Value::Int));
        assert_eq!(h["a"].seed, Some(Value::Int(100)));
        assert_eq!(vals("b"), [Value::Int(3)], "c2's own b writes: none");
        assert_eq!(h["b"].seed, Some(Value::Int(200)));
    }
}
