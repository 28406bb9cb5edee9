//! Per-channel custom codecs: LangGraph's "pickle fallback", done deliberately.
//!
//! Some values store badly as msgpack — a large table as a list of row maps, say, where a
//! columnar encoding (Arrow IPC, Parquet, a compressed buffer) is a fraction of the size. A
//! [`Codec`] turns such a channel's value into bytes of its own format, under its own type tag;
//! [`CodecSaver`] wraps any saver and applies the codec registered for a channel to that
//! channel's value in every checkpoint and pending write it stores, and reverses it on read.
//! The graph (and every other reader of the saver) sees the plain value.
//!
//! Stored form: a msgpack ext value of type [`CODEC_EXT`] whose payload is the msgpack array
//! `[tag, bytes]`. It is stored by the inner saver like any other value, so it is encrypted
//! when the saver's serializer encrypts, on every backend. Python LangGraph reads an unknown
//! ext type as `None`: a channel with a codec is for Rust readers only (a Python run that
//! rewrites such a checkpoint would store `None` for it).
//!
//! Errors name the channel: a value its codec cannot encode, stored bytes it cannot decode, or
//! stored data whose codec tag is not registered with this saver.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph_checkpoint::codec::{CodecSaver, RawBytesCodec};
//! use stategraph_checkpoint::*;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let saver = CodecSaver::new(Arc::new(InMemorySaver::new()))
//!     .with_codec("frame", Arc::new(RawBytesCodec));
//! let mut cp = Checkpoint::empty();
//! cp.channel_values.insert("frame".into(), Value::Bytes(vec![0, 159, 146, 150]));
//! cp.channel_versions.insert("frame".into(), saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t"), &cp, &meta, &cp.channel_versions).await?;
//! let back = saver.get_tuple(&at).await?.unwrap().checkpoint;
//! assert_eq!(back.channel_values["frame"], Value::Bytes(vec![0, 159, 146, 150]));
//! # Ok::<(), Error>(()) }).unwrap();
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Error, Location, Result};
use crate::saver::{Capabilities, CheckpointSaver, ListOptions};
use crate::serializer::SerdeError;
use crate::value::{Ext, Value, decode, encode};
use crate::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointTuple, PruneStrategy,
};

/// The msgpack ext type of a codec-encoded value (payload `[tag, bytes]`). LangGraph's own
/// ext types are 0–7.
pub const CODEC_EXT: i8 = 100;

/// Encodes one channel's values in a format of its own.
pub trait Codec: Send + Sync + fmt::Debug {
    /// The codec's type tag, stored with every value it encodes (`"arrow"`, `"raw"`, …).
    fn tag(&self) -> &str;
    /// Encodes a value; an error says what the codec needs instead.
    fn encode(&self, value: &Value) -> std::result::Result<Vec<u8>, SerdeError>;
    /// Decodes bytes this codec encoded.
    fn decode(&self, data: &[u8]) -> std::result::Result<Value, SerdeError>;
}

/// Stores a bytes value as its raw bytes (tag `raw`), e.g. an Arrow IPC stream or an image,
/// without msgpack framing around each chunk. Any other value is an error.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawBytesCodec;

impl Codec for RawBytesCodec {
    fn tag(&self) -> &str {
        "raw"
    }

    fn encode(&self, value: &Value) -> std::result::Result<Vec<u8>, SerdeError> {
        match value {
            Value::Bytes(b) => Ok(b.clone()),
            other => Err(SerdeError::Shape {
                path: String::new(),
                message: format!(
                    "the `raw` codec stores bytes, not {}",
                    other.to_string().chars().take(60).collect::<String>()
                ),
            }),
        }
    }

    fn decode(&self, data: &[u8]) -> std::result::Result<Value, SerdeError> {
        Ok(Value::Bytes(data.to_vec()))
    }
}

/// Wraps a saver so that channels with a registered [`Codec`] are stored in its format.
#[derive(Clone)]
pub struct CodecSaver {
    inner: Arc<dyn CheckpointSaver>,
    by_channel: BTreeMap<String, Arc<dyn Codec>>,
}

