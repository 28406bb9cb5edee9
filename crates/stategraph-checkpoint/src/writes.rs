//! Pending writes: what tasks wrote to channels, stored as each task finishes.

use crate::config::CheckpointConfig;
use crate::error::{Error, Location, Result};
use crate::saver::validate_put_writes;
use crate::serializer::Serializer;
use stategraph_value::Value;

/// The task id of writes that belong to no task (input, `update_state`, `Command`, resume).
pub const NULL_TASK_ID: &str = "00000000-0000-0000-0000-000000000000";

/// Reserved channel names that appear in pending writes.
pub mod channels {
    /// A task's error, as its `repr()` string (idx −1).
    pub const ERROR: &str = "__error__";
    /// Reserved by LangGraph (idx −2).
    pub const SCHEDULED: &str = "__scheduled__";
    /// Interrupts raised by a task (idx −3).
    pub const INTERRUPT: &str = "__interrupt__";
    /// Resume values (idx −4).
    pub const RESUME: &str = "__resume__";
    /// Marks a task that finished without output.
    pub const NO_WRITES: &str = "__no_writes__";
    /// The topic channel of pending `Send` packets.
    pub const TASKS: &str = "__pregel_tasks";
    /// Marks a failed task routed to an error handler.
    pub const ERROR_SOURCE_NODE: &str = "__error_source_node__";
    /// The graph's input channel.
    pub const START: &str = "__start__";
    /// The virtual end node.
    pub const END: &str = "__end__";
}

/// LangGraph's `WRITES_IDX_MAP`: the fixed negative index of a special channel's write.
pub fn special_write_idx(channel: &str) -> Option<i64> {
    match channel {
        channels::ERROR => Some(-1),
        channels::SCHEDULED => Some(-2),
        channels::INTERRUPT => Some(-3),
        channels::RESUME => Some(-4),
        _ => None,
    }
}

/// The `idx` a write at `position` in a `put_writes` call is stored under.
pub fn write_idx(channel: &str, position: usize) -> i64 {
    special_write_idx(channel).unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX))
}

/// Whether every write of a `put_writes` call is special, in which case the call replaces
/// earlier rows with the same key instead of leaving them in place.
pub fn all_special(writes: &[(String, Value)]) -> bool {
    writes.iter().all(|(c, _)| special_write_idx(c).is_some())
}

/// One write of a `put_writes` call, serialized and ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedWrite {
    /// Position in the call, or the fixed negative index of a special channel.
    pub idx: i64,
    /// The channel written.
    pub channel: String,
    /// The serializer's type tag.
    pub tag: String,
    /// The serialized value.
    pub bytes: Vec<u8>,
}

/// The rows a `put_writes` call stores, as every serializing saver needs them.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedWrites<'a> {
    /// The checkpoint the writes belong to (`config.checkpoint_id`).
    pub checkpoint_id: &'a str,
    /// Whether the rows replace stored rows with the same `(task, idx)` ([`all_special`])
    /// or leave them in place.
    pub replace: bool,
    /// One row per `idx`, in `idx` order: the last write of the call with that `idx` when
    /// `replace`, the first otherwise — what storing the writes one by one would leave.
    pub rows: Vec<EncodedWrite>,
}

