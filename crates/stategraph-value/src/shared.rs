//! [`DecodeCache`]: values decoded once per read and shared wherever the same bytes appear
//! again.
//!
//! A thread's checkpoints repeat each other: checkpoint N+1 of a chat stores the first N
//! messages of checkpoint N again, byte for byte, and an unchanged channel is stored (or
//! referenced) by every later checkpoint. A listing that decodes every checkpoint would build
//! the same strings and messages hundreds of times. With a cache, a string or ext value (a
//! message) whose bytes were already decoded during the same read is the value decoded the
//! first time: one reference count, no allocation, no UTF-8 check. Values are found by a
//! hash of their length and of eight 8-byte windows spread over their bytes (hashing every
//! byte cost as much as the decode it saves), and always compared byte for byte before being
//! shared, so what callers see is exactly what a fresh decode gives. Values whose windows
//! agree share a key: a few of them are kept side by side, and beyond that the rest are
//! decoded each time (correct, only slower).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{List, Value};

/// Payloads shorter than this are decoded each time: a lookup would cost as much.
pub(crate) const MIN_SHARED_LEN: usize = 32;

/// Lists shorter than this are decoded item by item.
pub(crate) const MIN_SHARED_ITEMS: usize = 8;

/// How many long lists a cache remembers to share their items with the next ones.
const LISTS: usize = 4;

/// A list decoded before: its items' bytes, where each item ends in them, the list, and
/// the nesting it was decoded at.
#[derive(Debug)]
struct SeenList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    list: List,
    depth: usize,
}

/// What a list being decoded has in common with one decoded before
/// ([`DecodeCache::list_prefix`]).
pub(crate) enum ListStart {
    /// All of it: the list (sharing the earlier one's items) and where its bytes end.
    Whole(List, usize),
    /// Its first items (none when nothing is in common), with where each ends in its bytes.
    Part(Vec<Value>, Vec<usize>),
}

/// How many leading bytes `a` and `b` have in common.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 128;
    let whole = a
        .chunks(CHUNK)
        .zip(b.chunks(CHUNK))
        .take_while(|(x, y)| x.len() == CHUNK && x == y)
        .count()
        * CHUNK;
    let tail = a
        .get(whole..)
        .unwrap_or_default()
        .iter()
        .zip(b.get(whole..).unwrap_or_default())
        .take_while(|(x, y)| x == y)
        .count();
    whole + tail
}

/// The seed that keeps strings and each ext type apart in the table.
const STR_KIND: u64 = 0x7374_7200;

/// How many values whose keys collide are kept (at consecutive keys).
const PROBES: u64 = 4;

/// The key of `bytes` (at least [`MIN_SHARED_LEN`] long) under `seed`: their length and
/// eight 8-byte windows from the first byte to the last, mixed by folded multiplication.
fn key_of(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let n = bytes.len();
    let last = n.saturating_sub(8);
    let mut h = seed ^ (n as u64).wrapping_mul(K);
    for i in 0..8 {
        let at = last * i / 7;
        let mut w = [0u8; 8];
        if let Some(window) = bytes.get(at..at + 8) {
            w.copy_from_slice(window);
        }
        let m = u128::from(h ^ u64::from_le_bytes(w)) * u128::from(K);
        h = (m as u64) ^ ((m >> 64) as u64);
    }
    h
}

/// The seed of short strings' keys ([`short_key`]).
const SHORT_KIND: u64 = 0x7368_6f72_7400;

/// The key of a short string's `bytes` (shorter than [`MIN_SHARED_LEN`]): every byte, eight
/// at a time, and the length, mixed as [`key_of`] mixes its windows.
fn short_key(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = SHORT_KIND ^ (bytes.len() as u64).wrapping_mul(K);
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        if let Some(head) = w.get_mut(..chunk.len()) {
            head.copy_from_slice(chunk);
        }
        let m = u128::from(h ^ u64::from_le_bytes(w)) * u128::from(K);
        h = (m as u64) ^ ((m >> 64) as u64);
    }
    h
}

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
    /// Not seen: decode, then [`DecodeCache::keep`] under this key (`None`: no room for it).
    Miss(Option<u64>),
}