impl fmt::Debug for CodecSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodecSaver")
            .field("inner", &self.inner.name())
            .field(
                "codecs",
                &self
                    .by_channel
                    .iter()
                    .map(|(c, codec)| (c.as_str(), codec.tag().to_owned()))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn shape(message: String) -> SerdeError {
    SerdeError::Shape {
        path: String::new(),
        message,
    }
}

impl CodecSaver {
    /// `inner`, with no codec yet.
    pub fn new(inner: Arc<dyn CheckpointSaver>) -> Self {
        Self {
            inner,
            by_channel: BTreeMap::new(),
        }
    }

    /// Stores `channel`'s values with `codec`.
    pub fn with_codec(mut self, channel: impl Into<String>, codec: Arc<dyn Codec>) -> Self {
        self.by_channel.insert(channel.into(), codec);
        self
    }

    /// The stored form of `channel`'s value: unchanged without a codec (and for `None`).
    fn encode_value(&self, channel: &str, value: &Value) -> std::result::Result<Value, SerdeError> {
        let Some(codec) = self.by_channel.get(channel) else {
            return Ok(value.clone());
        };
        if value.is_null() {
            return Ok(Value::Null);
        }
        let bytes = codec.encode(value)?;
        let payload = Value::List(vec![Value::from(codec.tag()), Value::Bytes(bytes)]);
        Ok(Value::Ext(Ext::from_raw(CODEC_EXT, encode(&payload))))
    }

    /// The plain value of a stored one: codec-encoded values are decoded with the registered
    /// codec of their tag, anything else is returned as it is.
    fn decode_value(&self, value: Value) -> std::result::Result<Value, SerdeError> {
        let Value::Ext(ext) = &value else {
            return Ok(value);
        };
        if ext.code() != CODEC_EXT {
            return Ok(value);
        }
        let payload = decode(ext.data()).map_err(|e| shape(format!("codec payload: {e}")))?;
        let (tag, bytes) = match payload {
            Value::List(mut parts) if parts.len() == 2 => {
                match (parts.remove(0), parts.remove(0)) {
                    (Value::Str(tag), Value::Bytes(bytes)) => (tag, bytes),
                    _ => return Err(shape("a codec payload is [tag, bytes]".into())),
                }
            }
            _ => return Err(shape("a codec payload is [tag, bytes]".into())),
        };
        let codec = self
            .by_channel
            .values()
            .find(|c| c.tag() == tag)
            .ok_or_else(|| {
                shape(format!(
                    "stored with the codec `{tag}`, which is not registered with this saver \
                     (CodecSaver::with_codec)"
                ))
            })?;
        codec.decode(&bytes)
    }

    fn encode_checkpoint(&self, config: &CheckpointConfig, cp: &Checkpoint) -> Result<Checkpoint> {
        let mut cp = cp.clone();
        for (channel, value) in cp.channel_values.iter_mut() {
            if self.by_channel.contains_key(channel) {
                *value = self.encode_value(channel, value).map_err(|e| {
                    Error::serialization(
                        Location::checkpoint(&config.thread_id, &config.checkpoint_ns, &cp.id)
                            .channel(channel.clone()),
                        e,
                    )
                })?;
            }
        }
        Ok(cp)
    }

    fn decode_tuple(&self, mut t: CheckpointTuple) -> Result<CheckpointTuple> {
        let location = |channel: &str| {
            Location::checkpoint(
                &t.config.thread_id,
                &t.config.checkpoint_ns,
                &t.checkpoint.id,
            )
            .channel(channel.to_owned())
        };
        let mut values = std::mem::take(&mut t.checkpoint.channel_values);
        for (channel, value) in values.iter_mut() {
            *value = self
                .decode_value(std::mem::take(value))
                .map_err(|e| Error::serialization(location(channel), e))?;
        }
        let mut writes = std::mem::take(&mut t.pending_writes);
        for w in writes.iter_mut() {
            w.value = self
                .decode_value(std::mem::take(&mut w.value))
                .map_err(|e| Error::serialization(location(&w.channel).part("write"), e))?;
        }
        t.checkpoint.channel_values = values;
        t.pending_writes = writes;
        Ok(t)
    }
}

#[async_trait]
impl CheckpointSaver for CodecSaver {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        match self.inner.get_tuple(config).await? {
            Some(t) => Ok(Some(self.decode_tuple(t)?)),
            None => Ok(None),
        }
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.inner
            .list(options)
            .await?
            .into_iter()
            .map(|t| self.decode_tuple(t))
            .collect()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let cp = self.encode_checkpoint(config, checkpoint)?;
        self.inner.put(config, &cp, metadata, new_versions).await
    }

    async fn put_if_latest(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<&str>,
    ) -> Result<CheckpointConfig> {
        let cp = self.encode_checkpoint(config, checkpoint)?;
        self.inner
            .put_if_latest(config, &cp, metadata, new_versions, expected_latest)
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let writes = writes
            .iter()
            .map(|(channel, value)| {
                let stored = self.encode_value(channel, value).map_err(|e| {
                    Error::serialization(
                        Location::checkpoint(
                            &config.thread_id,
                            &config.checkpoint_ns,
                            config.checkpoint_id.as_deref().unwrap_or_default(),
                        )
                        .part("write")
                        .channel(channel.clone()),
                        e,
                    )
                })?;
                Ok((channel.clone(), stored))
            })
            .collect::<Result<Vec<_>>>()?;
        self.inner
            .put_writes(config, &writes, task_id, task_path)
            .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.inner.delete_thread(thread_id).await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.inner.delete_for_runs(run_ids).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.inner.copy_thread(source, target).await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.inner.prune(thread_ids, strategy).await
    }

    fn get_next_version(&self, current: Option<&ChannelVersion>) -> ChannelVersion {
        self.inner.get_next_version(current)
    }
}
