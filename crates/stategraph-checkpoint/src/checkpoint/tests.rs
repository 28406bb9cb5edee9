use super::*;
use crate::serializer::{JsonPlusSerializer, Serializer};
use stategraph_value::{DecodeCache, encode};

/// A checkpoint with every field set, version kinds mixed, and a key this version does
/// not know.
fn full() -> Checkpoint {
    let mut cp = Checkpoint::empty();
    let long = "a message long enough for the cache to share it between checkpoints";
    let messages: Vec<Value> = (0..12).map(|i| format!("{long} {i}").into()).collect();
    cp.channel_values
        .insert("messages".into(), Value::from(messages));
    cp.channel_values.insert("count".into(), Value::Int(3));
    cp.channel_versions
        .insert("messages", "00000000000000000000000000000002.0.5".into());
    cp.channel_versions.insert("count", ChannelVersion::Int(7));
    cp.channel_versions
        .insert("float", ChannelVersion::Float(2.5));
    cp.versions_seen.insert(
        "node",
        ChannelVersions::from([("messages", ChannelVersion::Int(1))]),
    );
    cp.versions_seen.insert("other", ChannelVersions::new());
    cp.updated_channels = Some(vec!["messages".into()]);
    cp.pending_sends = Some(vec![Value::Int(1)]);
    cp.extra.push(("future_key".into(), Value::Int(9)));
    cp
}

/// What the serializer's direct read gives, and what decoding in full then reading the
/// value gives (the reference), for `bytes`.
fn both(serde: &JsonPlusSerializer, bytes: &[u8]) -> [Result<Checkpoint, SerdeError>; 2] {
    let direct = serde.loads_checkpoint("msgpack", bytes, None);
    let full = serde
        .loads_typed("msgpack", bytes)
        .and_then(Checkpoint::from_value);
    [direct, full]
}

#[test]
fn reading_directly_agrees_with_decoding_in_full() {
    let serde = JsonPlusSerializer::permissive();
    let bytes = encode(&full().to_value());
    let [direct, reference] = both(&serde, &bytes);
    assert_eq!(direct.unwrap(), reference.unwrap());
    // Keys the reader does not expect where it expects them, repeated keys, other
    // kinds of values: the two ways still agree (here both fail or both read).
    let odd = [
        crate::value!({"id": "x", "channel_values": {"a": 1}, "channel_values": {"b": 2}}),
        crate::value!({"id": "x", "versions_seen": {"n": {"a": 1}}, "versions_seen": {"m": {}}}),
        crate::value!({"id": "x", "channel_versions": {"a": [1]}}),
        crate::value!({"id": "x", "versions_seen": {"n": 1}}),
        crate::value!({"id": "x", "channel_values": [1]}),
        crate::value!({"id": 5}),
        crate::value!({"v": 4}),
        crate::value!([1, 2]),
        Value::Map([(Value::Int(1), Value::Int(2))].into_iter().collect()),
        crate::value!({"id": "x", "channel_values": {"a": {"deep": [[[]]]}}}),
    ];
    for value in odd {
        let [direct, reference] = both(&serde, &encode(&value));
        assert_eq!(direct, reference, "{value}");
    }
}

#[test]
fn damaged_bytes_fail_as_a_full_decode_fails() {
    // Cut short at every offset, and every byte in turn replaced: the direct read gives
    // exactly the full decode's checkpoint or error (its byte offset and path included).
    let serde = JsonPlusSerializer::permissive();
    let bytes = encode(&full().to_value());
    for cut in 0..bytes.len() {
        let [direct, reference] = both(&serde, &bytes[..cut]);
        assert_eq!(direct, reference, "cut at {cut}");
    }
    for at in 0..bytes.len() {
        for b in [0xc1, 0x00, 0xff, 0xa3, 0x81] {
            let mut damaged = bytes.clone();
            damaged[at] = b;
            let [direct, reference] = both(&serde, &damaged);
            assert_eq!(direct, reference, "byte {at} set to {b:#x}");
        }
    }
}

