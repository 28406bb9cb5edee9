//! A strict, bounded msgpack decoder.
//!
//! Every error carries the byte offset where decoding failed and the path inside the value
//! (`messages[3].content`), so a corrupt checkpoint can be located exactly. Nesting depth and
//! total size are bounded, and no allocation is sized by an untrusted length beyond the bytes
//! that are actually present, so hostile input cannot exhaust memory or stack.

use std::fmt;

use super::shared::{DecodeCache, ListStart, MIN_SHARED_ITEMS, MIN_SHARED_LEN, Probe};
use super::{Ext, List, Map, Value};

/// Bounds applied while decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Maximum nesting of arrays, maps and ext payloads.
    pub max_depth: usize,
    /// Maximum input size in bytes.
    pub max_bytes: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_depth: 256,
            max_bytes: 1 << 31,
        }
    }
}

/// Why decoding failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended in the middle of a value.
    Truncated,
    /// A byte that is not a valid msgpack marker (`0xc1`).
    InvalidMarker(u8),
    /// A string that is not valid UTF-8.
    InvalidUtf8,
    /// Nesting deeper than [`DecodeLimits::max_depth`].
    TooDeep(usize),
    /// Input larger than [`DecodeLimits::max_bytes`].
    TooLarge(usize),
    /// Bytes left over after one complete value.
    TrailingBytes(usize),
    /// An ext value LangGraph defines (codes 0–7) whose payload is not valid msgpack.
    InvalidExtPayload(i8),
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("input ends in the middle of a value"),
            Self::InvalidMarker(b) => write!(f, "invalid msgpack marker 0x{b:02x}"),
            Self::InvalidUtf8 => f.write_str("string is not valid UTF-8"),
            Self::TooDeep(d) => write!(f, "nesting deeper than {d} levels"),
            Self::TooLarge(n) => write!(f, "input larger than the {n}-byte limit"),
            Self::TrailingBytes(n) => write!(f, "{n} unexpected bytes after the value"),
            Self::InvalidExtPayload(c) => write!(f, "ext type {c} has an invalid payload"),
        }
    }
}

/// A msgpack decoding failure, located by byte offset and by path inside the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}{}", path_suffix(.path))]
pub struct DecodeError {
    /// What went wrong.
    pub kind: DecodeErrorKind,
    /// Byte offset in the input where the problem was found.
    pub offset: usize,
    /// Where inside the value, e.g. `channel_values.messages[3].content`; empty at the top.
    pub path: String,
}

fn path_suffix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" (in `{path}`)")
    }
}

impl DecodeError {
    fn new(kind: DecodeErrorKind, offset: usize) -> Self {
        Self {
            kind,
            offset,
            path: String::new(),
        }
    }

    /// Prefixes a path segment: `[3]` for an index, `.key` / `key` for a map key.
    fn within(mut self, segment: &Segment<'_>) -> Self {
        let seg = match segment {
            Segment::Index(i) => {
                if self.path.is_empty() || self.path.starts_with('[') {
                    format!("[{i}]")
                } else {
                    format!("[{i}].")
                }
            }
            Segment::Key(k) => {
                if self.path.is_empty() || self.path.starts_with('[') {
                    (*k).to_owned()
                } else {
                    format!("{k}.")
                }
            }
            Segment::Ext => String::new(),
        };
        self.path.insert_str(0, &seg);
        self
    }
}

enum Segment<'a> {
    Index(usize),
    Key(&'a str),
    Ext,
}

/// Decodes exactly one msgpack value from `bytes` with the default limits.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    decode_with_limits(bytes, DecodeLimits::default())
}

/// Decodes exactly one msgpack value from `bytes`.
pub fn decode_with_limits(bytes: &[u8], limits: DecodeLimits) -> Result<Value, DecodeError> {
    decode_in(bytes, limits, None)
}

/// Decodes exactly one msgpack value from `bytes`, sharing with `cache` every string and ext
/// value (a message) whose bytes were decoded before through the same cache: for a read that
/// decodes many values repeating each other, such as a thread's checkpoints. The result is
/// the same as [`decode_with_limits`]'s.
pub fn decode_shared(
    bytes: &[u8],
    limits: DecodeLimits,
    cache: &mut DecodeCache,
) -> Result<Value, DecodeError> {
    decode_in(bytes, limits, Some(cache))
}

