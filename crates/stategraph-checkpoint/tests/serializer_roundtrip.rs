//! Property tests: the serializer round-trips arbitrary values byte for byte, the decoder
//! never panics on arbitrary bytes, and checkpoint ids sort in creation order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use stategraph_checkpoint::{Ext, JsonPlusSerializer, Map, Serializer, Value, checkpoint_id};
use stategraph_value::{decode, encode};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(Value::UInt),
        any::<f64>()
            .prop_filter("NaN never equals itself", |f| !f.is_nan())
            .prop_map(Value::Float),
        ".{0,40}".prop_map(Value::from),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
        (any::<i8>(), proptest::collection::vec(any::<u8>(), 0..300))
            .prop_filter("LangGraph ext codes carry msgpack", |(c, _)| !(0..=7)
                .contains(c))
            .prop_map(|(c, d)| Value::Ext(Ext::from_raw(c, d))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 256, 12, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::from),
            proptest::collection::vec((".{0,12}", inner.clone()), 0..12)
                .prop_map(|kv| { Value::Map(kv.into_iter().collect::<Map>()) }),
            proptest::collection::vec((any::<i64>(), inner.clone()), 0..6)
                .prop_map(|kv| Value::Map(kv.into_iter().collect::<Map>())),
            inner.prop_map(|v| Value::Ext(Ext::delta_snapshot(&v))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn serializer_round_trips(v in value()) {
        let s = JsonPlusSerializer::new();
        let (tag, bytes) = s.dumps_typed(&v).unwrap();
        let back = s.loads_typed(&tag, &bytes).unwrap();
        prop_assert_eq!(&back, &v);
        // Re-encoding what was read gives the very same bytes.
        prop_assert_eq!(s.dumps_typed(&back).unwrap(), (tag, bytes));
    }

    #[test]
    fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(v) = decode(&bytes) {
            // Whatever decodes, re-encodes to a value that decodes to the same thing.
            prop_assert_eq!(decode(&encode(&v)).unwrap(), v);
        }
    }

    #[test]
    fn truncation_is_an_error_never_a_panic(v in value(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&v);
        let n = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..n]).is_err());
    }

    #[test]
    fn checkpoint_ids_sort_in_creation_order(steps in proptest::collection::vec(-2i64..20, 2..200)) {
        // Many ids inside the same millisecond (and the same 100 ns tick): strictly increasing.
        let ids: Vec<String> = steps.iter().map(|s| checkpoint_id(*s)).collect();
        for w in ids.windows(2) {
            prop_assert!(w[0] < w[1], "{} !< {}", w[0], w[1]);
        }
    }
}

#[test]
fn ids_from_many_threads_are_unique_and_ordered_per_thread() {
    let handles: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| (0..2000).map(|i| checkpoint_id(i % 7)).collect::<Vec<_>>()))
        .collect();
    let mut all = Vec::new();
    for h in handles {
        let ids = h.join().unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        all.extend(ids);
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "ids are unique across threads");
}
