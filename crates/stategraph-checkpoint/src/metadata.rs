//! Checkpoint metadata: how a checkpoint came to be.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// Why a checkpoint was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointSource {
    /// From the input of `invoke`/`stream`.
    Input,
    /// By the Pregel loop after a super-step.
    Loop,
    /// By `update_state`.
    Update,
    /// A copy of another checkpoint (replay from the past, or `as_node="__copy__"`).
    Fork,
}

impl CheckpointSource {
    /// The name LangGraph stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Loop => "loop",
            Self::Update => "update",
            Self::Fork => "fork",
        }
    }
}

impl fmt::Display for CheckpointSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// LangGraph's `CheckpointMetadata`: `source`, `step`, `parents`, plus any other keys (such as
/// `run_id` or keys copied from the run's config), kept in order.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Why the checkpoint was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CheckpointSource>,
    /// −1 for the first input checkpoint, then +1 per super-step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// Namespace → checkpoint id of the enclosing graphs (`{}` at the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parents: Option<BTreeMap<String, String>>,
    /// Every other key, in stored order.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Json>,
}

impl CheckpointMetadata {
    /// Metadata with `source`, `step` and empty `parents`, as LangGraph writes at the root.
    pub fn new(source: CheckpointSource, step: i64) -> Self {
        Self {
            source: Some(source),
            step: Some(step),
            parents: Some(BTreeMap::new()),
            extra: serde_json::Map::new(),
        }
    }

    /// Adds a free key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Json>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The `run_id` key, if it is a string.
    pub fn run_id(&self) -> Option<&str> {
        self.extra.get("run_id").and_then(Json::as_str)
    }

    /// The whole metadata as a JSON object.
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self).unwrap_or(Json::Null)
    }

    /// Reads metadata from a JSON object.
    pub fn from_json(json: Json) -> Result<Self, serde_json::Error> {
        match Direct::deserialize(&json) {
            Ok(Direct(metadata)) => Ok(metadata),
            // Whatever the direct way does not take, serde's derived way reads, or says
            // what is wrong.
            Err(_) => serde_json::from_value(json),
        }
    }

    /// Reads metadata from JSON text: the same as parsing it and
    /// [`from_json`](Self::from_json), without building the JSON object first.
    ///
    /// ```
    /// use stategraph_checkpoint::{CheckpointMetadata, CheckpointSource};
    /// let m = CheckpointMetadata::from_json_text(r#"{"source": "loop", "step": 2, "parents": {}}"#)?;
    /// assert_eq!((m.source, m.step), (Some(CheckpointSource::Loop), Some(2)));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn from_json_text(text: &str) -> Result<Self, serde_json::Error> {
        match serde_json::from_str::<Direct>(text) {
            Ok(Direct(metadata)) => Ok(metadata),
            Err(_) => Self::from_json(serde_json::from_str(text)?),
        }
    }

    /// Whether every key of `filter` has an equal value here (LangGraph's `list` metadata
    /// filter). As in LangGraph, a `null` in the filter also matches a missing key.
    pub fn matches(&self, filter: &serde_json::Map<String, Json>) -> bool {
        if filter.is_empty() {
            return true;
        }
        let Json::Object(me) = self.to_json() else {
            return false;
        };
        filter.iter().all(|(k, want)| match me.get(k) {
            Some(have) => json_eq(have, want),
            None => want.is_null(),
        })
    }

    /// The bytes Python's `json.dumps(metadata, ensure_ascii=False)` writes: default `", "`
    /// and `": "` separators, non-ASCII text as UTF-8. This is how the SQLite saver stores it.
    pub fn to_python_json_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
        // Serializing plain JSON data into a Vec cannot fail.
        let _ = self.serialize(&mut ser);
        out
    }
}

