//! The values of stategraph: the msgpack data model LangGraph's `JsonPlusSerializer` writes,
//! and everything that works on values alone.
//!
//! [`Value`] mirrors that model, so that any value written by Python LangGraph can be decoded,
//! inspected, and encoded again to the very same bytes: maps keep their key order and may have
//! non-string keys, integers keep the full `i64`/`u64` range, and msgpack *ext* values (Python
//! objects such as LangChain messages, datetimes or pydantic models) are kept as [`Ext`] —
//! their payload bytes untouched. Around it:
//! - [`decode`] / [`encode`] (and [`decode_shared`] with a [`DecodeCache`], for listings that
//!   meet the same strings and lists again), with errors that name the byte offset and path;
//! - [`to_value`] / [`from_value`]: any `serde` type to and from a [`Value`];
//! - [`py`]: Rust types stored as Python's (`datetime`, `Decimal`, `set`, enums) and
//!   [`allowlist`]: which Python classes a strict read lets through;
//! - [`cipher`]: the AES-EAX cipher LangGraph's encrypted serializer uses;
//! - [`id`]: the UUIDs and timestamps Python LangGraph writes.
//!
//! ```
//! use stategraph_value::{Value, decode, encode, from_value, to_value, value};
//!
//! let v = value!({"messages": [{"role": "user", "content": "hi"}], "count": 2});
//! let bytes = encode(&v);
//! assert_eq!(decode(&bytes)?, v);
//!
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Point { x: i64, y: i64 }
//! let p: Value = to_value(&Point { x: 1, y: 2 })?;
//! assert_eq!(p, value!({"x": 1, "y": 2}));
//! assert_eq!(from_value::<Point>(&p)?, Point { x: 1, y: 2 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The features and their `##` comments in the manifest, listed.
#![doc = "\n# Feature flags\n"]
#![doc = document_features::document_features!()]

pub mod allowlist;
pub mod cipher;
mod error;
pub mod id;
pub mod py;

mod convert;
mod decode;
mod encode;
mod ext;
mod from_value;
mod json;
mod list;
mod peek;
mod serde_impl;
mod shared;
mod to_value;

pub use convert::{from_value, to_value};
pub use decode::FieldReader;
pub use decode::{
    DecodeError, DecodeErrorKind, DecodeLimits, decode, decode_shared, decode_with_limits,
};
pub use encode::{encode, encode_into};
pub use error::{BoxError, SerdeError, tags};
pub use ext::{Ext, ExtCode, PyObject};
pub use id::{format_uuid, iso_from_unix_micros, now_iso, uuid4, uuid6};
pub use list::List;
pub use peek::Peek;
pub use shared::DecodeCache;

#[doc(hidden)]
pub use serde_json as __serde_json;

use std::fmt;
use std::sync::Arc;

/// A msgpack-model value: what a channel holds, what a pending write carries.
///
/// Integers that fit in `i64` are always [`Value::Int`]; [`Value::UInt`] only holds values above
/// `i64::MAX`. Floats are always 64-bit (Python writes no other).
///
/// Cloning is cheap at every size: strings, lists, maps and ext payloads are shared (reference
/// counted) and copied only when a shared one is changed, so a channel value can be handed to a
/// node, a checkpoint and a background save at once without copying the history it holds.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// msgpack nil, Python `None`.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string (shared: a clone is a reference count).
    Str(Arc<str>),
    /// Raw bytes (msgpack bin; Python `bytes`).
    Bytes(Vec<u8>),
    /// An array (Python `list` or `tuple`), shared copy-on-write.
    List(List),
    /// A map with its keys in stored order.
    Map(Map),
    /// A msgpack extension value: a Python object LangGraph knows how to rebuild.
    Ext(Ext),
}

impl Value {
    /// The map inside, if this is a map.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer inside, if this is an integer that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The list inside, if this is a list.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// A string value.
    pub fn str(s: impl Into<Arc<str>>) -> Self {
        Value::Str(s.into())
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A short name of the variant, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Ext(_) => "ext",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s.into())
    }
}
impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}
impl From<u64> for Value {
    fn from(u: u64) -> Self {
        match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u),
        }
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<Vec<Value>> for Value {
    fn from(l: Vec<Value>) -> Self {
        Value::List(l.into())
    }
}
impl From<List> for Value {
    fn from(l: List) -> Self {
        Value::List(l)
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Map(m)
    }
}
impl From<Ext> for Value {
    fn from(e: Ext) -> Self {
        Value::Ext(e)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(o: Option<T>) -> Self {
        o.map_or(Value::Null, Into::into)
    }
}

/// An insertion-ordered map of values. Keys are usually strings, but msgpack (and Python's
/// `OPT_NON_STR_KEYS`) allow any value as a key, so any value is accepted.
///
/// The entries are shared copy-on-write: cloning a map (a state read by a node, a checkpoint
/// handed to a background save) is a reference count, and only a clone that is then changed
/// copies its entries — Python's sharing of dicts, without its aliasing.
#[derive(Clone, Debug, Default)]
pub struct Map {
    entries: Arc<Vec<(Value, Value)>>,
}

impl PartialEq for Map {
    /// Shared entries are equal without being compared.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.entries, &other.entries) || self.entries == other.entries
    }
}

impl Map {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            entries: Arc::new(Vec::with_capacity(n)),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under the string key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The value under any key.
    pub fn get_value(&self, key: &Value) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key` to `value`, keeping the key's position if it already exists.
    pub fn insert(&mut self, key: impl Into<Value>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        let entries = Arc::make_mut(&mut self.entries);
        match entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => entries.push((key, value)),
        }
    }

    /// Appends an entry without checking for a duplicate key (used by the decoder, which keeps
    /// whatever the bytes hold).
    pub(crate) fn push_raw(&mut self, key: Value, value: Value) {
        Arc::make_mut(&mut self.entries).push((key, value));
    }

    /// Removes the string key `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let pos = self
            .entries
            .iter()
            .position(|(k, _)| k.as_str() == Some(key))?;
        Some(Arc::make_mut(&mut self.entries).remove(pos).1)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Value, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl IntoIterator for Map {
    type Item = (Value, Value);
    type IntoIter = std::vec::IntoIter<(Value, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        Arc::unwrap_or_clone(self.entries).into_iter()
    }
}

impl<K: Into<Value>, V: Into<Value>> FromIterator<(K, V)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl fmt::Display for Value {
    /// A compact, JSON-like rendering for humans (ext values show as `Module.Class(...)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => write!(f, "b<{} bytes>", b.len()),
            Value::List(l) => {
                f.write_str("[")?;
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Ext(e) => write!(f, "{e}"),
        }
    }
}

/// Builds a [`Value`] from JSON-like syntax, e.g. `value!({"foo": "a", "bar": ["a", 1]})`.
///
/// It goes through `serde_json::json!`, so it supports exactly JSON's shapes.
#[macro_export]
macro_rules! value {
    ($($json:tt)+) => {
        $crate::Value::from($crate::__serde_json::json!($($json)+))
    };
}
