//! LangGraph's blob layout (used by its Postgres saver, and by stategraph's Postgres and MySQL
//! savers): primitive channel values stay inline in the checkpoint's JSON, every other value
//! is a blob row keyed by (channel, version), written only when that version is new.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::checkpoint::Checkpoint;
use crate::checkpoint_id::CheckpointId;
use crate::config::CheckpointConfig;
use crate::error::{Error, Location, Result};
use crate::metadata::CheckpointMetadata;
use crate::saver::{Expect, SaveOp, validate_put};
use crate::serializer::Serializer;
use crate::version::ChannelVersions;
use crate::writes::{EncodedWrite, encode_writes};
use stategraph_value::{ExtCode, Value};

/// One blob row to write: channel, version (as text), type tag, bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct BlobRow {
    /// The channel.
    pub channel: String,
    /// Its version, as text (`jsonb_each_text` joins on this).
    pub version: String,
    /// The serializer's type tag.
    pub type_tag: String,
    /// The serialized value.
    pub data: Vec<u8>,
}

/// A checkpoint split for storage.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitCheckpoint {
    /// The checkpoint as JSON, with only the inline channel values.
    pub checkpoint: Json,
    /// Blob rows for the changed, non-inline channels.
    pub blobs: Vec<BlobRow>,
}

/// Whether LangGraph keeps a value inline in the checkpoint JSON. Python inlines None, str,
/// int, float and bool; values JSON columns cannot hold (NaN and infinite floats, strings with
/// NUL) go to blobs instead of failing as they would in Python.
pub fn inline_json(v: &Value) -> Option<Json> {
    match v {
        Value::Null => Some(Json::Null),
        Value::Bool(b) => Some(Json::Bool(*b)),
        Value::Int(i) => Some(Json::from(*i)),
        Value::UInt(u) => Some(Json::from(*u)),
        Value::Float(f) if f.is_finite() => serde_json::Number::from_f64(*f).map(Json::Number),
        Value::Str(s) if !s.contains('\0') => Some(Json::String(s.to_string())),
        _ => None,
    }
}

/// Splits a checkpoint into its JSON (inline values only; a `_DeltaSnapshot` leaves an inline
/// `true` marker) and the blob rows of channels in `new_versions` that are not inline. When
/// the serializer asks for it ([`Serializer::inline_primitives`] is `false`), nothing is
/// inline.
pub fn split_checkpoint(
    serde: &dyn Serializer,
    config: &CheckpointConfig,
    cp: &Checkpoint,
    new_versions: &ChannelVersions,
) -> Result<SplitCheckpoint> {
    let mut inline = serde_json::Map::new();
    let mut blobs = Vec::new();
    let may_inline = serde.inline_primitives();
    for (channel, value) in &cp.channel_values {
        let snapshot =
            matches!(value, Value::Ext(e) if e.ext_code() == Some(ExtCode::DeltaSnapshot));
        let as_blob = if snapshot {
            inline.insert(channel.clone(), Json::Bool(true));
            true
        } else if let Some(j) = inline_json(value).filter(|_| may_inline) {
            inline.insert(channel.clone(), j);
            false
        } else {
            true
        };
        if let (true, Some(version)) = (as_blob, new_versions.get(channel)) {
            let (type_tag, data) = serde.dumps_typed(value).map_err(|e| {
                Error::serialization(
                    Location::checkpoint(&config.thread_id, &config.checkpoint_ns, &cp.id)
                        .part("blob")
                        .channel(channel.clone()),
                    e,
                )
            })?;
            blobs.push(BlobRow {
                channel: channel.clone(),
                version: version.to_string(),
                type_tag,
                data,
            });
        }
    }
    let mut json = cp.to_value_with(&BTreeMap::new()).to_json();
    if let Json::Object(o) = &mut json {
        o.insert("channel_values".into(), Json::Object(inline));
    }
    Ok(SplitCheckpoint {
        checkpoint: json,
        blobs,
    })
}

