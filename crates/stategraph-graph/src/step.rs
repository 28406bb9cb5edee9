//! A super-step's pure parts (the Pregel algorithm), bit-compatible with LangGraph: task ids
//! and paths, which nodes run, how a step's writes are applied, and what a checkpoint stores.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointId, Value, channels as reserved,
    format_uuid, now_iso,
};

use crate::channel::{Channel, ChannelSpec};
use crate::error::GraphError;

mod view;
pub(crate) use view::{ChannelRead, Stored};

/// Live channels by name, sorted (shared names: restoring a checkpoint's channels copies no
/// text). A sorted vector, not a tree: a graph has a handful of channels, restored for every
/// step and every snapshot, and one allocation holds them all.
#[derive(Clone, Debug, Default)]
pub(crate) struct Channels {
    sorted: Vec<(std::sync::Arc<str>, Channel)>,
}

impl Channels {
    /// No channels, with room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            sorted: Vec::with_capacity(n),
        }
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.sorted.binary_search_by(|(k, _)| (**k).cmp(name))
    }

    /// The channel `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Channel> {
        let i = self.find(name).ok()?;
        self.sorted.get(i).map(|(_, c)| c)
    }

    /// The channel `name`, to change.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Channel> {
        let i = self.find(name).ok()?;
        self.sorted.get_mut(i).map(|(_, c)| c)
    }

    /// Whether there is a channel `name`.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Sets the channel `name` (in order: appending names in sorted order moves nothing).
    pub(crate) fn insert(&mut self, name: std::sync::Arc<str>, channel: Channel) {
        match self.find(&name) {
            Ok(i) => {
                if let Some(slot) = self.sorted.get_mut(i) {
                    slot.1 = channel;
                }
            }
            Err(i) => self.sorted.insert(i, (name, channel)),
        }
    }

    /// The channels by name, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&std::sync::Arc<str>, &Channel)> {
        self.sorted.iter().map(|(k, c)| (k, c))
    }

    /// The channels by name, in order, to change.
    pub(crate) fn iter_mut(
        &mut self,
    ) -> impl Iterator<Item = (&std::sync::Arc<str>, &mut Channel)> {
        self.sorted.iter_mut().map(|(k, c)| (&*k, c))
    }
}

/// How the next channel version is computed (the checkpointer's `get_next_version`).
pub(crate) type NextVersion<'a> = dyn Fn(Option<&ChannelVersion>) -> ChannelVersion + 'a;

/// `"__pregel_pull"`: a task triggered by channel versions.
pub(crate) const PULL: &str = "__pregel_pull";
/// The pseudo-task name of graph input.
pub(crate) const INPUT: &str = "__input__";
/// The pseudo-task name of `update_state`, and the versions_seen key of interrupts.
pub(crate) const INTERRUPT: &str = "__interrupt__";

/// LangGraph's task id: xxh3-128 of the checkpoint id's 16 bytes followed by `parts`,
/// formatted 8-4-4-4-12 (not an RFC UUID).
pub(crate) fn task_id(checkpoint_id: &str, parts: &[&str]) -> String {
    let mut bytes: Vec<u8> =
        Vec::with_capacity(checkpoint_id.len() + parts.iter().map(|p| p.len()).sum::<usize>());
    task_id_in(&mut bytes, checkpoint_id, |b| {
        for p in parts {
            b.extend_from_slice(p.as_bytes());
        }
    })
}

/// [`task_id`] with its hashed bytes built in `bytes` (cleared first, so that one buffer
/// serves many ids), the parts written by `parts`.
fn task_id_in(
    bytes: &mut Vec<u8>,
    checkpoint_id: &str,
    parts: impl FnOnce(&mut Vec<u8>),
) -> String {
    bytes.clear();
    if !push_hex(checkpoint_id, bytes) {
        // Foreign ids that are not UUIDs: hash their text instead (LangGraph would fail).
        bytes.extend_from_slice(checkpoint_id.as_bytes());
    }
    parts(bytes);
    format_uuid(xxhash_rust::xxh3::xxh3_128(bytes))
}