/// Values decoded during one read (a listing, a history walk), shared by every later
/// occurrence of the same bytes in that read. Memory is bounded: past
/// [`max_entries`](Self::with_max_entries) distinct values, new ones are decoded without
/// being kept.
///
/// ```
/// use stategraph_value::{DecodeCache, DecodeLimits, Value, decode_shared, encode};
/// use stategraph_value::value;
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
    /// The latest long lists, newest first.
    lists: Vec<SeenList>,
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
            lists: Vec::new(),
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
        self.probe(
            key_of(STR_KIND, bytes),
            |v, _| matches!(v, Value::Str(s) if s.as_bytes() == bytes),
        )
    }

    /// The string of the short UTF-8 `bytes` (shorter than [`MIN_SHARED_LEN`]: map keys,
    /// channel and node names, which every checkpoint of a thread repeats): the one decoded
    /// before from the same bytes, else a new one, kept for the next time while there is
    /// room. Not counted in [`decoded`](Self::decoded) or [`reused`](Self::reused). `None`:
    /// the bytes are not UTF-8.
    pub(crate) fn short_str(&mut self, bytes: &[u8]) -> Option<Value> {
        let free = match self.find(
            short_key(bytes),
            |v, _| matches!(v, Value::Str(s) if s.as_bytes() == bytes),
        ) {
            Probe::Hit(v) => return Some(v),
            Probe::Miss(free) => free,
        };
        let value = Value::Str(std::str::from_utf8(bytes).ok()?.into());
        self.store(free, &value, usize::MAX);
        Some(value)
    }

    /// Looks up the ext value of type `code` with payload `data`, found at nesting `depth`.
    pub(crate) fn probe_ext(&mut self, code: i8, data: &[u8], depth: usize) -> Probe {
        self.probe(
            key_of(u64::from(code.cast_unsigned()), data),
            |v, seen_at| {
                depth <= seen_at
                    && matches!(v, Value::Ext(e) if e.code() == code && e.data() == data)
            },
        )
    }

    /// The value at `key` or one of the next keys that `same` says is the one sought; else
    /// the first free key among them, if any.
    fn probe(&mut self, key: u64, same: impl Fn(&Value, usize) -> bool) -> Probe {
        let found = self.find(key, same);
        if let Probe::Hit(_) = found {
            self.reused += 1;
        }
        found
    }

    /// [`probe`](Self::probe) without counting a hit.
    fn find(&self, key: u64, same: impl Fn(&Value, usize) -> bool) -> Probe {
        for k in (0..PROBES).map(|i| key.wrapping_add(i)) {
            match self.table.get(&k) {
                None => return Probe::Miss(Some(k)),
                Some((v, seen_at)) if same(v, *seen_at) => return Probe::Hit(v.clone()),
                Some(_) => {}
            }
        }
        Probe::Miss(None)
    }

    /// What a list of `n` items whose bytes start at `rest` has in common with a list
    /// remembered at the same nesting, byte for byte: all of it (a chat's older message list
    /// inside a newer one: shared, nothing copied), its first items, or nothing.
    pub(crate) fn list_prefix(&mut self, rest: &[u8], n: usize, depth: usize) -> ListStart {
        // The remembered list this one begins like, and how many of its items it begins with.
        let mut start = None;
        if self.max_entries != 0 {
            for seen in self.lists.iter().filter(|l| l.depth == depth) {
                // The usual case first, in one comparison: the whole list is the start of
                // the remembered one (an older checkpoint's messages, listed newest first).
                if let Some(&end) = n.checked_sub(1).and_then(|last| seen.ends.get(last))
                    && rest.get(..end) == seen.bytes.get(..end)
                {
                    self.reused += n as u64;
                    return ListStart::Whole(seen.list.prefix(n), end);
                }
                // Else the items of the remembered list that lie wholly in the bytes both
                // share are this list's first items (msgpack values end where their bytes
                // say); fewer than `n`, or the comparison above would have found them.
                let common = common_prefix(rest, &seen.bytes);
                let k = seen.ends.partition_point(|&e| e <= common).min(n);
                if k > 0 {
                    start = Some((seen, k));
                    break;
                }
            }
        }
        // `n` comes from the bytes: room for no more items than there are bytes left.
        let room = n.min(rest.len());
        let mut items = Vec::with_capacity(room);
        let mut ends = Vec::with_capacity(room);
        if let Some((seen, k)) = start {
            items.extend_from_slice(seen.list.get(..k).unwrap_or_default());
            ends.extend_from_slice(seen.ends.get(..k).unwrap_or_default());
            self.reused += k as u64;
        }
        ListStart::Part(items, ends)
    }

    /// Remembers a list just decoded (its items' bytes `region`, item i ending at
    /// `ends[i]`) for the next ones to share its items.
    pub(crate) fn remember_list(
        &mut self,
        region: &[u8],
        ends: Vec<usize>,
        list: &List,
        depth: usize,
    ) {
        if self.max_entries == 0 {
            return;
        }
        self.lists.insert(
            0,
            SeenList {
                bytes: region.to_vec(),
                ends,
                list: list.clone(),
                depth,
            },
        );
        self.lists.truncate(LISTS);
    }

    /// Keeps a freshly decoded value under the key its probe gave (none: too many values
    /// share its key; it is not kept). `depth` is the nesting it was decoded at
    /// (`usize::MAX` for a string, valid anywhere).
    pub(crate) fn keep(&mut self, key: Option<u64>, value: &Value, depth: usize) {
        self.decoded += 1;
        self.store(key, value, depth);
    }

    /// Puts `value` at `key` (none: no room among its colliding keys) while the table has
    /// room.
    fn store(&mut self, key: Option<u64>, value: &Value, depth: usize) {
        if let Some(key) = key
            && self.table.len() < self.max_entries
        {
            self.table.insert(key, (value.clone(), depth));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DecodeLimits, Ext, decode_shared, decode_with_limits, encode};

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
    fn values_whose_windows_agree_are_told_apart() {
        // Six strings of 100 bytes that differ only at byte 10, between two windows: one key.
        let strings: Vec<Value> = (0..6_u8)
            .map(|i| {
                let mut s = vec![b'a'; 100];
                s[10] = b'0' + i;
                Value::from(String::from_utf8(s).unwrap())
            })
            .collect();
        let bytes = encode(&Value::from(strings.clone()));
        let mut cache = DecodeCache::new();
        for _ in 0..2 {
            let v = decode_shared(&bytes, DecodeLimits::default(), &mut cache).unwrap();
            assert_eq!(v, Value::from(strings.clone()));
        }
        // Four kept side by side and shared the second time; the other two decoded again.
        assert_eq!((cache.decoded(), cache.reused()), (8, 4));
    }

    /// A chat's message list after `n` messages.
    fn chat(n: usize) -> Value {
        Value::from(
            (0..n)
                .map(|i| Value::from(format!("message {i}, long enough to be worth sharing")))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn lists_share_the_items_they_begin_with() {
        let limits = DecodeLimits::default();
        let mut cache = DecodeCache::new();
        // Newest first, as a listing reads: each list is the start of the one before.
        let mut lists = Vec::new();
        for n in [12, 11, 10, 9] {
            let bytes = encode(&Value::from(vec![chat(n), Value::from(n as u64)]));
            let v = decode_shared(&bytes, limits, &mut cache).unwrap();
            assert_eq!(v, decode_with_limits(&bytes, limits).unwrap());
            lists.push(v);
        }
        assert_eq!((cache.decoded(), cache.reused()), (12, 11 + 10 + 9));
        // The older lists are the newest one's items, not copies of them.
        let items = |v: &Value| match v.as_list().unwrap().first() {
            Some(Value::List(l)) => l.as_ptr(),
            _ => panic!("a list of messages first"),
        };
        assert!(lists.iter().all(|v| items(v) == items(&lists[0])));
        // Oldest first: the remembered list is the start of the next.
        let mut cache = DecodeCache::new();
        for n in [9, 10, 12] {
            let bytes = encode(&chat(n));
            let v = decode_shared(&bytes, limits, &mut cache).unwrap();
            assert_eq!(v, decode_with_limits(&bytes, limits).unwrap());
        }
        assert_eq!((cache.decoded(), cache.reused()), (12, 9 + 10));
    }

    #[test]
    fn a_damaged_item_after_shared_ones_fails_as_a_fresh_decode_does() {
        let limits = DecodeLimits::default();
        let mut cache = DecodeCache::new();
        decode_shared(&encode(&chat(10)), limits, &mut cache).unwrap();
        // Eleven items: the first ten shared, the last a string that is not UTF-8.
        let mut bytes = encode(&chat(11));
        let last = bytes.len() - 1;
        bytes[last] = 0xff;
        let fresh = decode_with_limits(&bytes, limits).unwrap_err();
        assert_eq!(fresh.path, "[10]");
        assert_eq!(
            decode_shared(&bytes, limits, &mut cache).unwrap_err(),
            fresh
        );
    }

    #[test]
    fn a_hostile_list_length_allocates_nothing_for_it() {
        // An array32 claiming 4 billion items, with nothing after it (found by the fuzzer).
        let mut cache = DecodeCache::new();
        let err = decode_shared(
            &[0xdd, 0xff, 0xff, 0xff, 0xff],
            DecodeLimits::default(),
            &mut cache,
        )
        .unwrap_err();
        assert_eq!(err.kind, crate::DecodeErrorKind::Truncated);
        assert_eq!(err.path, "[0]");
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
