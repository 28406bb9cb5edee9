//! Reading a few fields of msgpack bytes without decoding the rest: lengths and strings by
//! reference, everything else skipped by its length (for message ids, looked up on every
//! `add_messages` over the whole history).

/// A cursor over msgpack bytes. Every read returns `None` on malformed or truncated input.
pub struct Peek<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Deeper than this is not a message; skipping gives up rather than recursing further.
const MAX_DEPTH: usize = 64;

impl<'a> Peek<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    fn uint(&mut self, width: usize) -> Option<usize> {
        let b = self.take(width)?;
        let v = b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x));
        usize::try_from(v).ok()
    }

    /// Where the cursor is (a byte offset into the bytes).
    pub fn position(&self) -> usize {
        self.at
    }

    fn peek_byte(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// An array header's length.
    pub fn array_len(&mut self) -> Option<usize> {
        match self.byte()? {
            m @ 0x90..=0x9f => Some(usize::from(m & 0x0f)),
            0xdc => self.uint(2),
            0xdd => self.uint(4),
            _ => None,
        }
    }

    /// A map header's length.
    pub fn map_len(&mut self) -> Option<usize> {
        match self.byte()? {
            m @ 0x80..=0x8f => Some(usize::from(m & 0x0f)),
            0xde => self.uint(2),
            0xdf => self.uint(4),
            _ => None,
        }
    }

    /// A string, borrowed; `None` (consuming nothing) when the next value is not a string.
    pub fn str(&mut self) -> Option<&'a str> {
        let start = self.at;
        let len = match self.peek_byte()? {
            m @ 0xa0..=0xbf => {
                self.at += 1;
                usize::from(m & 0x1f)
            }
            0xd9..=0xdb => {
                let m = self.byte()?;
                self.uint(1 << (m - 0xd9))?
            }
            _ => return None,
        };
        match self.take(len).and_then(|b| std::str::from_utf8(b).ok()) {
            Some(s) => Some(s),
            None => {
                self.at = start;
                None
            }
        }
    }

    /// An ext value: its type code and payload, borrowed.
    pub fn ext(&mut self) -> Option<(i8, &'a [u8])> {
        let len = match self.byte()? {
            0xd4 => 1,
            0xd5 => 2,
            0xd6 => 4,
            0xd7 => 8,
            0xd8 => 16,
            0xc7 => self.uint(1)?,
            0xc8 => self.uint(2)?,
            0xc9 => self.uint(4)?,
            _ => return None,
        };
        let code = i8::from_be_bytes([self.byte()?]);
        Some((code, self.take(len)?))
    }

    /// Skips one value.
    pub fn skip(&mut self) -> Option<()> {
        self.skip_at(0)
    }

    fn skip_at(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let m = self.byte()?;
        let skip = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
            0xa0..=0xbf => usize::from(m & 0x1f),
            0x80..=0x8f => return self.skip_many(2 * usize::from(m & 0x0f), depth),
            0x90..=0x9f => return self.skip_many(usize::from(m & 0x0f), depth),
            0xcc | 0xd0 => 1,
            0xcd | 0xd1 => 2,
            0xca | 0xce | 0xd2 => 4,
            0xcb | 0xcf | 0xd3 => 8,
            0xd4 => 2,
            0xd5 => 3,
            0xd6 => 5,
            0xd7 => 9,
            0xd8 => 17,
            0xc4 | 0xd9 => self.uint(1)?,
            0xc5 | 0xda => self.uint(2)?,
            0xc6 | 0xdb => self.uint(4)?,
            0xc7 => self.uint(1)? + 1,
            0xc8 => self.uint(2)? + 1,
            0xc9 => self.uint(4)? + 1,
            0xdc => {
                let n = self.uint(2)?;
                return self.skip_many(n, depth);
            }
            0xdd => {
                let n = self.uint(4)?;
                return self.skip_many(n, depth);
            }
            0xde => {
                let n = self.uint(2)?;
                return self.skip_many(n.checked_mul(2)?, depth);
            }
            0xdf => {
                let n = self.uint(4)?;
                return self.skip_many(n.checked_mul(2)?, depth);
            }
            0xc1 => return None,
        };
        self.take(skip).map(drop)
    }

    fn skip_many(&mut self, n: usize, depth: usize) -> Option<()> {
        for _ in 0..n {
            self.skip_at(depth + 1)?;
        }
        Some(())
    }
}

/// A walk over one msgpack value: strings read (and checked to be UTF-8), everything else
/// skipped by its length, no deeper than `max_depth` (the decoder's limit).
struct Walk {
    max_depth: usize,
}

