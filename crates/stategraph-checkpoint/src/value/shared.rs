//! [`DecodeCache`]: values decoded once per read and shared wherever the same bytes appear
//! again.
//!
//! A thread's checkpoints repeat each other: checkpoint N+1 of a chat stores the first N
//! messages of checkpoint N again, byte for byte, and an unchanged channel is stored (or
//! referenced) by every later checkpoint. A listing that decodes every checkpoint would build
//! the same strings and messages hundreds of times. With a cache, a string or ext value (a
//! message) whose bytes were already decoded during the same read is the value decoded the
//! first time: one reference count, no allocation, no UTF-8 check. Values are found by the
//! hash of their bytes (XXH3) and always compared byte for byte before being shared, so what
//! callers see is exactly what a fresh decode gives.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::Value;

/// Payloads shorter than this are decoded each time: a lookup would cost as much.
pub(crate) const MIN_SHARED_LEN: usize = 32;

/// The seed that keeps strings and each ext type apart in the table.
const STR_KIND: u64 = 0x7374_7200;

/// How many distinct values one cache keeps by default (the values themselves are the ones
/// handed to the caller; the table costs about 40 bytes an entry on top).
const DEFAULT_MAX_ENTRIES: usize = 1 << 20;

/// The table's keys are already hashes: use them as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// What a lookup found.
pub(crate) enum Probe {
    /// The same bytes were decoded before: their value.
    Hit(Value),
    /// Not seen: decode, then [`DecodeCache::keep`] under this key.
    Miss(u64),
}

/// Values decoded during one read (a listing, a history walk), shared by every later
/// occurrence of the same bytes in that read. Memory is bounded: past
/// [`max_entries`](Self::with_max_entries) distinct values, new ones are decoded without
/// being kept.
///
/// ```
/// use stategraph_checkpoint::value::{DecodeCache, DecodeLimits, Value, decode_shared, encode};
/// use stategraph_checkpoint::value;
///
/// let message = "a message long enough to be worth sharing between checkpoints";
/// let first = encode(&value!({"messages": [message]}));
/// let second = encode(&value!({"messages": [message, "a reply that is also quite long, too"]}));
/// let mut cache = DecodeCache::new();
/// let a = decode_shared(&first, DecodeLimits::default(), &mut cache).unwrap();
/// let b = decode_shared(&second, DecodeLimits::default(), &mut cache).unwrap();
/// assert_eq!(b.as_map().unwrap().get("messages").unwrap().as_list().unwrap()[0], Value::from(message));
/// // Three distinct long strings were decoded; the repeated one was shared.
/// assert_eq!((cache.decoded(), cache.reused()), (2, 1));
/// # let _ = a;
/// ```
#[derive(Debug)]
pub struct DecodeCache {
    /// Each value with the deepest nesting level it was decoded at (an ext payload is checked
    /// against the depth left at its place; one found deeper is not shared).
    table: HashMap<u64, (Value, usize), BuildHasherDefault<KeyHasher>>,
    max_entries: usize,
    decoded: u64,
    reused: u64,
}

impl Default for DecodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl DecodeCache {
    /// An empty cache keeping up to about a million distinct values.
    pub fn new() -> Self {
        Self::with_max_entries(DEFAULT_MAX_ENTRIES)
    }

    /// An empty cache keeping at most `max_entries` distinct values.
    pub fn with_max_entries(max_entries: usize) -> Self {
        Self {
            table: HashMap::default(),
            max_entries,
            decoded: 0,
            reused: 0,
        }
    }

    /// How many strings and ext values long enough to share were decoded (each distinct
    /// one once, while the cache has room).
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// How many were not decoded because the same bytes had been.
    pub fn reused(&self) -> u64 {
        self.reused
    }