fn decode_in(
    bytes: &[u8],
    limits: DecodeLimits,
    cache: Option<&mut DecodeCache>,
) -> Result<Value, DecodeError> {
    let mut r = Reader::new(bytes, limits, cache)?;
    let v = r.value(0)?;
    if r.pos != bytes.len() {
        return Err(DecodeError::new(
            DecodeErrorKind::TrailingBytes(bytes.len() - r.pos),
            r.pos,
        ));
    }
    Ok(v)
}

/// A stored map read entry by entry into typed fields instead of into a [`Value`] tree: a
/// checkpoint's maps of channels and versions, which a listing decodes for every checkpoint.
/// Values come out as [`decode_shared`] gives them. Each method answers `None` where the
/// bytes are not what it expects; the caller then decodes in full, which says what is wrong
/// and where.
pub struct FieldReader<'a, 'c> {
    r: Reader<'a, 'c>,
}

impl<'a, 'c> FieldReader<'a, 'c> {
    /// A reader of `bytes`, within `limits`, sharing through `cache`.
    pub fn new(
        bytes: &'a [u8],
        limits: DecodeLimits,
        cache: Option<&'c mut DecodeCache>,
    ) -> Option<Self> {
        Reader::new(bytes, limits, cache).ok().map(|r| Self { r })
    }

    /// Reads with a [`Peek`](super::Peek) from where the reader is, and moves past what it
    /// read.
    fn peek<T>(&mut self, read: impl FnOnce(&mut super::Peek<'a>) -> Option<T>) -> Option<T> {
        let mut p = super::Peek::new(self.r.buf.get(self.r.pos..)?);
        let out = read(&mut p)?;
        self.r.pos += p.position();
        Some(out)
    }

    /// The header of a map nested at `depth` (the depth [`value`](Self::value) would be
    /// given for it): its number of entries.
    pub fn map(&mut self, depth: usize) -> Option<usize> {
        self.r.enter(depth).ok()?;
        self.peek(super::Peek::map_len)
    }

    /// A string, where it is (a key compared with known names).
    pub fn str(&mut self) -> Option<&'a str> {
        self.peek(super::Peek::str)
    }

    /// A value nested at `depth`.
    pub fn value(&mut self, depth: usize) -> Option<Value> {
        self.r.value(depth).ok()
    }

    /// Whether every byte has been read.
    pub fn done(&self) -> bool {
        self.r.pos == self.r.buf.len()
    }
}

struct Reader<'a, 'c> {
    buf: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// Where values decoded before are shared from, if anywhere.
    cache: Option<&'c mut DecodeCache>,
}

impl<'a, 'c> Reader<'a, 'c> {
    /// A reader of `bytes` within `limits`, sharing through `cache`; too many bytes are an
    /// error at once.
    fn new(
        bytes: &'a [u8],
        limits: DecodeLimits,
        cache: Option<&'c mut DecodeCache>,
    ) -> Result<Self, DecodeError> {
        if bytes.len() > limits.max_bytes {
            return Err(DecodeError::new(
                DecodeErrorKind::TooLarge(limits.max_bytes),
                0,
            ));
        }
        Ok(Self {
            buf: bytes,
            pos: 0,
            max_depth: limits.max_depth,
            cache,
        })
    }
}

