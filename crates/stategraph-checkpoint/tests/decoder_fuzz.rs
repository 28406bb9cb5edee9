//! Bounded fuzzing of the decoder and of checkpoint loading (runs in CI in seconds): random
//! bytes and mutated valid checkpoints must give an error or a value — never a panic, never
//! unbounded memory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use stategraph_checkpoint::{
    Checkpoint, CheckpointId, JsonPlusSerializer, Serializer, Value, value,
};
use stategraph_value::{decode, encode};

fn sample_checkpoint() -> Vec<u8> {
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(3);
    cp.channel_values.insert(
        "messages".into(),
        value!([{"type": "human", "content": "hello", "id": "1"}]),
    );
    cp.channel_values.insert(
        "when".into(),
        Value::py_datetime("2024-01-02T03:04:05+00:00"),
    );
    cp.channel_values.insert("n".into(), Value::Int(7));
    cp.channel_versions
        .insert("messages", "00000000000000000000000000000003.0.5".into());
    cp.versions_seen
        .insert("agent", cp.channel_versions.clone());
    cp.updated_channels = Some(vec!["messages".into()]);
    encode(&cp.to_value())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn mutated_checkpoints_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = sample_checkpoint();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let end = cut.index(bytes.len() + 1).max(1).min(bytes.len());
        let s = JsonPlusSerializer::new();
        if let Ok(v) = s.loads_typed("msgpack", &bytes[..end]) {
            let _ = Checkpoint::from_value(v);
        }
    }
}

#[test]
fn a_megabyte_of_random_bytes_is_an_error_not_a_crash() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..4 {
        let bytes: Vec<u8> = (0..1 << 20).map(|_| rng.u8(..)).collect();
        // Random bytes almost never form exactly one value with nothing left over; whatever
        // happens must be a clean result.
        let _ = decode(&bytes);
    }
    // Hostile length prefixes on a megabyte of zeros: no allocation beyond the input.
    for marker in [0xdd_u8, 0xdf, 0xc6, 0xdb, 0xc9] {
        let mut bytes = vec![marker, 0xff, 0xff, 0xff, 0xff];
        bytes.extend(std::iter::repeat_n(0u8, 1 << 20));
        assert!(decode(&bytes).is_err());
    }
}