    /// Looks up the string with UTF-8 bytes `bytes`.
    pub(crate) fn probe_str(&mut self, bytes: &[u8]) -> Probe {
        let key = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, STR_KIND);
        match self.table.get(&key) {
            Some((v @ Value::Str(s), _)) if s.as_bytes() == bytes => {
                self.reused += 1;
                Probe::Hit(v.clone())
            }
            _ => Probe::Miss(key),
        }
    }

    /// Looks up the ext value of type `code` with payload `data`, found at nesting `depth`.
    pub(crate) fn probe_ext(&mut self, code: i8, data: &[u8], depth: usize) -> Probe {
        let key = xxhash_rust::xxh3::xxh3_64_with_seed(data, u64::from(code.cast_unsigned()));
        match self.table.get(&key) {
            Some((v @ Value::Ext(e), seen_at))
                if depth <= *seen_at && e.code() == code && e.data() == data =>
            {
                self.reused += 1;
                Probe::Hit(v.clone())
            }
            _ => Probe::Miss(key),
        }
    }

    /// Keeps a freshly decoded value under the key its probe gave. A key already taken (two
    /// different byte strings with one hash) keeps its first value; the other is simply not
    /// shared.
    /// `depth` is the nesting it was decoded at (`usize::MAX` for a string, valid anywhere).
    pub(crate) fn keep(&mut self, key: u64, value: &Value, depth: usize) {
        self.decoded += 1;
        if self.table.len() < self.max_entries {
            self.table
                .entry(key)
                .or_insert_with(|| (value.clone(), depth));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{DecodeLimits, Ext, decode_shared, decode_with_limits, encode};

    const LONG: &str = "a string long enough to be shared by the cache";

    #[test]
    fn repeated_bytes_decode_to_one_shared_value() {
        let ext = Value::Ext(Ext::from_raw(5, encode(&crate::value!([LONG, 1]))));
        let bytes = encode(&Value::from(vec![
            Value::from(LONG),
            ext.clone(),
            Value::from(LONG),
            ext.clone(),
            Value::from("short"),
            Value::from("short"),
        ]));
        let mut cache = DecodeCache::new();
        let a = decode_shared(&bytes, DecodeLimits::default(), &mut cache).unwrap();
        let b = decode_shared(&bytes, DecodeLimits::default(), &mut cache).unwrap();
        assert_eq!(
            a,
            decode_with_limits(&bytes, DecodeLimits::default()).unwrap()
        );
        assert_eq!(a, b);
        // The string and the ext value once each; short strings are not counted.
        assert_eq!((cache.decoded(), cache.reused()), (2, 6));
        let (Value::Str(first), Value::Str(again)) =
            (&a.as_list().unwrap()[0], &b.as_list().unwrap()[2])
        else {
            panic!("strings expected");
        };
        assert!(std::sync::Arc::ptr_eq(first, again));
    }

    #[test]
    fn a_full_cache_still_decodes() {
        let bytes = encode(&Value::from(vec![Value::from(LONG), Value::from(LONG)]));
        let mut cache = DecodeCache::with_max_entries(0);
        let v = decode_shared(&bytes, DecodeLimits::default(), &mut cache).unwrap();
        assert_eq!(
            v,
            decode_with_limits(&bytes, DecodeLimits::default()).unwrap()
        );
        assert_eq!((cache.decoded(), cache.reused()), (2, 0));
    }

    #[test]
    fn an_ext_value_is_not_shared_deeper_than_it_was_checked() {
        // Its payload nests three levels: fine at the top, too deep two levels down.
        let ext = Value::Ext(Ext::from_raw(5, encode(&crate::value!([[[LONG]]]))));
        let limits = DecodeLimits {
            max_depth: 5,
            ..DecodeLimits::default()
        };
        let shallow = encode(&ext);
        let deep = encode(&Value::from(vec![Value::from(vec![ext])]));
        let fresh = decode_with_limits(&deep, limits).unwrap_err();
        let mut cache = DecodeCache::new();
        decode_shared(&shallow, limits, &mut cache).unwrap();
        assert_eq!(decode_shared(&deep, limits, &mut cache).unwrap_err(), fresh);
    }
}