fn walk(p: &mut Peek<'_>, w: &Walk, depth: usize) -> Option<()> {
    let m = p.peek_byte()?;
    let container = matches!(m, 0x80..=0x9f | 0xdc..=0xdf | 0xc7..=0xc9 | 0xd4..=0xd8);
    if container && depth >= w.max_depth {
        return None;
    }
    match m {
        0xa0..=0xbf | 0xd9..=0xdb => p.str().map(drop),
        0x90..=0x9f | 0xdc | 0xdd => {
            for _ in 0..p.array_len()? {
                walk(p, w, depth + 1)?;
            }
            Some(())
        }
        0x80..=0x8f | 0xde | 0xdf => {
            for _ in 0..p.map_len()? {
                walk(p, w, depth + 1)?;
                walk(p, w, depth + 1)?;
            }
            Some(())
        }
        0xc7..=0xc9 | 0xd4..=0xd8 => {
            let (code, payload) = p.ext()?;
            // LangGraph's own ext types carry msgpack, which the decoder checks too.
            if (0..=7).contains(&code) && !is_whole(payload, w.max_depth - depth - 1) {
                return None;
            }
            Some(())
        }
        _ => p.skip(),
    }
}

/// Whether `bytes` hold exactly one msgpack value the decoder accepts (markers, lengths,
/// UTF-8, depth), found without decoding it. `false` says nothing about where or why: decode
/// for that.
pub(crate) fn is_whole(bytes: &[u8], max_depth: usize) -> bool {
    let mut p = Peek::new(bytes);
    walk(&mut p, &Walk { max_depth }, 0).is_some() && p.position() == bytes.len()
}

#[cfg(test)]
mod tests {
    use crate::value;
    use crate::{Ext, ExtCode, Value, encode};

    /// A LangChain `HumanMessage` as Python stores it.
    fn human(content: &str, id: &str) -> Value {
        Value::Ext(Ext::python(
            ExtCode::PydanticV2,
            "langchain_core.messages.human",
            "HumanMessage",
            value!({"content": content, "additional_kwargs": {}, "response_metadata": {}, "type": "human", "name": null, "id": id}),
        ))
    }

    #[test]
    fn reads_the_fields_a_full_decode_reads() {
        let mut m = value!({"content": "x", "nested": {"a": [1, 2.5, null, true, "s"]}});
        if let Value::Map(map) = &mut m {
            map.insert("blob", Value::Bytes(vec![7; 300]));
            map.insert("big", "y".repeat(70_000));
            map.insert("id", "the-id");
        }
        let ext = Ext::python(
            ExtCode::PydanticV2,
            "langchain_core.messages.ai",
            "AIMessage",
            m,
        );
        assert_eq!(ext.py_class(), Some("AIMessage"));
        assert_eq!(ext.py_data_str("id"), Some("the-id"));
        assert_eq!(ext.py_data_str("content"), Some("x"));
        assert_eq!(ext.py_data_str("missing"), None);
        let msg = human("hi", "h1");
        let Value::Ext(e) = msg else { panic!("an ext") };
        assert_eq!(e.py_data_str("id"), Some("h1"));
        assert_eq!(e.py_data_str("type"), Some("human"));
    }

    /// `is_whole` never accepts what the decoder refuses: checked on every one-byte change of
    /// values with many strings, nested containers and ext payloads.
    #[test]
    fn the_walks_agree_with_the_decoder() {
        use crate::{DecodeLimits, decode_with_limits};
        let msg = human("hi", "h1");
        let samples = [
            value!({"messages": ["a", "bb", "ccc", "dddd", "é", "f", "g", "h", "i"], "n": [1, {"k": "v"}]}),
            value!([[["x"]], {"y": ["z", null, true, 1.5]}, "w", "v", "u", "t", "s", "r"]),
            Value::from(vec![msg.clone(), msg, Value::from("tail")]),
        ];
        let limits = DecodeLimits::default();
        for v in samples {
            let good = encode(&v);
            assert_eq!(decode_with_limits(&good, limits).unwrap(), v);
            for i in 0..good.len() {
                for b in [
                    0x00,
                    0x7f,
                    0x91,
                    0xa1,
                    0xc1,
                    0xc7,
                    0xd4,
                    0xdc,
                    0xff,
                    good[i] ^ 1,
                ] {
                    let mut bad = good.clone();
                    bad[i] = b;
                    let decoded = decode_with_limits(&bad, limits);
                    if super::is_whole(&bad, limits.max_depth) {
                        assert!(
                            decoded.is_ok(),
                            "accepted what the decoder refuses: {bad:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_or_foreign_bytes_read_as_nothing() {
        let bytes = encode(&value!(["m", "C", {"id": "x"}]));
        for cut in 0..bytes.len() {
            let ext = Ext::from_raw(5, bytes[..cut].to_vec());
            assert_eq!(ext.py_data_str("id"), None, "cut at {cut}");
        }
        assert_eq!(Ext::from_raw(5, bytes).py_data_str("id"), Some("x"));
        assert_eq!(
            Ext::from_raw(7, encode(&value!(["m", "C", {"id": "x"}]))).py_class(),
            None
        );
    }
}