/// Appends `n` in decimal, as `n.to_string()` spells it, without allocating.
fn push_decimal(n: i64, out: &mut Vec<u8>) {
    if n < 0 {
        out.push(b'-');
    }
    // The digits, last first.
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut rest = n.unsigned_abs();
    loop {
        if let Some(slot) = digits.get_mut(len) {
            *slot = b'0' + (rest % 10) as u8;
        }
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend(digits.iter().take(len).rev());
}

/// Appends the bytes that the hex digits of `id` spell (dashes ignored: a UUID's text gives
/// its 16 bytes, as LangGraph's `uuid.UUID(id).bytes`); `false`, with `out` as it was, if
/// `id` has anything else or an odd number of digits. Hot: every task id of every step.
fn push_hex(id: &str, out: &mut Vec<u8>) -> bool {
    // A UUID's text (the checkpoint ids LangGraph and stategraph write), parsed by the uuid
    // crate: of 36 characters, only the dashed form parses, to the bytes its digits spell.
    if id.len() == 36
        && let Ok(uuid) = uuid::Uuid::try_parse(id)
    {
        out.extend_from_slice(uuid.as_bytes());
        return true;
    }
    let start = out.len();
    let mut high: Option<u8> = None;
    for &c in id.as_bytes() {
        let nibble = match c {
            b'-' => continue,
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => {
                out.truncate(start);
                return false;
            }
        };
        match high.take() {
            Some(h) => out.push((h << 4) | nibble),
            None => high = Some(nibble),
        }
    }
    if high.is_some() {
        out.truncate(start);
        return false;
    }
    true
}

/// A task's path: `("__pregel_pull", node)` → `~__pregel_pull, node`.
pub(crate) fn task_path_str(path: &[String]) -> String {
    format!("~{}", path.join(", "))
}

/// A task of one super-step.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) name: String,
    /// Its path (a pull task's is its node's, shared with it).
    pub(crate) path: Arc<[String]>,
    /// The channels that triggered it (a pull task's are its node's, shared with it).
    pub(crate) triggers: Arc<[String]>,
    pub(crate) writes: Vec<(String, Value)>,
    /// A `Send`'s argument: the task's whole input instead of the state.
    pub(crate) input: Option<Value>,
}

impl Task {
    pub(crate) fn path_str(&self) -> String {
        task_path_str(&self.path)
    }
}

/// A node as the algorithm sees it: its name and trigger channels.
pub(crate) struct NodeTriggers<'a> {
    pub(crate) name: &'a str,
    pub(crate) triggers: &'a Arc<[String]>,
    /// The path of its pull tasks ([`pull_path`]).
    pub(crate) pull_path: &'a Arc<[String]>,
}

/// The path of node `name`'s pull tasks: `(__pregel_pull, name)`.
pub(crate) fn pull_path(name: &str) -> Arc<[String]> {
    vec![PULL.to_owned(), name.to_owned()].into()
}

/// Whether `version` is newer than what a node has seen (missing: the null version).
fn is_newer(version: Option<&ChannelVersion>, seen: Option<&ChannelVersion>) -> bool {
    let Some(v) = version else {
        return false;
    };
    match seen {
        Some(s) => v > s,
        None => match v {
            ChannelVersion::Str(s) => !s.is_empty(),
            ChannelVersion::Int(i) => *i > 0,
            ChannelVersion::Float(f) => *f > 0.0,
        },
    }
}

/// LangGraph's `prepare_next_tasks` for edge-triggered (PULL) tasks: a node runs if one of
/// its trigger channels is available with a version newer than the node has seen.
/// `candidates` (sorted node names) narrows the nodes considered, as the loop does with the
/// nodes subscribed to the last step's updated channels.
pub(crate) fn prepare_pull_tasks(
    checkpoint: &Checkpoint,
    channels: &impl ChannelRead,
    nodes: &[NodeTriggers<'_>],
    step: i64,
    ns: &str,
    candidates: Option<&BTreeSet<String>>,
) -> Vec<Task> {
    if checkpoint.channel_versions.is_empty() {
        return Vec::new();
    }
    let mut tasks = Vec::new();
    // One buffer for every task id's hashed bytes (a UUID's 16, the parts: rarely more).
    let mut bytes = Vec::with_capacity(128);
    let mut consider = |node: &NodeTriggers<'_>| {
        let seen = checkpoint.versions_seen.get(node.name);
        let fired = node.triggers.iter().any(|ch| {
            channels.is_available(ch)
                && match seen {
                    None => true,
                    Some(seen) => is_newer(checkpoint.channel_versions.get(ch), seen.get(ch)),
                }
        });
        if !fired {
            return;
        }
        // A compiled graph's triggers are sorted already: shared, not copied.
        let triggers: Arc<[String]> = if node.triggers.is_sorted() {
            Arc::clone(node.triggers)
        } else {
            let mut sorted = node.triggers.to_vec();
            sorted.sort();
            sorted.into()
        };
        // The id hashes the task's namespace, the step, the node, PULL and the triggers.
        let id = task_id_in(&mut bytes, &checkpoint.id, |b| {
            if !ns.is_empty() {
                b.extend_from_slice(ns.as_bytes());
                b.push(b'|');
            }
            b.extend_from_slice(node.name.as_bytes());
            push_decimal(step, b);
            b.extend_from_slice(node.name.as_bytes());
            b.extend_from_slice(PULL.as_bytes());
            for t in triggers.iter() {
                b.extend_from_slice(t.as_bytes());
            }
        });
        tasks.push(Task {
            id,
            name: node.name.to_owned(),
            path: Arc::clone(node.pull_path),
            triggers,
            writes: Vec::new(),
            input: None,
        });
    };
    match candidates {
        None => nodes.iter().for_each(&mut consider),
        Some(c) => {
            let mut ordered: Vec<&NodeTriggers<'_>> =
                nodes.iter().filter(|n| c.contains(n.name)).collect();
            ordered.sort_by(|a, b| a.name.cmp(b.name));
            ordered.into_iter().for_each(consider);
        }
    }
    tasks
}

