//! Python's rich types against Python itself (`py` module): for each of `datetime` (UTC, with
//! an offset, naive), `date`, `time`, `timedelta`, `UUID`, `Decimal`, `set`, `frozenset` and
//! two `Enum` members, the bytes Python LangGraph's serializer writes decode into the Rust
//! type and encode back to the *same bytes*; and what we write, Python reads as an object
//! equal to its own.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`); fails, never skips, without
//! it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use stategraph_checkpoint::{JsonPlusSerializer, Serializer, Value};
use stategraph_testkit::python::run_python_json;
use stategraph_value::py::{PyDecimal, PyType};

const SCRIPT: &str = r#"
import datetime, decimal, enum, json, sys, uuid
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

class Color(enum.Enum):
    RED = "red"
    BLUE = 2

tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
CASES = {
    "dt_utc": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
    "dt_offset": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tz),
    "dt_naive": datetime.datetime(2024, 1, 2, 3, 4, 5),
    "date": datetime.date(2024, 2, 29),
    "time": datetime.time(13, 14, 15, 16),
    "timedelta": datetime.timedelta(days=-1, seconds=5, microseconds=7),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": decimal.Decimal("-12.3400"),
    "set": {1, 2, 3},
    "frozenset": frozenset(["a"]),
    "enum_str": Color.RED,
    "enum_int": Color.BLUE,
}
serde = JsonPlusSerializer()
if sys.argv[1] == "dump":
    json.dump({k: serde.dumps_typed(v)[1].hex() for k, v in CASES.items()}, sys.stdout)
else:
    ours = json.load(sys.stdin)
    out = {}
    for k, hexed in ours.items():
        got = serde.loads_typed(("msgpack", bytes.fromhex(hexed)))
        out[k] = [got == CASES[k] and type(got) is type(CASES[k]), repr(got)]
    json.dump(out, sys.stdout)
"#;

fn python(mode: &str, input: &str) -> serde_json::Value {
    run_python_json(["-c", SCRIPT, mode], input)
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Color {
    #[serde(rename = "red")]
    Red,
}
stategraph_value::py_enum!(Color, "__main__", "Color");

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Blue(i64);
stategraph_value::py_enum!(Blue, "__main__", "Color");

/// Decodes Python's value into `T`, re-encodes it, and returns our bytes.
fn round_trip<T: PyType + PartialEq + std::fmt::Debug>(name: &str, python: &[u8]) -> Vec<u8> {
    let serde = JsonPlusSerializer::new();
    let value = serde.loads_typed("msgpack", python).unwrap();
    let rust = T::from_py(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = rust.to_py().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(T::from_py(&back).unwrap(), rust, "{name}");
    serde.dumps_typed(&back).unwrap().1
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rich_types_match_python_byte_for_byte_both_ways() {
    let theirs: BTreeMap<String, String> = serde_json::from_value(python("dump", "")).unwrap();
    let mut ours = BTreeMap::new();
    for (name, hexed) in &theirs {
        let bytes = unhex(hexed);
        let mine = match name.as_str() {
            "dt_utc" => round_trip::<DateTime<Utc>>(name, &bytes),
            "dt_offset" => round_trip::<DateTime<FixedOffset>>(name, &bytes),
            "dt_naive" => round_trip::<NaiveDateTime>(name, &bytes),
            "date" => round_trip::<NaiveDate>(name, &bytes),
            "time" => round_trip::<NaiveTime>(name, &bytes),
            "timedelta" => round_trip::<TimeDelta>(name, &bytes),
            "uuid" => round_trip::<uuid::Uuid>(name, &bytes),
            "decimal" => round_trip::<PyDecimal>(name, &bytes),
            "set" => round_trip::<BTreeSet<i64>>(name, &bytes),
            "frozenset" => {
                // Read as a set; we write `set`, which Python reads as an equal set but not as
                // a frozenset, so this one is checked on our side only.
                let v = JsonPlusSerializer::new()
                    .loads_typed("msgpack", &bytes)
                    .unwrap();
                let s = BTreeSet::<String>::from_py(&v).unwrap();
                assert_eq!(s, BTreeSet::from(["a".to_owned()]));
                continue;
            }
            "enum_str" => round_trip::<Color>(name, &bytes),
            "enum_int" => round_trip::<Blue>(name, &bytes),
            other => panic!("no Rust type for the case {other}"),
        };
        assert_eq!(hex(&mine), *hexed, "{name}: our bytes differ from Python's");
        ours.insert(name.clone(), hex(&mine));
    }
    assert_eq!(ours.len(), 11);

    // Python reads what we wrote as objects equal to (and of the type of) its own.
    let verdicts = python("check", &serde_json::to_string(&ours).unwrap());
    for (name, verdict) in verdicts.as_object().unwrap() {
        assert_eq!(verdict[0], true, "{name}: Python read {}", verdict[1]);
    }
}

#[test]
fn finer_than_microseconds_is_an_error_not_a_truncation() {
    let t = NaiveTime::from_hms_nano_opt(1, 2, 3, 4_000_001).unwrap();
    let err = t.to_py().unwrap_err().to_string();
    assert!(err.contains("microseconds"), "{err}");
    let d = TimeDelta::nanoseconds(1);
    assert!(d.to_py().is_err());
    let naive = NaiveDateTime::parse_from_str("2024-01-02T03:04:05", "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .to_py()
        .unwrap();
    let err = DateTime::<FixedOffset>::from_py(&naive)
        .unwrap_err()
        .to_string();
    assert!(err.contains("naive"), "{err}");
}

#[test]
fn typed_fields_serialize_in_python_form() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Order {
        #[serde(with = "stategraph_value::py")]
        id: uuid::Uuid,
        #[serde(with = "stategraph_value::py")]
        placed: DateTime<Utc>,
        lines: Vec<stategraph_value::py::Py<PyDecimal>>,
    }
    let order = Order {
        id: uuid::Uuid::from_u128(7),
        placed: DateTime::parse_from_rfc3339("2024-05-06T07:08:09Z")
            .unwrap()
            .to_utc(),
        lines: vec![stategraph_value::py::Py(PyDecimal::new("9.99").unwrap())],
    };
    let bytes = rmp_serde::to_vec_named(&order).unwrap();
    let value = stategraph_value::decode(&bytes).unwrap();
    let Value::Map(m) = &value else { panic!() };
    assert_eq!(
        m.get("placed").unwrap().to_string(),
        "datetime.datetime(\"2024-05-06T07:08:09+00:00\")"
    );
    let back: Order = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(back, order);
}
