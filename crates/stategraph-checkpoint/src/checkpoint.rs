//! The checkpoint: a snapshot of every channel after a super-step.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::checkpoint_id::CheckpointId;
use crate::config::CheckpointConfig;
use crate::metadata::CheckpointMetadata;
use crate::serializer::SerdeError;
use crate::version::{ChannelVersion, ChannelVersions};
use crate::version_map::VersionsSeen;
use crate::writes::PendingWrite;
use stategraph_value::id::{now_iso, uuid6};
use stategraph_value::{Map, Value};

/// The checkpoint format version LangGraph writes today.
pub const LATEST_VERSION: i64 = 4;

/// LangGraph's `Checkpoint`: channel values, their versions, and which versions each node has
/// seen. Field names and the stored layout are LangGraph's.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Format version (4 today; stored as given).
    pub v: i64,
    /// The checkpoint id: a time-ordered UUIDv6 (see [`crate::checkpoint_id`]).
    pub id: CheckpointId,
    /// Creation time, ISO-8601.
    pub ts: String,
    /// Channel → value. Empty channels are absent.
    pub channel_values: BTreeMap<String, Value>,
    /// Channel → version, for every channel ever written.
    pub channel_versions: ChannelVersions,
    /// Node → channel → the version that node last consumed.
    pub versions_seen: VersionsSeen,
    /// Channels updated by the step that produced this checkpoint (`None` for update/fork).
    pub updated_channels: Option<Vec<String>>,
    /// Sends pending for the next step, in checkpoints older than v4 (`None` when absent).
    pub pending_sends: Option<Vec<Value>>,
    /// Keys this version does not know, kept so that a rewrite loses nothing.
    pub extra: Vec<(String, Value)>,
}

impl Default for Checkpoint {
    fn default() -> Self {
        Self::empty()
    }
}

impl Checkpoint {
    /// LangGraph's `empty_checkpoint()`: version 4, a fresh id (clock sequence −2), now.
    pub fn empty() -> Self {
        Self {
            v: LATEST_VERSION,
            id: uuid6(Some(-2)).into(),
            ts: now_iso(),
            ..Self::unread()
        }
    }

    /// The checkpoint as the msgpack map LangGraph stores, keys in Python's order:
    /// `v, ts, id, channel_values, channel_versions, versions_seen, updated_channels`.
    pub fn to_value(&self) -> Value {
        self.to_value_with(&self.channel_values)
    }

    /// Like [`Checkpoint::to_value`], with other channel values (savers that store values
    /// apart from the checkpoint pass a subset or none).
    pub fn to_value_with(&self, channel_values: &BTreeMap<String, Value>) -> Value {
        let mut m = Map::with_capacity(8);
        m.insert("v", Value::Int(self.v));
        m.insert("ts", self.ts.as_str());
        m.insert("id", self.id.as_str());
        m.insert(
            "channel_values",
            channel_values
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect::<Map>(),
        );
        m.insert(
            "channel_versions",
            versions_to_value(&self.channel_versions),
        );
        m.insert(
            "versions_seen",
            self.versions_seen
                .iter()
                .map(|(k, v)| (k, versions_to_value(v)))
                .collect::<Map>(),
        );
        if let Some(sends) = &self.pending_sends {
            m.insert("pending_sends", Value::from(sends.clone()));
        }
        m.insert(
            "updated_channels",
            self.updated_channels
                .as_ref()
                .map(|u| Value::List(u.iter().map(|c| Value::from(c.as_str())).collect())),
        );
        for (k, v) in &self.extra {
            m.insert(k.as_str(), v.clone());
        }
        Value::Map(m)
    }

    /// Reads a checkpoint from its stored map. Missing optional keys take LangGraph's
    /// defaults; a key with the wrong shape is an error naming its path.
    pub fn from_value(value: Value) -> Result<Self, SerdeError> {
        let Value::Map(map) = value else {
            return Err(shape("", format!("expected a map, found {}", value.kind())));
        };
        let mut cp = Self::unread();
        let mut has_id = false;
        for (k, v) in map {
            let Value::Str(key) = k else {
                return Err(shape("", format!("non-string key {k}")));
            };
            match &*key {
                "channel_values" => {
                    for (ch, val) in expect_map(v, "channel_values")? {
                        let ch = key_str(ch, "channel_values")?;
                        cp.channel_values.insert(ch, val);
                    }
                }
                "channel_versions" => {
                    cp.channel_versions = versions_from_value(v, "channel_versions", None)?
                }
                "versions_seen" => {
                    for (node, seen) in expect_map(v, "versions_seen")? {
                        let node = key_arc(node, || "versions_seen".to_owned())?;
                        let versions = versions_from_value(seen, "versions_seen", Some(&node))?;
                        cp.versions_seen.insert(node, versions);
                    }
                }
                _ => cp.set_field(&key, v, &mut has_id)?,
            }
        }
        if !has_id {
            return Err(shape("id", "missing checkpoint id".to_owned()));
        }
        Ok(cp)
    }