/// `"__pregel_push"`: a task created by a `Send`.
pub(crate) const PUSH: &str = "__pregel_push";

/// LangGraph's PUSH tasks: one per `Send` packet in `__pregel_tasks`, in order, for nodes that
/// exist.
pub(crate) fn prepare_push_tasks(
    checkpoint: &Checkpoint,
    channels: &impl ChannelRead,
    is_node: &dyn Fn(&str) -> bool,
    step: i64,
    ns: &str,
) -> Vec<Task> {
    let Some(Value::List(packets)) = channels.value(reserved::TASKS) else {
        return Vec::new();
    };
    let step_str = step.to_string();
    let mut tasks = Vec::new();
    for (idx, packet) in packets.iter().enumerate() {
        let Some((node, arg)) = crate::node::parse_send(packet) else {
            continue;
        };
        if !is_node(&node) {
            continue;
        }
        let task_ns = if ns.is_empty() {
            node.clone()
        } else {
            format!("{ns}|{node}")
        };
        let idx_str = idx.to_string();
        let id = task_id(
            &checkpoint.id,
            &[&task_ns, &step_str, &node, PUSH, &idx_str],
        );
        tasks.push(Task {
            id,
            name: node,
            path: vec![PUSH.to_owned(), format!("{idx:010}"), format!("{:010}", 0)].into(),
            triggers: vec![PUSH.to_owned()].into(),
            writes: Vec::new(),
            input: Some(arg),
        });
    }
    tasks
}

