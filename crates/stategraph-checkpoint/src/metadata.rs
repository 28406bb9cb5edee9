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
        serde_json::from_value(json)
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
