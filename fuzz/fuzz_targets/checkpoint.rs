//! Checkpoint loading on arbitrary bytes: the stored msgpack of a checkpoint and the JSON of
//! its metadata, as the savers read them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stategraph_checkpoint::{Checkpoint, CheckpointMetadata, JsonPlusSerializer, Serializer};

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = JsonPlusSerializer::new().loads_typed("msgpack", data) {
        let _ = Checkpoint::from_value(v);
    }
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = CheckpointMetadata::from_json(json);
    }
});
