//! Channel versions and LangGraph's `get_next_version`.

use std::cmp::Ordering;
use std::fmt;

use stategraph_value::Value;

/// A channel's version. Every saver LangGraph ships writes strings of the form
/// `"00000000000000000000000000000003.0.958608603246375"` (a 32-digit counter, then a random
/// fraction); integers and floats are accepted on read, as LangGraph's conformance suite uses
/// them.
#[derive(Clone, Debug)]
pub enum ChannelVersion {
    /// An integer version.
    Int(i64),
    /// A float version.
    Float(f64),
    /// A string version (the normal case).
    Str(std::sync::Arc<str>),
}

pub use crate::version_map::ChannelVersions;

impl ChannelVersion {
    /// The integer counter of the version: the number itself, or the part of a string before
    /// its first `.` (0 if that is not a number).
    pub fn counter(&self) -> i64 {
        match self {
            ChannelVersion::Int(i) => *i,
            // Truncation toward zero is what Python's int() does.
            ChannelVersion::Float(f) => *f as i64,
            ChannelVersion::Str(s) => s
                .split('.')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
        }
    }

    /// The version as the text a blob table keys it by ([`Display`](fmt::Display)'s
    /// text): a string version's own, borrowed.
    pub(crate) fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            ChannelVersion::Str(s) => std::borrow::Cow::Borrowed(s),
            other => std::borrow::Cow::Owned(other.to_string()),
        }
    }

    /// The version as a stored value.
    pub fn to_value(&self) -> Value {
        match self {
            ChannelVersion::Int(i) => Value::Int(*i),
            ChannelVersion::Float(f) => Value::Float(*f),
            ChannelVersion::Str(s) => Value::Str(s.clone()),
        }
    }

    /// Reads a version from a stored value.
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Int(i) => Some(ChannelVersion::Int(*i)),
            Value::Float(f) => Some(ChannelVersion::Float(*f)),
            Value::Str(s) => Some(ChannelVersion::Str(s.clone())),
            _ => None,
        }
    }

    /// The version as JSON (Postgres stores versions inside the checkpoint's JSONB).
    pub fn to_json(&self) -> serde_json::Value {
        self.to_value().to_json()
    }
}

impl From<i64> for ChannelVersion {
    fn from(i: i64) -> Self {
        ChannelVersion::Int(i)
    }
}
impl From<&str> for ChannelVersion {
    fn from(s: &str) -> Self {
        ChannelVersion::Str(s.into())
    }
}
impl From<String> for ChannelVersion {
    fn from(s: String) -> Self {
        ChannelVersion::Str(s.into())
    }
}

impl fmt::Display for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelVersion::Int(i) => write!(f, "{i}"),
            ChannelVersion::Float(x) => write!(f, "{x:?}"),
            ChannelVersion::Str(s) => f.write_str(s),
        }
    }
}

impl Ord for ChannelVersion {
    /// Strings compare as strings and numbers as numbers, exactly as Python compares them.
    /// Python refuses to compare a string with a number; we compare their counters, then their
    /// text, so that the order stays total.
    fn cmp(&self, other: &Self) -> Ordering {
        use ChannelVersion::*;
        match (self, other) {
            (Str(a), Str(b)) => a.cmp(b),
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            // i64 → f64 is exact for every counter a checkpoint will ever reach.
            (Int(a), Float(b)) => (*a as f64).total_cmp(b),
            (Float(a), Int(b)) => a.total_cmp(&(*b as f64)),
            (a, b) => a
                .counter()
                .cmp(&b.counter())
                .then_with(|| a.to_string().cmp(&b.to_string())),
        }
    }
}
impl PartialOrd for ChannelVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for ChannelVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ChannelVersion {}

/// LangGraph's `get_next_version` for every saver it ships:
/// `f"{counter+1:032}.{random.random():016}"`.
pub fn next_version(current: Option<&ChannelVersion>) -> ChannelVersion {
    let counter = current.map_or(0, ChannelVersion::counter);
    ChannelVersion::Str(format!("{:032}.{}", counter + 1, random_fraction()).into())
}

/// The default of LangGraph's `BaseCheckpointSaver.get_next_version`, which savers that do not
/// override it (Python's `langgraph-checkpoint-mongodb`) use: integer versions, `1` first,
/// then `current + 1` (a float stays a float). Python refuses a string there; a string's
/// counter plus one is taken instead, so a thread another saver started can be continued.
pub fn next_int_version(current: Option<&ChannelVersion>) -> ChannelVersion {
    match current {
        None => ChannelVersion::Int(1),
        Some(ChannelVersion::Float(f)) => ChannelVersion::Float(f + 1.0),
        Some(v) => ChannelVersion::Int(v.counter().saturating_add(1)),
    }
}

/// A random float in `[1e-4, 1)` rendered like Python's `f"{x:016}"`. Values below `1e-4`,
/// which Python would print in exponent form, are drawn again (they occur with probability
/// 1e-4 and carry no meaning: only the counter is ever parsed).
fn random_fraction() -> String {
    loop {
        let x = fastrand::f64();
        if x >= 1e-4 {
            return format!("{:0>16}", format!("{x}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_version_format() {
        let v = next_version(None);
        let s = v.to_string();
        assert!(s.starts_with("00000000000000000000000000000001.0."), "{s}");
        assert!(s.len() >= 32 + 1 + 16);
        let v2 = next_version(Some(&v));
        assert_eq!(v2.counter(), 2);
        assert!(v2 > v);
        assert_eq!(next_version(Some(&ChannelVersion::Int(7))).counter(), 8);
        let foreign = ChannelVersion::from("00000000000000000000000000000003.0");
        assert_eq!(next_version(Some(&foreign)).counter(), 4);
    }

    #[test]
    fn ordering_matches_python() {
        assert!(ChannelVersion::Int(10) > ChannelVersion::Int(9));
        // String comparison: the zero padding makes it numeric.
        let a = ChannelVersion::from("00000000000000000000000000000010.0.1");
        let b = ChannelVersion::from("00000000000000000000000000000009.0.9");
        assert!(a > b);
    }
}
