//! LangGraph's blob layout (used by its Postgres saver, and by stategraph's Postgres and MySQL
//! savers): primitive channel values stay inline in the checkpoint's JSON, every other value
//! is a blob row keyed by (channel, version), written only when that version is new.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::checkpoint::Checkpoint;
use crate::config::CheckpointConfig;
use crate::error::{Error, Location, Result};
use crate::metadata::CheckpointMetadata;
use crate::serializer::Serializer;
use crate::value::{ExtCode, Value};
use crate::version::ChannelVersions;

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

/// Puts blob values back into a checkpoint read from its JSON: for each (channel, version) of
/// `channel_versions`, `lookup` returns the stored blob (type tag and bytes, if any); `empty`
/// blobs mean "no value". A blob wins over an inline marker.
pub fn restore_blobs(
    serde: &dyn Serializer,
    location: &Location,
    checkpoint: &mut Checkpoint,
    mut lookup: impl FnMut(&str, &str) -> Option<(String, Option<Vec<u8>>)>,
) -> Result<()> {
    let versions: Vec<(String, String)> = checkpoint
        .channel_versions
        .iter()
        .map(|(c, v)| (c.to_owned(), v.to_string()))
        .collect();
    for (channel, version) in versions {
        let Some((tag, data)) = lookup(&channel, &version) else {
            continue;
        };
        if tag == crate::serializer::tags::EMPTY {
            continue;
        }
        let value = serde
            .loads_typed(&tag, data.as_deref().unwrap_or_default())
            .map_err(|e| {
                Error::serialization(location.clone().part("blob").channel(channel.clone()), e)
            })?;
        checkpoint.channel_values.insert(channel, value);
    }
    Ok(())
}