    /// [`from_value`](Self::from_value) of stored msgpack bytes, read straight into the
    /// checkpoint's maps rather than through a value tree first (what a listing does for
    /// every checkpoint). Values are decoded as [`stategraph_value::decode_shared`] decodes them,
    /// sharing through `cache`; with `strict`, each is checked against it. `None` for bytes
    /// that are not a well-formed checkpoint (or hold a class `strict` refuses): decoding
    /// them in full says what is wrong and where.
    pub(crate) fn from_msgpack(
        bytes: &[u8],
        limits: stategraph_value::DecodeLimits,
        cache: Option<&mut stategraph_value::DecodeCache>,
        strict: Option<&stategraph_value::allowlist::Allowlist>,
    ) -> Option<Self> {
        let mut r = stategraph_value::FieldReader::new(bytes, limits, cache)?;
        // Values as the full decode would nest them: the checkpoint's map at depth 0, its
        // entries at 1, theirs at 2.
        let allowed = |v: &Value| strict.is_none_or(|list| list.check(v).is_ok());
        let mut cp = Self::unread();
        let mut has_id = false;
        for _ in 0..r.map(0)? {
            match r.str()? {
                "channel_values" => {
                    for _ in 0..r.map(1)? {
                        let ch = r.str()?.to_owned();
                        let value = r.value(2).filter(allowed)?;
                        cp.channel_values.insert(ch, value);
                    }
                }
                "channel_versions" => cp.channel_versions = versions_from_msgpack(&mut r, 1)?,
                "versions_seen" => {
                    for _ in 0..r.map(1)? {
                        let Value::Str(node) = r.value(2)? else {
                            return None;
                        };
                        let versions = versions_from_msgpack(&mut r, 2)?;
                        cp.versions_seen.insert(node, versions);
                    }
                }
                key => {
                    let value = r.value(1).filter(allowed)?;
                    cp.set_field(key, value, &mut has_id).ok()?;
                }
            }
        }
        (r.done() && has_id).then_some(cp)
    }

    /// A copy of this checkpoint without its channel values (what a listing with
    /// [`skip_values`](crate::ListOptions::skip_values) returns), the values not copied.
    pub fn without_values(&self) -> Self {
        Checkpoint {
            v: self.v,
            id: self.id.clone(),
            ts: self.ts.clone(),
            channel_values: BTreeMap::new(),
            channel_versions: self.channel_versions.clone(),
            versions_seen: self.versions_seen.clone(),
            updated_channels: self.updated_channels.clone(),
            pending_sends: self.pending_sends.clone(),
            extra: self.extra.clone(),
        }
    }

    /// A checkpoint with nothing read into it yet: what a stored one's missing keys default
    /// to.
    fn unread() -> Self {
        Checkpoint {
            v: 1,
            id: CheckpointId::default(),
            ts: String::new(),
            channel_values: BTreeMap::new(),
            channel_versions: ChannelVersions::new(),
            versions_seen: VersionsSeen::new(),
            updated_channels: None,
            pending_sends: None,
            extra: Vec::new(),
        }
    }