/// Metadata as LangGraph stores it in JSON columns (without the legacy `writes` key).
pub fn metadata_json(metadata: &CheckpointMetadata) -> Json {
    let mut j = metadata.to_json();
    if let Json::Object(o) = &mut j {
        o.remove("writes");
    }
    j
}

/// Puts one stored blob of `channel` (type tag and bytes, if any) back into `checkpoint`'s
/// values; an `empty` blob means "no value" and leaves them as they are.
pub fn restore_blob(
    serde: &dyn Serializer,
    location: &Location,
    checkpoint: &mut Checkpoint,
    channel: String,
    tag: &str,
    data: Option<&[u8]>,
) -> Result<()> {
    if let Some(value) = decode_blob(serde, location, &channel, tag, data, None)? {
        checkpoint.channel_values.insert(channel, value);
    }
    Ok(())
}

/// The value one stored blob of `channel` holds (`None` for the `empty` marker: no value),
/// sharing with `cache`, if any, what a read decoded before; an error is located at the
/// blob's channel.
pub(crate) fn decode_blob(
    serde: &dyn Serializer,
    location: &Location,
    channel: &str,
    tag: &str,
    data: Option<&[u8]>,
    cache: Option<&mut stategraph_value::DecodeCache>,
) -> Result<Option<Value>> {
    if tag == crate::serializer::tags::EMPTY {
        return Ok(None);
    }
    crate::serializer::loads_typed_with(serde, tag, data.unwrap_or_default(), cache)
        .map(Some)
        .map_err(|e| Error::serialization(location.clone().part("blob").channel(channel), e))
}

/// A checkpoint put, serialized for a blob-layout saver (validated, values split into the
/// checkpoint JSON and blob rows).
#[derive(Clone, Debug)]
pub struct EncodedPut {
    /// The thread.
    pub thread: String,
    /// The namespace.
    pub ns: String,
    /// The checkpoint's id.
    pub id: CheckpointId,
    /// Its parent's id.
    pub parent: Option<CheckpointId>,
    /// The checkpoint as stored JSON (inline values only).
    pub checkpoint: Json,
    /// The metadata as stored JSON.
    pub metadata: Json,
    /// The blob rows of the values that changed.
    pub blobs: Vec<BlobRow>,
    /// What the namespace's newest checkpoint must be for the put to happen.
    pub expect: Expect<CheckpointId>,
    /// Where it goes (for errors).
    pub config: CheckpointConfig,
}

/// A `put_writes` call, serialized.
#[derive(Clone, Debug)]
pub struct EncodedWriteCall {
    /// The thread.
    pub thread: String,
    /// The namespace.
    pub ns: String,
    /// The checkpoint the writes belong to.
    pub checkpoint_id: CheckpointId,
    /// The writing task.
    pub task_id: String,
    /// Its path.
    pub task_path: String,
    /// Whether the rows replace stored ones with the same key (all writes special).
    pub replace: bool,
    /// The rows.
    pub rows: Vec<EncodedWrite>,
}

/// One save of a batch ([`SaveOp`]), serialized: what a blob-layout saver writes.
#[derive(Clone, Debug)]
pub enum EncodedSave {
    /// A checkpoint.
    Put(Box<EncodedPut>),
    /// Writes.
    Writes(EncodedWriteCall),
}

impl EncodedSave {
    /// The thread and namespace the save goes to.
    pub fn thread_ns(&self) -> (&str, &str) {
        match self {
            EncodedSave::Put(p) => (&p.thread, &p.ns),
            EncodedSave::Writes(w) => (&w.thread, &w.ns),
        }
    }

