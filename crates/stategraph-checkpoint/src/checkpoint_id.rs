//! `CheckpointId`: a checkpoint's id, as LangGraph writes and orders it.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The id of a checkpoint: the string LangGraph stores (a UUID v6 made from the time and the
/// step, e.g. `1f0a9c6e-4b7d-6b2e-8001-5e3c2a1b0f9d`), in a type of its own so that it is not
/// confused with a thread id, a task id or any other string.
///
/// It keeps LangGraph's string form exactly — any string read from a database is a valid
/// id, since other writers may have made it — and LangGraph's order: ids compare as strings,
/// which for the ids LangGraph and stategraph make is the order they were made in (the
/// newest checkpoint of a thread is the greatest id). It reads as a `&str` where one is
/// wanted, and compares with strings:
///
/// ```
/// use stategraph_checkpoint::CheckpointId;
///
/// let first = CheckpointId::for_step(0);
/// let second = CheckpointId::for_step(1);
/// assert!(first < second);
/// let parsed: CheckpointId = second.to_string().parse().unwrap();
/// assert_eq!(parsed, second);
/// assert_eq!(parsed, second.as_str());
/// assert_eq!(serde_json::to_value(&parsed).unwrap(), serde_json::json!(second.as_str()));
/// ```
///
/// Its text is shared: a clone (every tuple, config and snapshot that names the checkpoint
/// holds one) is a reference count, not a copy.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CheckpointId(Arc<str>);

impl Serialize for CheckpointId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CheckpointId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

impl CheckpointId {
    /// A new id for a checkpoint of `step`, made as LangGraph makes them (see
    /// [`checkpoint_id`](crate::checkpoint_id)): greater than every id made before it in
    /// this process.
    pub fn for_step(step: i64) -> Self {
        Self(crate::checkpoint_id(step).into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as a `String`.
    pub fn into_string(self) -> String {
        self.0.to_string()
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Deref for CheckpointId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for CheckpointId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for CheckpointId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for CheckpointId {
    fn from(id: String) -> Self {
        Self(id.into())
    }
}

impl From<&str> for CheckpointId {
    fn from(id: &str) -> Self {
        Self(id.into())
    }
}

impl From<&String> for CheckpointId {
    fn from(id: &String) -> Self {
        Self(id.as_str().into())
    }
}

impl From<Arc<str>> for CheckpointId {
    fn from(id: Arc<str>) -> Self {
        Self(id)
    }
}

impl From<&CheckpointId> for CheckpointId {
    fn from(id: &CheckpointId) -> Self {
        id.clone()
    }
}

impl From<CheckpointId> for String {
    fn from(id: CheckpointId) -> Self {
        id.0.to_string()
    }
}

impl std::str::FromStr for CheckpointId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.into()))
    }
}

impl PartialEq<str> for CheckpointId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for CheckpointId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for CheckpointId {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<CheckpointId> for str {
    fn eq(&self, other: &CheckpointId) -> bool {
        *self == *other.0
    }
}

impl PartialEq<CheckpointId> for &str {
    fn eq(&self, other: &CheckpointId) -> bool {
        **self == *other.0
    }
}

impl PartialEq<CheckpointId> for String {
    fn eq(&self, other: &CheckpointId) -> bool {
        **self == *other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_langgraph_does() {
        let ids: Vec<CheckpointId> = (-1..20).map(CheckpointId::for_step).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "made in order, sorted in order");
        // The string order, also for ids another writer made.
        let a = CheckpointId::from("1f0a9c6e-0000-6000-8000-000000000000");
        let b = CheckpointId::from("1f0a9c6f-0000-6000-8000-000000000000");
        assert!(a < b);
        assert_eq!(a.as_str().cmp(b.as_str()), a.cmp(&b));
    }

    #[test]
    fn keeps_the_string_form() {
        let raw = "not-a-uuid-but-stored";
        let id: CheckpointId = raw.parse().unwrap_or_default();
        assert_eq!(id, raw);
        assert_eq!(raw, id);
        assert_eq!(id.to_string(), raw);
        assert_eq!(format!("{id:?}"), format!("{raw:?}"));
        assert_eq!(String::from(id.clone()), raw);
        let map: std::collections::BTreeMap<CheckpointId, u8> = [(id, 1)].into_iter().collect();
        assert_eq!(map.get(raw), Some(&1)); // looked up by &str
    }
}