#[test]
fn reading_directly_keeps_limits_and_the_allowlist() {
    for nested in [
        crate::value!({"id": "x", "channel_values": {"a": [[[[1]]]]}}),
        crate::value!({"id": "x", "future_key": [[[[1]]]]}),
        crate::value!({"id": "x", "versions_seen": {"n": {"a": 1}}}),
    ] {
        let bytes = encode(&nested);
        for depth in 1..8 {
            let limits = stategraph_value::DecodeLimits {
                max_depth: depth,
                max_bytes: 1 << 20,
            };
            let serde = JsonPlusSerializer::with_limits(limits);
            let [direct, reference] = both(&serde, &bytes);
            assert_eq!(direct, reference, "max depth {depth}: {nested}");
            // Whatever the full decode reads within the limit, the direct read reads
            // itself, not through the fallback.
            assert_eq!(
                Checkpoint::from_msgpack(&bytes, limits, None, None).is_some(),
                reference.is_ok(),
                "max depth {depth}: {nested}"
            );
        }
    }
    let evil = Value::Ext(stategraph_value::Ext::python(
        stategraph_value::ExtCode::ConstructorSingleArg,
        "os",
        "system",
        "rm -rf /".into(),
    ));
    let mut cp = full();
    cp.channel_values
        .insert("x".into(), Value::from(vec![evil]));
    let bytes = encode(&cp.to_value());
    let strict =
        JsonPlusSerializer::permissive().strict(stategraph_value::allowlist::Allowlist::safe());
    let [direct, reference] = both(&strict, &bytes);
    assert!(
        matches!(&direct, Err(SerdeError::Disallowed { path, .. }) if path == "channel_values.x[0]"),
        "{direct:?}"
    );
    assert_eq!(direct, reference);
}

#[test]
fn reading_directly_through_a_cache_gives_the_same_checkpoints() {
    let serde = JsonPlusSerializer::permissive();
    let mut cache = DecodeCache::new();
    let mut cp = full();
    for i in 0..5 {
        if let Some(Value::List(items)) = cp.channel_values.get("messages") {
            let mut items = items.to_vec();
            items.push(format!("a later message, number {i}, long enough to share").into());
            cp.channel_values
                .insert("messages".into(), Value::from(items));
        }
        let bytes = encode(&cp.to_value());
        let shared = serde
            .loads_checkpoint("msgpack", &bytes, Some(&mut cache))
            .unwrap();
        assert_eq!(shared, cp);
    }
    assert!(cache.reused() > 0);
}

#[test]
fn round_trip_keeps_unknown_keys() {
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("foo".into(), "a".into());
    cp.channel_versions
        .insert("foo", "00000000000000000000000000000002.0.5".into());
    cp.versions_seen.insert(
        "node",
        ChannelVersions::from([("foo", ChannelVersion::Int(1))]),
    );
    cp.updated_channels = Some(vec!["foo".into()]);
    cp.extra.push(("future_key".into(), Value::Int(9)));
    let back = Checkpoint::from_value(cp.to_value()).unwrap();
    assert_eq!(back, cp);
}

#[test]
fn key_order_matches_python() {
    let cp = Checkpoint::empty();
    let Value::Map(m) = cp.to_value() else {
        panic!()
    };
    let keys: Vec<_> = m
        .iter()
        .map(|(k, _)| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        keys,
        [
            "v",
            "ts",
            "id",
            "channel_values",
            "channel_versions",
            "versions_seen",
            "updated_channels"
        ]
    );
}

#[test]
fn bad_shapes_name_their_path() {
    let v = crate::value!({"id": "x", "channel_versions": {"foo": [1]}});
    let err = Checkpoint::from_value(v).unwrap_err();
    assert_eq!(err.path(), Some("channel_versions.foo"));
}