    /// Serializes a put (validating it first).
    pub fn put(
        serde: &dyn Serializer,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<Self> {
        validate_put(config, checkpoint)?;
        let split = split_checkpoint(serde, config, checkpoint, new_versions)?;
        Ok(EncodedSave::Put(Box::new(EncodedPut {
            thread: config.thread_id.clone(),
            ns: config.checkpoint_ns.clone(),
            id: checkpoint.id.clone(),
            parent: config.checkpoint_id.clone(),
            checkpoint: split.checkpoint,
            metadata: metadata_json(metadata),
            blobs: split.blobs,
            expect: expect.to_owned(),
            config: config.clone(),
        })))
    }

    /// Serializes a `put_writes` call (validating it first).
    pub fn writes(
        serde: &dyn Serializer,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<Self> {
        let encoded = encode_writes(serde, config, writes, task_id)?;
        Ok(EncodedSave::Writes(EncodedWriteCall {
            thread: config.thread_id.clone(),
            ns: config.checkpoint_ns.clone(),
            checkpoint_id: encoded.checkpoint_id.into(),
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
            replace: encoded.replace,
            rows: encoded.rows,
        }))
    }

    /// Serializes a batch op.
    pub fn op(serde: &dyn Serializer, op: &SaveOp) -> Result<Self> {
        match op {
            SaveOp::Put {
                config,
                checkpoint,
                metadata,
                new_versions,
                expected_latest,
            } => Self::put(
                serde,
                config,
                checkpoint,
                metadata,
                new_versions,
                Expect::Latest(expected_latest.as_deref()),
            ),
            SaveOp::Writes {
                config,
                writes,
                task_id,
                task_path,
            } => Self::writes(serde, config, writes, task_id, task_path),
        }
    }

    /// Serializes `ops` up to the first that cannot be (its error is returned beside them):
    /// a batch stores the ops before a bad one and reports it, as storing them one by one
    /// would.
    pub fn batch(serde: &dyn Serializer, ops: &[SaveOp]) -> (Vec<Self>, Option<Error>) {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            match Self::op(serde, op) {
                Ok(e) => out.push(e),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    /// Whether `ops` can be stored as one set of multi-row statements in one transaction:
    /// one thread and namespace; every conditional put after the first expects the one
    /// before it (so checking the first against the database checks them all); no
    /// unconditional put after a conditional one; no two `put_writes` rows with the same key
    /// (one `INSERT` cannot touch a row twice). A batch from one run always qualifies;
    /// anything else is written op by op.
    pub fn combinable(ops: &[Self]) -> bool {
        let mut at: Option<(&str, &str)> = None;
        let mut last_put: Option<&str> = None;
        let mut conditional = false;
        let mut keys: std::collections::BTreeSet<(&str, &str, i64)> = Default::default();
        for op in ops {
            let here = op.thread_ns();
            if *at.get_or_insert(here) != here {
                return false;
            }
            match op {
                EncodedSave::Put(p) => {
                    match (p.expect.latest(), last_put) {
                        (Some(expected), Some(prev)) if expected != Some(prev) => {
                            return false;
                        }
                        (None, Some(_)) if conditional => return false,
                        _ => {}
                    }
                    conditional |= p.expect.latest().is_some();
                    last_put = Some(p.id.as_str());
                }
                EncodedSave::Writes(w) => {
                    for r in &w.rows {
                        if !keys.insert((w.checkpoint_id.as_str(), w.task_id.as_str(), r.idx)) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// The first conditional put of `ops`: the one a combined batch checks.
    pub fn first_check(ops: &[Self]) -> Option<&EncodedPut> {
        ops.iter().find_map(|op| match op {
            EncodedSave::Put(p) if p.expect.latest().is_some() => Some(&**p),
            _ => None,
        })
    }
}

/// How storing a batch in one transaction failed.
#[derive(Debug)]
pub enum WriteFailure {
    /// Nothing was stored (the transaction was rolled back): the error of the failing op (a
    /// conflict, or a database error).
    RolledBack(Error),
    /// The commit itself failed or its answer was lost: the outcome is unknown, so the ops
    /// must not be retried.
    Unknown(Error),
    /// Nothing reached the server (the connection was closed first): safe to send again.
    NotSent(Error),
}

impl WriteFailure {
    /// The error, whatever the outcome.
    pub fn into_error(self) -> Error {
        match self {
            WriteFailure::RolledBack(e) | WriteFailure::Unknown(e) | WriteFailure::NotSent(e) => e,
        }
    }
}

/// A blob-layout saver's one write primitive: a [combinable](EncodedSave::combinable) batch
/// in one transaction. [`put_checked`], [`put_writes`] and [`apply_batch`] build every save
/// of the [`CheckpointSaver`](crate::CheckpointSaver) contract on it.
#[allow(async_fn_in_trait)] // implemented per backend on concrete types; Send is known there
pub trait LayoutWriter: Sync {
    /// The serializer values are stored with.
    fn serializer(&self) -> &dyn Serializer;

    /// Stores `ops` in one transaction (a single op is always combinable).
    async fn transact(&self, ops: &[EncodedSave]) -> std::result::Result<(), WriteFailure>;
}

/// Stores `ops` one transaction each, in order, stopping at the first that fails (the ops
/// before it stay stored): what applying them one by one means.
pub async fn store_each<W: LayoutWriter + ?Sized>(writer: &W, ops: &[EncodedSave]) -> Result<()> {
    for op in ops {
        writer
            .transact(std::slice::from_ref(op))
            .await
            .map_err(WriteFailure::into_error)?;
    }
    Ok(())
}

/// [`CheckpointSaver::put_checked`](crate::CheckpointSaver::put_checked) on a blob-layout
/// writer: the checkpoint and its changed blobs in one transaction.
pub async fn put_checked<W: LayoutWriter + ?Sized>(
    writer: &W,
    config: &CheckpointConfig,
    checkpoint: &Checkpoint,
    metadata: &CheckpointMetadata,
    new_versions: &ChannelVersions,
    expect: Expect<&str>,
) -> Result<CheckpointConfig> {
    let op = EncodedSave::put(
        writer.serializer(),
        config,
        checkpoint,
        metadata,
        new_versions,
        expect,
    )?;
    store_each(writer, std::slice::from_ref(&op)).await?;
    Ok(config.clone().with_checkpoint_id(checkpoint.id.clone()))
}

/// [`CheckpointSaver::put_writes`](crate::CheckpointSaver::put_writes) on a blob-layout
/// writer.
pub async fn put_writes<W: LayoutWriter + ?Sized>(
    writer: &W,
    config: &CheckpointConfig,
    writes: &[(String, Value)],
    task_id: &str,
    task_path: &str,
) -> Result<()> {
    let op = EncodedSave::writes(writer.serializer(), config, writes, task_id, task_path)?;
    store_each(writer, std::slice::from_ref(&op)).await
}

/// [`CheckpointSaver::apply_batch`](crate::CheckpointSaver::apply_batch) on a blob-layout
/// writer — group commit: a combinable batch in one transaction (one lock, one check, one
/// log flush). If it fails, nothing of it is stored and the ops are applied one by one, so
/// the ops before the failing one are stored and its error is the one returned, exactly as
/// without batching; a failed commit is returned as it is (its outcome is unknown). A value
/// that does not serialize fails its op the same way, before anything is sent.
pub async fn apply_batch<W: LayoutWriter + ?Sized>(writer: &W, ops: &[SaveOp]) -> Result<()> {
    let (encoded, unencodable) = EncodedSave::batch(writer.serializer(), ops);
    if encoded.len() > 1 && EncodedSave::combinable(&encoded) {
        match writer.transact(&encoded).await {
            Ok(()) => return unencodable.map_or(Ok(()), Err),
            Err(WriteFailure::Unknown(e)) => return Err(e),
            Err(WriteFailure::RolledBack(_) | WriteFailure::NotSent(_)) => {}
        }
    }
    store_each(writer, &encoded).await?;
    unencodable.map_or(Ok(()), Err)
}