/// PUSH tasks, then PULL tasks: everything that runs in `step`.
pub(crate) fn prepare_next_tasks(
    checkpoint: &Checkpoint,
    channels: &impl ChannelRead,
    nodes: &[NodeTriggers<'_>],
    step: i64,
    ns: &str,
    candidates: Option<&BTreeSet<String>>,
) -> Vec<Task> {
    let is_node = |name: &str| nodes.iter().any(|n| n.name == name);
    let mut tasks = prepare_push_tasks(checkpoint, channels, &is_node, step, ns);
    tasks.extend(prepare_pull_tasks(
        checkpoint, channels, nodes, step, ns, candidates,
    ));
    tasks
}

/// Channel writes LangGraph never applies to channels (control and bookkeeping writes).
fn is_reserved_write(channel: &str) -> bool {
    matches!(
        channel,
        reserved::NO_WRITES
            | "__pregel_push"
            | reserved::RESUME
            | reserved::INTERRUPT
            | "__return__"
            | reserved::ERROR
            | reserved::ERROR_SOURCE_NODE
    )
}

/// LangGraph's `apply_writes`: marks triggers seen, consumes them, applies every task's writes
/// (tasks sorted by path), moves every changed channel to one new version, clears ephemeral
/// values after a real step. Returns the channels updated (and still available).
pub(crate) fn apply_writes(
    checkpoint: &mut Checkpoint,
    channels: &mut Channels,
    tasks: &[&Task],
    next_version: Option<&NextVersion<'_>>,
    trigger_channels: &BTreeSet<String>,
) -> Result<BTreeSet<String>, GraphError> {
    let mut tasks: Vec<&Task> = tasks.to_vec();
    tasks.sort_by_key(|t| t.path_str());
    let bump_step = tasks.iter().any(|t| !t.triggers.is_empty());
    for task in &tasks {
        let seen = checkpoint.versions_seen.node_mut(&task.name);
        for ch in task.triggers.iter() {
            if let Some(v) = checkpoint.channel_versions.get(ch) {
                seen.insert(ch.as_str(), v.clone());
            }
        }
    }
    let version = next_version.map(|f| f(checkpoint.channel_versions.max_version()));
    let bump = |versions: &mut ChannelVersions, ch: &str| {
        if let Some(v) = &version {
            versions.insert(ch, v.clone());
        }
    };
    let consumed: BTreeSet<&String> = tasks
        .iter()
        .flat_map(|t| t.triggers.iter())
        .filter(|ch| !is_reserved_write(ch))
        .collect();
    for ch in consumed {
        if let Some(c) = channels.get_mut(ch.as_str())
            && c.consume()
        {
            bump(&mut checkpoint.channel_versions, ch);
        }
    }
    let mut by_channel: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for task in &tasks {
        for (ch, v) in &task.writes {
            if is_reserved_write(ch) {
                continue;
            }
            if !channels.contains_key(ch.as_str()) {
                return Err(GraphError::InvalidUpdate {
                    channel: ch.clone(),
                    message: format!(
                        "task `{}` wrote to a channel the graph does not have",
                        task.name
                    ),
                });
            }
            let slot = by_channel.entry(ch.as_str()).or_default();
            if slot.is_empty() {
                order.push(ch.as_str());
            }
            slot.push(v.clone());
        }
    }
    let mut updated = BTreeSet::new();
    for ch in order {
        let values = by_channel.remove(ch).unwrap_or_default();
        if let Some(c) = channels.get_mut(ch)
            && c.update(ch, values)?
        {
            bump(&mut checkpoint.channel_versions, ch);
            if c.is_available() {
                updated.insert(ch.to_owned());
            }
        }
    }
    if bump_step {
        for (ch, c) in channels.iter_mut() {
            if c.is_available() && !updated.contains(&**ch) && c.update(ch, Vec::new())? {
                bump(&mut checkpoint.channel_versions, ch);
                if c.is_available() {
                    updated.insert(ch.to_string());
                }
            }
        }
    }
    // Nothing would run next (no channel that triggers a node moved): the run is about to
    // end, so the channels of deferred nodes release what they hold.
    if bump_step && updated.is_disjoint(trigger_channels) {
        for (ch, c) in channels.iter_mut() {
            if c.finish() {
                bump(&mut checkpoint.channel_versions, ch);
                if c.is_available() {
                    updated.insert(ch.to_string());
                }
            }
        }
    }
    Ok(updated)
}

/// Where a new checkpoint's values come from.
pub(crate) enum ValuesFrom<'a> {
    /// The live channels (a step's checkpoint).
    Channels(&'a Channels),
    /// The base checkpoint's own values (a copy, e.g. a fork).
    Base,
    /// Nowhere: a run without a checkpointer never reads them, so they are not copied.
    Skip,
}

/// LangGraph's `create_checkpoint`: the channels' stored values (only channels that have a
/// version; the delta channels in `snapshot` as `_DeltaSnapshot`s, the others not at all), a
/// new id for `step`, and the sorted updated channels. Turns `base` into the new checkpoint
/// in place: its versions stay where they are instead of being copied.
pub(crate) fn create_checkpoint(
    base: &mut Checkpoint,
    values: ValuesFrom<'_>,
    step: i64,
    updated_channels: Option<&BTreeSet<String>>,
    snapshot: &BTreeSet<String>,
) {
    let channel_values = match values {
        ValuesFrom::Base => std::mem::take(&mut base.channel_values),
        ValuesFrom::Skip => BTreeMap::new(),
        // Most channels of a large graph are empty edge triggers: the cheap emptiness check
        // comes first, the version lookup only for channels that hold something.
        ValuesFrom::Channels(chs) => chs
            .iter()
            .filter_map(|(k, c)| {
                let stored = if c.is_delta() {
                    snapshot
                        .contains(&**k)
                        .then(|| c.get())
                        .flatten()
                        .map(|v| crate::channel::snapshot_of(&v))
                } else {
                    c.checkpoint()
                };
                stored
                    .filter(|_| base.channel_versions.contains_key(k))
                    .map(|v| (k.to_string(), v))
            })
            .collect(),
    };
    base.v = stategraph_checkpoint::LATEST_VERSION;
    base.id = CheckpointId::for_step(step);
    base.ts = now_iso();
    base.channel_values = channel_values;
    base.updated_channels = updated_channels.map(|u| u.iter().cloned().collect());
    base.pending_sends = None;
    base.extra.clear();
}

/// Restores live channels from a checkpoint.
pub(crate) fn channels_from_checkpoint(
    specs: &[(std::sync::Arc<str>, ChannelSpec)],
    checkpoint: &Checkpoint,
) -> Channels {
    let mut channels = Channels::with_capacity(specs.len());
    for (k, spec) in specs {
        channels.insert(
            std::sync::Arc::clone(k),
            spec.create(checkpoint.channel_values.get(&**k).cloned()),
        );
    }
    channels
}

/// `get_new_channel_versions`: the versions that moved since the previous saved checkpoint.
pub(crate) fn new_versions(
    previous: &ChannelVersions,
    current: &ChannelVersions,
) -> ChannelVersions {
    current.newer_than(previous)
}

/// Which nodes each channel triggers.
pub(crate) fn trigger_map(nodes: &[NodeTriggers<'_>]) -> HashMap<String, Vec<String>> {
    let mut m: HashMap<String, Vec<String>> = HashMap::new();
    for n in nodes {
        for t in n.triggers.iter() {
            m.entry(t.clone()).or_default().push(n.name.to_owned());
        }
    }
    m
}

#[cfg(test)]
mod tests;