/// Numbers compare by value (`1 == 1.0`, as in Python); everything else structurally.
fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Metadata read the direct way: one pass over the object, the known keys into their fields,
/// every other key into `extra`, in order. (The derived `Deserialize` flattens `extra`,
/// which buffers every key and value once more.) It fails on anything unusual, such as a
/// known key of the wrong type; the derived way then reads it, and words the error.
struct Direct(CheckpointMetadata);

impl<'de> Deserialize<'de> for Direct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Direct;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("checkpoint metadata")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Direct, A::Error> {
                let mut m = CheckpointMetadata::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    match &*key {
                        "source" => m.source = map.next_value()?,
                        "step" => m.step = map.next_value()?,
                        "parents" => m.parents = map.next_value()?,
                        _ => {
                            m.extra.insert(key.into_owned(), map.next_value()?);
                        }
                    }
                }
                Ok(Direct(m))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A key as the input holds it where it can (no escapes), else copied.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> serde::de::Visitor<'de> for Text {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(s.into()))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(s.to_owned().into()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(s.into()))
            }
        }
        d.deserialize_str(Text)
    }
}

/// `serde_json` formatter with Python's default `json.dumps` separators.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_bytes() {
        let m = CheckpointMetadata::new(CheckpointSource::Input, -1);
        assert_eq!(
            String::from_utf8(m.to_python_json_bytes()).unwrap(),
            r#"{"source": "input", "step": -1, "parents": {}}"#
        );
        let m = m
            .with("note", "héllo")
            .with("list", serde_json::json!([1, 2]));
        assert_eq!(
            String::from_utf8(m.to_python_json_bytes()).unwrap(),
            r#"{"source": "input", "step": -1, "parents": {}, "note": "héllo", "list": [1, 2]}"#
        );
    }

    #[test]
    fn reading_directly_agrees_with_serde() {
        let cases = [
            serde_json::json!({"source": "loop", "step": 3, "parents": {"a": "1"}, "z": 1, "b": [2]}),
            serde_json::json!({"b": 1, "source": null, "step": null, "parents": null, "a": "x"}),
            serde_json::json!({}),
            serde_json::json!({"step": 9_223_372_036_854_775_807_i64, "writes": {"n": {"k": 1}}}),
        ];
        for json in cases {
            let serde: CheckpointMetadata = serde_json::from_value(json.clone()).unwrap();
            let keys = |m: &CheckpointMetadata| m.extra.keys().cloned().collect::<Vec<_>>();
            for direct in [
                CheckpointMetadata::from_json(json.clone()).unwrap(),
                CheckpointMetadata::from_json_text(&json.to_string()).unwrap(),
            ] {
                assert_eq!(direct, serde, "{json}");
                assert_eq!(keys(&direct), keys(&serde), "{json}");
            }
        }
        // What the direct way does not take still fails as serde says.
        for bad in [
            serde_json::json!({"source": "sideways"}),
            serde_json::json!({"step": 1.5}),
            serde_json::json!({"step": "3"}),
            serde_json::json!({"parents": {"a": 1}}),
            serde_json::json!([1]),
        ] {
            let want = serde_json::from_value::<CheckpointMetadata>(bad.clone()).unwrap_err();
            let text = CheckpointMetadata::from_json_text(&bad.to_string()).unwrap_err();
            let got = CheckpointMetadata::from_json(bad).unwrap_err();
            assert_eq!(got.to_string(), want.to_string());
            assert_eq!(text.to_string(), want.to_string());
        }
    }

    #[test]
    fn filter_matching() {
        let m = CheckpointMetadata::new(CheckpointSource::Loop, 3).with("score", 42);
        let f = |j: Json| j.as_object().cloned().unwrap();
        assert!(m.matches(&f(serde_json::json!({"source": "loop", "step": 3}))));
        assert!(m.matches(&f(serde_json::json!({"score": 42.0}))));
        assert!(!m.matches(&f(serde_json::json!({"source": "input"}))));
        assert!(m.matches(&f(serde_json::json!({"missing": null}))));
        assert!(!m.matches(&f(serde_json::json!({"missing": 1}))));
    }
}
