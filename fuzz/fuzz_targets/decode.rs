//! The msgpack decoder and every serializer type tag on arbitrary bytes: a value or a typed
//! error, never a panic, a hang or unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stategraph_value::{decode, encode};
use stategraph_checkpoint::{EncryptedSerializer, JsonPlusSerializer, Serializer};

const TAGS: [&str; 7] = [
    "msgpack",
    "json",
    "bytes",
    "bytearray",
    "null",
    "empty",
    "pickle",
];

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = decode(data) {
        // What decodes re-encodes, and reads back to the same bytes (compared as bytes:
        // a NaN is not equal to itself).
        let bytes = encode(&v);
        let again = decode(&bytes).expect("re-encoded value must decode");
        assert_eq!(encode(&again), bytes);
    }
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let tag = TAGS[usize::from(selector) % TAGS.len()];
    let _ = JsonPlusSerializer::new().loads_typed(tag, rest);
    if let Ok(aes) = EncryptedSerializer::aes(b"0123456789abcdef") {
        let _ = aes.loads_typed(&format!("{tag}+aes"), rest);
    }
});
