use super::*;
use stategraph_checkpoint::{Ext, ExtCode, List};
use stategraph_value::decode;

/// Written straight, each value reads as the tree `value_json` builds, byte for byte.
#[test]
fn written_straight_as_the_tree() {
    let message = Message::human("hi").with_id("1").to_value();
    let model = Value::Ext(Ext::python(
        ExtCode::PydanticV2,
        "app",
        "Model",
        stategraph_checkpoint::value!({"x": [1, 2.5, null]}),
    ));
    let wrapped_scalar = Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        "uuid",
        "UUID",
        Value::from("0123"),
    ));
    let delta = Value::Ext(Ext::delta_snapshot(&Value::from(vec![Value::from(1)])));
    let unknown = Value::Ext(Ext::from_raw(42, vec![1, 2, 3]));
    let mut odd_keys = Map::new();
    odd_keys.insert(Value::Int(1), "one");
    odd_keys.insert(Value::Bool(true), "yes");
    odd_keys.insert("s", Value::Float(f64::NAN));
    // The same key twice, as only decoded bytes can hold it: {"a": 1, "b": 0, "a": 2}.
    let twice = decode(&[0x83, 0xa1, b'a', 1, 0xa1, b'b', 0, 0xa1, b'a', 2]).unwrap();
    let mut big = Map::new();
    for i in 0..40 {
        big.insert(format!("k{i}"), i);
    }
    let big_twice = {
        let mut bytes = vec![0xde, 0, 41];
        for i in 0..41 {
            let key = format!("k{}", i % 40);
            bytes.push(0xa0 | u8::try_from(key.len()).unwrap());
            bytes.extend_from_slice(key.as_bytes());
            bytes.push(u8::try_from(i).unwrap());
        }
        decode(&bytes).unwrap()
    };
    let values = [
        Value::Null,
        Value::Bool(false),
        Value::Int(-7),
        Value::UInt(u64::MAX),
        Value::Float(0.1),
        Value::Float(1.0),
        Value::Float(f64::INFINITY),
        Value::from("quote \" and \u{1F600} and \n"),
        Value::Bytes(vec![0, 255]),
        Value::List(List::from(vec![message.clone(), model.clone()])),
        stategraph_checkpoint::value!({"nested": {"list": [[], {}], "s": "x"}}),
        message,
        model,
        wrapped_scalar,
        delta,
        unknown,
        Value::Map(odd_keys),
        twice,
        Value::Map(big),
        big_twice,
    ];
    for v in &values {
        let tree = value_json(v);
        assert_eq!(
            serde_json::to_string(&ValueJson(v)).unwrap(),
            tree.to_string(),
            "{v}"
        );
        assert_eq!(serde_json::to_value(ValueJson(v)).unwrap(), tree, "{v}");
    }
    let state: Values = values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("key{i:02}"), v.clone()))
        .collect();
    assert_eq!(
        serde_json::to_string(&ValuesJson(&state)).unwrap(),
        values_json(&state).to_string()
    );
}
