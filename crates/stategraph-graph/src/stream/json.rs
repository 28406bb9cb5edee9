//! Stream values as JSON, the way the Agent Server API and LangGraph's `stream_mode`s send them.

use super::*;

/// A map of state values as JSON, each as [`value_json`] renders it (what the Agent Server
/// API sends for a thread's values).
pub fn values_json(values: &Values) -> Json {
    Json::Object(
        values
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect(),
    )
}

/// A value as JSON, as LangGraph's server renders it: Python objects stored with their fields
/// (LangChain messages, pydantic models, dataclasses; also inside lists and maps) as the dict
/// of those fields. What the Agent Server API sends for state values.
///
/// ```
/// use stategraph_checkpoint::value;
/// use stategraph_messages::Message;
/// use stategraph_graph::stream::value_json;
/// let stored = Message::human("hi").with_id("1").to_value();
/// assert_eq!(value_json(&stored)["content"], "hi");
/// assert_eq!(value_json(&value!({"n": [1]})), serde_json::json!({"n": [1]}));
/// ```
pub fn value_json(value: &Value) -> Json {
    if let Value::Ext(ext) = value
        && let Ok(Some(object)) = ext.py_object()
        && let Value::Map(_) = object.data
    {
        return value_json(&object.data);
    }
    match value {
        Value::List(l) => Json::Array(l.iter().map(value_json).collect()),
        Value::Map(m) => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = k
                        .as_str()
                        .map_or_else(|| k.to_json().to_string(), str::to_owned);
                    (key, value_json(v))
                })
                .collect(),
        ),
        other => other.to_json(),
    }
}

/// A value as [`value_json`] renders it, written straight into a serializer: the same JSON,
/// without building a [`serde_json::Value`] tree first (no allocation per string, list or
/// map). For answers that carry many states (a thread's history).
///
/// ```
/// use stategraph_checkpoint::value;
/// use stategraph_messages::Message;
/// use stategraph_graph::stream::{ValueJson, value_json};
/// let stored = value!({"messages": [Message::human("hi").with_id("1").to_value()]});
/// assert_eq!(
///     serde_json::to_string(&ValueJson(&stored)).unwrap(),
///     value_json(&stored).to_string()
/// );
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ValueJson<'a>(pub &'a Value);

impl serde::Serialize for ValueJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Int(i) => serializer.serialize_i64(*i),
            Value::UInt(u) => serializer.serialize_u64(*u),
            // As `serde_json::Number::from_f64`: no JSON number for NaN or infinities.
            Value::Float(f) if f.is_finite() => serializer.serialize_f64(*f),
            Value::Float(_) => serializer.serialize_unit(),
            Value::Str(s) => serializer.serialize_str(s),
            Value::List(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for item in l.iter() {
                    seq.serialize_element(&ValueJson(item))?;
                }
                seq.end()
            }
            Value::Map(m) if string_keys_once(m) => {
                let mut map = serializer.serialize_map(Some(m.len()))?;
                for (k, v) in m.iter() {
                    map.serialize_entry(k.as_str().unwrap_or_default(), &ValueJson(v))?;
                }
                map.end()
            }
            Value::Ext(ext) => match ext.py_object() {
                Ok(Some(object)) if matches!(object.data, Value::Map(_)) => {
                    ValueJson(&object.data).serialize(serializer)
                }
                _ => self.0.to_json().serialize(serializer),
            },
            // Keys that are not strings (written as their JSON text), or the same key twice
            // (one entry, at the first one's place, with the last one's value): as the tree.
            other => value_json(other).serialize(serializer),
        }
    }
}

/// Whether every key of `m` is a string and none comes twice: then its JSON object has its
/// entries one for one.
fn string_keys_once(m: &Map) -> bool {
    const SMALL: usize = 16;
    let mut keys = Vec::with_capacity(m.len().min(SMALL));
    let mut seen = std::collections::HashSet::new();
    for (k, _) in m.iter() {
        let Some(k) = k.as_str() else {
            return false;
        };
        if m.len() <= SMALL {
            if keys.contains(&k) {
                return false;
            }
            keys.push(k);
        } else if !seen.insert(k) {
            return false;
        }
    }
    true
}

/// A map of state values as [`values_json`] renders it, written straight into a serializer
/// (see [`ValueJson`]).
#[derive(Clone, Copy, Debug)]
pub struct ValuesJson<'a>(pub &'a Values);

impl serde::Serialize for ValuesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, ValueJson(v))))
    }
}

/// A graph's output as JSON: the map of its state values, or — for a graph whose output is
/// one channel as-is, an entrypoint's (`output` = [`CompiledGraph::output_channel`]) — that
/// channel's value, `null` while it has none (LangGraph's `stream_channels_asis`).
///
/// [`CompiledGraph::output_channel`]: crate::CompiledGraph::output_channel
pub fn output_json(values: &Values, output: Option<&str>) -> Json {
    match output {
        None => values_json(values),
        Some(channel) => values.get(channel).map_or(Json::Null, value_json),
    }
}

/// A graph's output as [`output_json`] renders it, written straight into a serializer.
#[derive(Clone, Copy, Debug)]
pub struct OutputJson<'a>(pub &'a Values, pub Option<&'a str>);

impl serde::Serialize for OutputJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.1 {
            None => ValuesJson(self.0).serialize(serializer),
            Some(channel) => match self.0.get(channel) {
                Some(v) => ValueJson(v).serialize(serializer),
                None => serializer.serialize_unit(),
            },
        }
    }
}
