//! The errors of the values layer.

use crate::DecodeError;

/// A boxed error from outside the values layer (a driver's, an embedder's), kept as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The type tags LangGraph writes next to serialized bytes.
pub mod tags {
    /// msgpack bytes (the default for every value except the ones below).
    pub const MSGPACK: &str = "msgpack";
    /// Python `None`; the bytes are empty.
    pub const NULL: &str = "null";
    /// Python `bytes`, stored raw.
    pub const BYTES: &str = "bytes";
    /// Python `bytearray`, stored raw.
    pub const BYTEARRAY: &str = "bytearray";
    /// The legacy pre-msgpack JSON format (read only).
    pub const JSON: &str = "json";
    /// Python pickle (LangGraph's opt-in fallback; cannot be read outside Python).
    pub const PICKLE: &str = "pickle";
    /// Marks "this channel had no value" in blob tables.
    pub const EMPTY: &str = "empty";
}

/// A serialization failure, before any location (thread, checkpoint, channel) is attached.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SerdeError {
    /// The bytes are not valid for their type tag.
    #[error("invalid `{tag}` data: {source}")]
    Decode {
        /// The type tag the bytes were stored under.
        tag: String,
        /// The decoder's error, with byte offset and path.
        #[source]
        source: DecodeError,
    },
    /// The type tag is not one this serializer knows.
    #[error("unknown serialization type `{0}`")]
    UnknownType(String),
    /// The type tag is known but cannot be decoded here.
    #[error("`{tag}` data cannot be decoded: {reason}")]
    Unsupported {
        /// The type tag.
        tag: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// Strict decoding met a Python class that is not allowed.
    #[error("`{class}` at `{path}` is not in the allowlist")]
    Disallowed {
        /// Where inside the value.
        path: String,
        /// `module.Class`.
        class: String,
    },
    /// Encryption or decryption failed: no key, wrong key, altered data.
    #[error("encryption: {message}")]
    Cipher {
        /// What went wrong.
        message: String,
    },
    /// Structurally valid bytes whose content does not have the expected shape.
    #[error("invalid value at `{path}`: {message}")]
    Shape {
        /// Where inside the value, e.g. `channel_versions.foo`.
        path: String,
        /// What was expected.
        message: String,
    },
}

impl SerdeError {
    /// The path inside the value where decoding failed, if known.
    pub fn path(&self) -> Option<&str> {
        match self {
            SerdeError::Decode { source, .. } => Some(&source.path),
            SerdeError::Shape { path, .. } | SerdeError::Disallowed { path, .. } => Some(path),
            _ => None,
        }
    }
}