    /// Reads the stored entry `key` other than the channel and version maps into its field
    /// (an unknown one into `extra`); `has_id` is set when it is the id.
    fn set_field(&mut self, key: &str, v: Value, has_id: &mut bool) -> Result<(), SerdeError> {
        match key {
            "v" => {
                self.v = v
                    .as_i64()
                    .ok_or_else(|| shape("v", format!("expected an int, found {}", v.kind())))?;
            }
            "id" => {
                // The decoded text is the id's own: shared, not copied.
                self.id = match v {
                    Value::Str(s) => s.into(),
                    other => expect_str(other, "id")?.into(),
                };
                *has_id = true;
            }
            "ts" => self.ts = expect_str(v, "ts")?,
            "updated_channels" => {
                self.updated_channels = match v {
                    Value::Null => None,
                    Value::List(items) => Some(
                        items
                            .into_iter()
                            .enumerate()
                            .map(|(i, c)| match c {
                                Value::Str(s) => Ok(s.to_string()),
                                other => expect_str(other, &format!("updated_channels[{i}]")),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    other => {
                        return Err(shape(
                            "updated_channels",
                            format!("expected a list or null, found {}", other.kind()),
                        ));
                    }
                };
            }
            "pending_sends" => {
                self.pending_sends = match v {
                    Value::Null => None,
                    Value::List(items) => Some(items.into_vec()),
                    other => {
                        return Err(shape(
                            "pending_sends",
                            format!("expected a list, found {}", other.kind()),
                        ));
                    }
                };
            }
            _ => self.extra.push((key.to_owned(), v)),
        }
        Ok(())
    }
}

/// A versions map read by [`Checkpoint::from_msgpack`], nested at `depth`.
fn versions_from_msgpack(
    r: &mut stategraph_value::FieldReader<'_, '_>,
    depth: usize,
) -> Option<ChannelVersions> {
    let mut out = ChannelVersions::new();
    for _ in 0..r.map(depth)? {
        let Value::Str(channel) = r.value(depth + 1)? else {
            return None;
        };
        let version = ChannelVersion::from_value(&r.value(depth + 1)?)?;
        out.insert(channel, version);
    }
    Some(out)
}

fn shape(path: &str, message: String) -> SerdeError {
    SerdeError::Shape {
        path: path.to_owned(),
        message,
    }
}

fn expect_str(v: Value, path: &str) -> Result<String, SerdeError> {
    match v {
        Value::Str(s) => Ok(s.to_string()),
        other => Err(shape(
            path,
            format!("expected a string, found {}", other.kind()),
        )),
    }
}

fn expect_map(v: Value, path: &str) -> Result<Map, SerdeError> {
    match v {
        Value::Map(m) => Ok(m),
        other => Err(shape(
            path,
            format!("expected a map, found {}", other.kind()),
        )),
    }
}

fn key_str(k: Value, path: &str) -> Result<String, SerdeError> {
    key_arc(k, || path.to_owned()).map(|s| s.to_string())
}

/// A string key as the shared text it was decoded to (no copy); `path` names its place in
/// an error, and is only made for one.
fn key_arc(k: Value, path: impl FnOnce() -> String) -> Result<Arc<str>, SerdeError> {
    match k {
        Value::Str(s) => Ok(s),
        other => Err(shape(&path(), format!("non-string key {other}"))),
    }
}

fn versions_to_value(versions: &ChannelVersions) -> Value {
    Value::Map(versions.iter().map(|(k, v)| (k, v.to_value())).collect())
}

/// The versions map at `path` (`path.node` when `node` is given; the text is only built for
/// an error).
fn versions_from_value(
    v: Value,
    path: &str,
    node: Option<&str>,
) -> Result<ChannelVersions, SerdeError> {
    let at = || match node {
        Some(node) => format!("{path}.{node}"),
        None => path.to_owned(),
    };
    let Value::Map(map) = v else {
        return Err(shape(&at(), format!("expected a map, found {}", v.kind())));
    };
    let mut out = ChannelVersions::new();
    for (k, ver) in map {
        let k = key_arc(k, at)?;
        let version = ChannelVersion::from_value(&ver).ok_or_else(|| {
            shape(
                &format!("{}.{k}", at()),
                format!(
                    "expected a version (int, float or str), found {}",
                    ver.kind()
                ),
            )
        })?;
        out.insert(k, version);
    }
    Ok(out)
}

/// Where, in the msgpack bytes of a stored checkpoint (LangGraph's layout: a map whose
/// `channel_values` entry maps channel names to values), the values of `channels` are: the
/// byte range of each one stored, found by skipping over everything else without decoding
/// it. A walk up a thread's history that only needs a channel's value where one is stored
/// (delta channels) reads a checkpoint this way in a fraction of a full decode. `None` when
/// the bytes are not laid out like that; decoding them in full says why.
///
/// ```
/// use stategraph_checkpoint::{Checkpoint, checkpoint_value_ranges};
/// use stategraph_value::{encode, value};
/// let mut cp = Checkpoint::empty();
/// cp.channel_values.insert("messages".into(), value!(["hi"]));
/// cp.channel_values.insert("other".into(), value!(1));
/// let bytes = encode(&cp.to_value());
/// let found = checkpoint_value_ranges(&bytes, &["messages", "missing"]).unwrap();
/// assert_eq!(found.len(), 1);
/// let (channel, range) = &found[0];
/// assert_eq!(channel, "messages");
/// assert_eq!(stategraph_value::decode(&bytes[range.clone()])?, value!(["hi"]));
/// # Ok::<(), stategraph_value::DecodeError>(())
/// ```
pub fn checkpoint_value_ranges(
    bytes: &[u8],
    channels: &[&str],
) -> Option<Vec<(String, std::ops::Range<usize>)>> {
    let mut p = stategraph_value::Peek::new(bytes);
    let mut found = Vec::new();
    for _ in 0..p.map_len()? {
        let key = p.str()?;
        if key != "channel_values" {
            p.skip()?;
            continue;
        }
        for _ in 0..p.map_len()? {
            let channel = p.str()?;
            let start = p.position();
            p.skip()?;
            if channels.contains(&channel) {
                found.push((channel.to_owned(), start..p.position()));
            }
        }
    }
    Some(found)
}

/// The msgpack bytes of a stored checkpoint (laid out as [`checkpoint_value_ranges`] reads
/// them) with its `channel_values` replaced by an empty map, found by skipping over the values
/// without decoding them: what a listing that leaves values out decodes instead. `None` when
/// the bytes are not laid out like that.
///
/// ```
/// use stategraph_checkpoint::{Checkpoint, checkpoint_without_values};
/// use stategraph_value::{decode, encode, value};
/// let mut cp = Checkpoint::empty();
/// cp.channel_values.insert("messages".into(), value!(["hi"]));
/// let bare = checkpoint_without_values(&encode(&cp.to_value())).unwrap();
/// let read = Checkpoint::from_value(decode(&bare)?).unwrap();
/// assert!(read.channel_values.is_empty());
/// assert_eq!(read.id, cp.id);
/// # Ok::<(), stategraph_value::DecodeError>(())
/// ```
pub fn checkpoint_without_values(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut p = stategraph_value::Peek::new(bytes);
    for _ in 0..p.map_len()? {
        let key = p.str()?;
        let start = p.position();
        p.skip()?;
        if key == "channel_values" {
            let end = p.position();
            let mut out = Vec::with_capacity(bytes.len() - (end - start) + 1);
            out.extend_from_slice(bytes.get(..start)?);
            out.push(0x80); // an empty map
            out.extend_from_slice(bytes.get(end..)?);
            return Some(out);
        }
    }
    Some(bytes.to_vec())
}

/// A checkpoint as a saver returns it: where it is, what it holds, its metadata, its parent,
/// and the writes stored against it.
///
/// The checkpoint and its metadata are shared (`Arc`): a saver that keeps them in memory
/// hands out the stored ones without copying, and every snapshot, listing and run made from
/// the tuple shares them too. Read through them as through references; to change a
/// checkpoint, take your own copy (`Arc::unwrap_or_clone`, `Arc::make_mut`), which is free
/// when nothing else holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointTuple {
    /// The address of this checkpoint (with `checkpoint_id` set).
    pub config: CheckpointConfig,
    /// The checkpoint, channel values fully reassembled.
    pub checkpoint: Arc<Checkpoint>,
    /// Its metadata.
    pub metadata: Arc<CheckpointMetadata>,
    /// The parent checkpoint's address, or `None` for the first checkpoint.
    pub parent_config: Option<CheckpointConfig>,
    /// Writes stored against this checkpoint, in LangGraph's order (task path, task id, idx).
    pub pending_writes: Vec<PendingWrite>,
}

impl CheckpointTuple {
    /// The tuple of a stored checkpoint from its stored parts: its address is
    /// (`thread`, `ns`, `id`), its parent (if any, an empty id counting as none) is in the
    /// same thread and namespace. `pending_writes` are put in LangGraph's order.
    pub fn from_parts(
        thread: impl Into<String>,
        ns: impl Into<String>,
        id: impl Into<CheckpointId>,
        parent: Option<CheckpointId>,
        checkpoint: impl Into<Arc<Checkpoint>>,
        metadata: impl Into<Arc<CheckpointMetadata>>,
        mut pending_writes: Vec<PendingWrite>,
    ) -> Self {
        let config = CheckpointConfig::new(thread).with_ns(ns);
        let parent_config = parent
            .filter(|p| !p.is_empty())
            .map(|p| config.clone().with_checkpoint_id(p));
        crate::writes::sort_writes(&mut pending_writes);
        Self {
            config: config.with_checkpoint_id(id),
            checkpoint: checkpoint.into(),
            metadata: metadata.into(),
            parent_config,
            pending_writes,
        }
    }
}

#[cfg(test)]
mod tests;
