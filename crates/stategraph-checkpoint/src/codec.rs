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
//! cp.channel_versions.insert("frame", saver.get_next_version(None));
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let at = saver.put(&CheckpointConfig::new("t"), &cp, &meta, &cp.channel_versions).await?;
//! let back = saver.get_tuple(&at).await?.unwrap().checkpoint;
//! assert_eq!(back.channel_values["frame"], Value::Bytes(vec![0, 159, 146, 150]));
//! # Ok::<(), Error>(()) }).unwrap();
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::layer::{Layered, SaverLayer};
use crate::saver::CheckpointSaver;
use crate::serializer::SerdeError;
use crate::{Checkpoint, CheckpointConfig, CheckpointTuple};
use stategraph_value::{Ext, Value, decode, encode};

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

/// The codecs of a [`CodecSaver`], by channel: a [`SaverLayer`].
#[derive(Clone, Default)]
pub struct Codecs {
    by_channel: BTreeMap<String, Arc<dyn Codec>>,
}

impl fmt::Debug for Codecs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.by_channel.iter().map(|(c, codec)| (c, codec.tag())))
            .finish()
    }
}

/// A saver whose channels with a registered [`Codec`] are stored in the codec's format.
pub type CodecSaver = Layered<Codecs>;

impl Layered<Codecs> {
    /// `inner`, with no codec yet.
    pub fn new(inner: Arc<dyn CheckpointSaver>) -> Self {
        Layered::wrap(inner, Codecs::default())
    }

    /// Stores `channel`'s values with `codec`.
    pub fn with_codec(mut self, channel: impl Into<String>, codec: Arc<dyn Codec>) -> Self {
        Arc::make_mut(&mut self.layer)
            .by_channel
            .insert(channel.into(), codec);
        self
    }
}

fn shape(message: String) -> SerdeError {
    SerdeError::Shape {
        path: String::new(),
        message,
    }
}

impl Codecs {
    /// The stored form of `channel`'s value: unchanged without a codec (and for `None`).
    fn encode_value(&self, channel: &str, value: &Value) -> std::result::Result<Value, SerdeError> {
        let Some(codec) = self.by_channel.get(channel) else {
            return Ok(value.clone());
        };
        if value.is_null() {
            return Ok(Value::Null);
        }
        let bytes = codec.encode(value)?;
        let payload = Value::from(vec![Value::from(codec.tag()), Value::Bytes(bytes)]);
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
            Value::List(parts) if parts.len() == 2 => {
                let mut parts = parts.into_iter();
                match (parts.next(), parts.next()) {
                    (Some(Value::Str(tag)), Some(Value::Bytes(bytes))) => (tag, bytes),
                    _ => return Err(shape("a codec payload is [tag, bytes]".into())),
                }
            }
            _ => return Err(shape("a codec payload is [tag, bytes]".into())),
        };
        let codec = self
            .by_channel
            .values()
            .find(|c| c.tag() == &*tag)
            .ok_or_else(|| {
                shape(format!(
                    "stored with the codec `{tag}`, which is not registered with this saver \
                     (CodecSaver::with_codec)"
                ))
            })?;
        codec.decode(&bytes)
    }
}

impl SaverLayer for Codecs {
    fn store_checkpoint<'a>(
        &self,
        config: &CheckpointConfig,
        checkpoint: &'a Checkpoint,
    ) -> Result<Cow<'a, Checkpoint>> {
        if !checkpoint
            .channel_values
            .keys()
            .any(|c| self.by_channel.contains_key(c))
        {
            return Ok(Cow::Borrowed(checkpoint));
        }
        let mut cp = checkpoint.clone();
        for (channel, value) in cp.channel_values.iter_mut() {
            if self.by_channel.contains_key(channel) {
                *value = self.encode_value(channel, value).map_err(|e| {
                    Error::serialization(
                        Location::checkpoint(
                            &config.thread_id,
                            &config.checkpoint_ns,
                            &checkpoint.id,
                        )
                        .channel(channel.clone()),
                        e,
                    )
                })?;
            }
        }
        Ok(Cow::Owned(cp))
    }

    fn store_writes<'a>(
        &self,
        config: &CheckpointConfig,
        writes: &'a [(String, Value)],
    ) -> Result<Cow<'a, [(String, Value)]>> {
        if !writes.iter().any(|(c, _)| self.by_channel.contains_key(c)) {
            return Ok(Cow::Borrowed(writes));
        }
        let encoded = writes
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
        Ok(Cow::Owned(encoded))
    }

    fn load_tuple(&self, mut t: CheckpointTuple) -> Result<CheckpointTuple> {
        let id = t.checkpoint.id.clone();
        let location = |channel: &str| {
            Location::checkpoint(&t.config.thread_id, &t.config.checkpoint_ns, &id)
                .channel(channel.to_owned())
        };
        let checkpoint = std::sync::Arc::make_mut(&mut t.checkpoint);
        let mut values = std::mem::take(&mut checkpoint.channel_values);
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
        checkpoint.channel_values = values;
        t.pending_writes = writes;
        Ok(t)
    }
}