impl<'a> Reader<'a, '_> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let (s, end) = self
            .pos
            .checked_add(n)
            .and_then(|end| Some((self.buf.get(self.pos..end)?, end)))
            .ok_or_else(|| DecodeError::new(DecodeErrorKind::Truncated, self.pos))?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<usize, DecodeError> {
        Ok(usize::from(u16::from_be_bytes(self.array()?)))
    }
    fn u32(&mut self) -> Result<usize, DecodeError> {
        let n = u32::from_be_bytes(self.array()?);
        usize::try_from(n).map_err(|_| DecodeError::new(DecodeErrorKind::Truncated, self.pos))
    }

    /// Remaining bytes: an upper bound for how many elements can follow.
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let marker = self.u8()?;
        Ok(match marker {
            0x00..=0x7f => Value::Int(i64::from(marker)),
            0x80..=0x8f => return self.map(usize::from(marker & 0x0f), depth),
            0x90..=0x9f => return self.list(usize::from(marker & 0x0f), depth),
            0xa0..=0xbf => return self.str(usize::from(marker & 0x1f), start),
            0xc0 => Value::Null,
            0xc1 => {
                return Err(DecodeError::new(
                    DecodeErrorKind::InvalidMarker(marker),
                    start,
                ));
            }
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = usize::from(self.u8()?);
                Value::Bytes(self.take(n)?.to_vec())
            }
            0xc5 => {
                let n = self.u16()?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            0xc6 => {
                let n = self.u32()?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            0xc7 => {
                let n = usize::from(self.u8()?);
                return self.ext(n, depth);
            }
            0xc8 => {
                let n = self.u16()?;
                return self.ext(n, depth);
            }
            0xc9 => {
                let n = self.u32()?;
                return self.ext(n, depth);
            }
            0xca => Value::Float(f64::from(f32::from_be_bytes(self.array()?))),
            0xcb => Value::Float(f64::from_be_bytes(self.array()?)),
            0xcc => Value::Int(i64::from(self.u8()?)),
            0xcd => Value::Int(i64::from(u16::from_be_bytes(self.array()?))),
            0xce => Value::Int(i64::from(u32::from_be_bytes(self.array()?))),
            0xcf => Value::from(u64::from_be_bytes(self.array()?)),
            0xd0 => Value::Int(i64::from(i8::from_be_bytes(self.array()?))),
            0xd1 => Value::Int(i64::from(i16::from_be_bytes(self.array()?))),
            0xd2 => Value::Int(i64::from(i32::from_be_bytes(self.array()?))),
            0xd3 => Value::Int(i64::from_be_bytes(self.array()?)),
            0xd4 => return self.ext(1, depth),
            0xd5 => return self.ext(2, depth),
            0xd6 => return self.ext(4, depth),
            0xd7 => return self.ext(8, depth),
            0xd8 => return self.ext(16, depth),
            0xd9 => {
                let n = usize::from(self.u8()?);
                return self.str(n, start);
            }
            0xda => {
                let n = self.u16()?;
                return self.str(n, start);
            }
            0xdb => {
                let n = self.u32()?;
                return self.str(n, start);
            }
            0xdc => {
                let n = self.u16()?;
                return self.list(n, depth);
            }
            0xdd => {
                let n = self.u32()?;
                return self.list(n, depth);
            }
            0xde => {
                let n = self.u16()?;
                return self.map(n, depth);
            }
            0xdf => {
                let n = self.u32()?;
                return self.map(n, depth);
            }
            0xe0..=0xff => Value::Int(i64::from(i8::from_be_bytes([marker]))),
        })
    }

    fn str(&mut self, n: usize, start: usize) -> Result<Value, DecodeError> {
        let bytes = self.take(n)?;
        let key = match self.cache.as_deref_mut() {
            Some(cache) if n >= MIN_SHARED_LEN => match cache.probe_str(bytes) {
                Probe::Hit(v) => return Ok(v),
                Probe::Miss(key) => Some(key),
            },
            Some(cache) => {
                return cache
                    .short_str(bytes)
                    .ok_or_else(|| DecodeError::new(DecodeErrorKind::InvalidUtf8, start));
            }
            None => None,
        };
        let value = match std::str::from_utf8(bytes) {
            Ok(s) => Value::Str(s.into()),
            Err(_) => return Err(DecodeError::new(DecodeErrorKind::InvalidUtf8, start)),
        };
        if let (Some(key), Some(cache)) = (key, self.cache.as_deref_mut()) {
            cache.keep(key, &value, usize::MAX);
        }
        Ok(value)
    }

    fn enter(&self, depth: usize) -> Result<usize, DecodeError> {
        if depth >= self.max_depth {
            Err(DecodeError::new(
                DecodeErrorKind::TooDeep(self.max_depth),
                self.pos,
            ))
        } else {
            Ok(depth + 1)
        }
    }

    fn list(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth)?;
        if n >= MIN_SHARED_ITEMS && self.cache.is_some() {
            return self.shared_list(n, depth);
        }
        let mut items = Vec::with_capacity(n.min(self.remaining()));
        for i in 0..n {
            let v = self
                .value(depth)
                .map_err(|e| e.within(&Segment::Index(i)))?;
            items.push(v);
        }
        Ok(Value::List(items.into()))
    }

    /// A list of `n` items whose first items may repeat, byte for byte, a list decoded
    /// before through the cache (a chat's messages in every checkpoint after the one that
    /// added them): those are taken from it, the rest decoded, and the list is remembered
    /// for the next ones unless it was shared whole.
    fn shared_list(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let rest = self.buf.get(start..).unwrap_or_default();
        let found = match self.cache.as_deref_mut() {
            Some(cache) => cache.list_prefix(rest, n, depth),
            None => ListStart::Part(Vec::new(), Vec::new()),
        };
        let (mut items, mut ends) = match found {
            ListStart::Whole(list, end) => {
                self.pos = start + end;
                return Ok(Value::List(list));
            }
            ListStart::Part(items, ends) => (items, ends),
        };
        let shared = items.len();
        self.pos = start + ends.last().copied().unwrap_or(0);
        for i in shared..n {
            let v = self
                .value(depth)
                .map_err(|e| e.within(&Segment::Index(i)))?;
            items.push(v);
            ends.push(self.pos - start);
        }
        let list = List::from(items);
        if let Some(cache) = self.cache.as_deref_mut() {
            let region = rest.get(..self.pos - start).unwrap_or_default();
            cache.remember_list(region, ends, &list, depth);
        }
        Ok(Value::List(list))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let depth = self.enter(depth)?;
        let mut map = Map::with_capacity(n.min(self.remaining() / 2));
        for _ in 0..n {
            let k = self.value(depth)?;
            // The key is named only in an error: no copy of it on the way.
            let v = self.value(depth).map_err(|e| match &k {
                Value::Str(s) => e.within(&Segment::Key(s)),
                other => e.within(&Segment::Key(&format!("<{other}>"))),
            })?;
            map.push_raw(k, v);
        }
        Ok(Value::Map(map))
    }

    fn ext(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let code = i8::from_be_bytes([self.u8()?]);
        let payload_start = self.pos;
        let data = self.take(n)?;
        let key = match self.cache.as_deref_mut() {
            Some(cache) if n >= MIN_SHARED_LEN => match cache.probe_ext(code, data, depth) {
                Probe::Hit(v) => return Ok(v),
                Probe::Miss(key) => Some(key),
            },
            _ => None,
        };
        let value = self.new_ext(code, data, payload_start, depth)?;
        if let (Some(key), Some(cache)) = (key, self.cache.as_deref_mut()) {
            cache.keep(key, &value, depth);
        }
        Ok(value)
    }

    /// An ext value not seen before: LangGraph's own types' payloads checked first.
    fn new_ext(
        &self,
        code: i8,
        data: &[u8],
        payload_start: usize,
        depth: usize,
    ) -> Result<Value, DecodeError> {
        if (0..=7).contains(&code) {
            // LangGraph's own ext types carry a msgpack payload; validate it now so that a
            // corrupt one is reported here, with its location, rather than when it is used.
            let depth = self.enter(depth)?;
            // Most payloads are whole: a walk that allocates nothing says so; only a payload
            // it finds fault with is decoded, for the error's place and kind.
            if super::peek::is_whole(data, self.max_depth.saturating_sub(depth)) {
                return Ok(Value::Ext(Ext::from_raw(code, data.to_vec())));
            }
            let mut inner = Reader {
                buf: data,
                pos: 0,
                max_depth: self.max_depth,
                cache: None,
            };
            let shift = |mut e: DecodeError| {
                e.offset += payload_start;
                e.within(&Segment::Ext)
            };
            inner.value(depth).map_err(shift)?;
            if inner.pos != data.len() {
                return Err(DecodeError::new(
                    DecodeErrorKind::InvalidExtPayload(code),
                    payload_start + inner.pos,
                ));
            }
        }
        Ok(Value::Ext(Ext::from_raw(code, data.to_vec())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;

    #[test]
    fn truncated_input_reports_offset_and_path() {
        let v = crate::value!({"messages": ["a", {"content": "hello"}]});
        let bytes = encode(&v);
        let err = decode(&bytes[..bytes.len() - 2]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Truncated);
        assert_eq!(err.path, "messages[1].content");
        assert!(err.offset > 0);
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        // array32 claiming 4 billion elements, with nothing after it.
        let err = decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Truncated);
        assert_eq!(err.path, "[0]");
    }

    #[test]
    fn depth_is_bounded() {
        let bytes = vec![0x91; 10_000];
        let err = decode(&bytes).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::TooDeep(256));
    }

    #[test]
    fn invalid_marker_and_trailing_bytes() {
        assert_eq!(
            decode(&[0xc1]).unwrap_err().kind,
            DecodeErrorKind::InvalidMarker(0xc1)
        );
        assert_eq!(
            decode(&[0x01, 0x02]).unwrap_err().kind,
            DecodeErrorKind::TrailingBytes(1)
        );
    }

    #[test]
    fn corrupt_ext_payload_is_rejected() {
        // ext8, code 5, length 2, payload `92 a1` (array of 2 with a truncated string)
        let err = decode(&[0xc7, 0x02, 0x05, 0x92, 0xa1]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Truncated);
    }
}