/// Validates a `put_writes` call and serializes its writes with `serializer` (every one, even
/// a duplicate that will not be stored). A value that cannot be serialized is an [`Error::Serialization`] naming the thread, namespace,
/// checkpoint, channel and task, and nothing is returned for storing.
pub fn encode_writes<'a>(
    serializer: &dyn Serializer,
    config: &'a CheckpointConfig,
    writes: &[(String, Value)],
    task_id: &str,
) -> Result<EncodedWrites<'a>> {
    let checkpoint_id = validate_put_writes(config)?;
    let replace = all_special(writes);
    let mut rows = std::collections::BTreeMap::new();
    for (position, (channel, value)) in writes.iter().enumerate() {
        let (tag, bytes) = serializer.dumps_typed(value).map_err(|e| {
            Error::serialization(
                Location::checkpoint(&config.thread_id, &config.checkpoint_ns, checkpoint_id)
                    .part("write")
                    .channel(channel.clone())
                    .task(task_id),
                e,
            )
        })?;
        let idx = write_idx(channel, position);
        if !replace && rows.contains_key(&idx) {
            continue;
        }
        let channel = channel.clone();
        rows.insert(
            idx,
            EncodedWrite {
                idx,
                channel,
                tag,
                bytes,
            },
        );
    }
    Ok(EncodedWrites {
        checkpoint_id,
        replace,
        rows: rows.into_values().collect(),
    })
}

/// One stored write.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingWrite {
    /// The task that wrote it ([`NULL_TASK_ID`] for writes of no task).
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value written.
    pub value: Value,
    /// The writing task's path, e.g. `~__pregel_pull, node_a` (`""` for no task).
    pub task_path: String,
    /// Position in the task's writes, or the fixed negative index of a special channel.
    pub idx: i64,
}

impl PendingWrite {
    /// LangGraph's `writes_sort_key`: `(task_path, task_id, idx)`.
    pub fn sort_key(&self) -> (&str, &str, i64) {
        (&self.task_path, &self.task_id, self.idx)
    }
}

/// A write row as a database returns it, before its value is decoded.
#[derive(Clone, Debug)]
pub struct StoredWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The serializer's type tag (`None`: a NULL column, which is an error).
    pub type_tag: Option<String>,
    /// The serialized value.
    pub value: Vec<u8>,
    /// The writing task's path.
    pub task_path: String,
    /// Its index.
    pub idx: i64,
}

impl StoredWrite {
    /// Decodes the value with `serde`; errors name the thread, checkpoint, channel and task
    /// (`at` is the checkpoint the write is stored against).
    pub fn decode(
        self,
        serde: &dyn crate::serializer::Serializer,
        at: &crate::error::Location,
    ) -> crate::error::Result<PendingWrite> {
        self.decode_in(serde, || at.clone(), None)
    }

    /// [`decode`](Self::decode) as one of many values read together, sharing what `cache`
    /// has already decoded (see [`Serializer::loads_typed_shared`]). `at` gives the
    /// checkpoint's location, and is called only for an error (a listing decodes thousands
    /// of writes).
    ///
    /// [`Serializer::loads_typed_shared`]: crate::Serializer::loads_typed_shared
    pub fn decode_shared(
        self,
        serde: &dyn crate::serializer::Serializer,
        at: impl FnOnce() -> crate::error::Location,
        cache: &mut stategraph_value::DecodeCache,
    ) -> crate::error::Result<PendingWrite> {
        self.decode_in(serde, at, Some(cache))
    }

    fn decode_in(
        self,
        serde: &dyn crate::serializer::Serializer,
        at: impl FnOnce() -> crate::error::Location,
        cache: Option<&mut stategraph_value::DecodeCache>,
    ) -> crate::error::Result<PendingWrite> {
        let failed = |e: crate::serializer::SerdeError| {
            let loc = at()
                .part("write")
                .channel(self.channel.clone())
                .task(self.task_id.clone());
            crate::error::Error::serialization(loc, e)
        };
        let value = match &self.type_tag {
            Some(tag) => crate::serializer::loads_typed_with(serde, tag, &self.value, cache),
            None => Err(crate::serializer::SerdeError::UnknownType("NULL".into())),
        }
        .map_err(failed)?;
        Ok(PendingWrite {
            task_id: self.task_id,
            channel: self.channel,
            value,
            task_path: self.task_path,
            idx: self.idx,
        })
    }
}

/// Sorts writes into LangGraph's order (task path, task id, idx).
pub fn sort_writes(writes: &mut [PendingWrite]) {
    writes.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
}
