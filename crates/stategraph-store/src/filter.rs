//! Search filters: `{"field": value}` and `{"field": {"$op": value}}`, parsed once and
//! evaluated the same way by every backend.
//!
//! Semantics (the same on every stategraph store):
//! - `{"k": scalar or array}` and `{"k": {"$eq": v}}`: the top-level field `k` equals `v`
//!   (numbers compare by value, so `1` equals `1.0`; a missing field never equals anything);
//! - `{"k": {…}}` (an object without operators): containment, as PostgreSQL's `jsonb @>`:
//!   objects contain the filter's keys recursively, arrays contain each filter element;
//! - `{"k": {"$ne": v}}`: `k` is missing or differs from `v`;
//! - `$gt $gte $lt $lte`: with a number, `k` must be a number and compares numerically; with a
//!   string, `k` must be a string and compares by bytes (code points). LangGraph's Postgres
//!   store compares these as text (so `10 > 6` is false there); stategraph never does.
//! - Several keys, or several operators on one key, must all hold.

use serde_json::{Map, Value as Json};

use super::StoreError;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `$gt`
    Gt,
    /// `$gte`
    Gte,
    /// `$lt`
    Lt,
    /// `$lte`
    Lte,
}

impl CmpOp {
    /// The SQL operator.
    pub fn sql(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Gte => ">=",
            CmpOp::Lt => "<",
            CmpOp::Lte => "<=",
        }
    }

    fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Gt => ord == Greater,
            CmpOp::Gte => ord != Less,
            CmpOp::Lt => ord == Less,
            CmpOp::Lte => ord != Greater,
        }
    }
}

/// One condition of a filter, on a top-level field of the stored value.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    /// The field equals the value.
    Eq(String, Json),
    /// The field is missing or differs from the value.
    Ne(String, Json),
    /// The field contains the object (`jsonb @>`).
    Contains(String, Json),
    /// The field is a number and compares so with this number.
    CmpNumber(String, CmpOp, f64),
    /// The field is a string and compares so with this string.
    CmpString(String, CmpOp, String),
}

/// Parses a filter into conditions (all must hold), or names the bad key and operator.
pub fn parse_filter(filter: &Map<String, Json>) -> Result<Vec<Condition>, StoreError> {
    let mut out = Vec::new();
    for (key, spec) in filter {
        let bad = |reason: String| StoreError::InvalidFilter {
            key: key.clone(),
            reason,
        };
        match spec {
            Json::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
                for (op, operand) in ops {
                    let cmp = match op.as_str() {
                        "$eq" => {
                            out.push(Condition::Eq(key.clone(), operand.clone()));
                            continue;
                        }
                        "$ne" => {
                            out.push(Condition::Ne(key.clone(), operand.clone()));
                            continue;
                        }
                        "$gt" => CmpOp::Gt,
                        "$gte" => CmpOp::Gte,
                        "$lt" => CmpOp::Lt,
                        "$lte" => CmpOp::Lte,
                        other if other.starts_with('$') => {
                            return Err(bad(format!(
                                "unknown operator `{other}` (use $eq $ne $gt $gte $lt $lte)"
                            )));
                        }
                        other => {
                            return Err(bad(format!(
                                "`{other}` mixed with operators; use either operators or a value"
                            )));
                        }
                    };
                    match operand {
                        Json::Number(n) => out.push(Condition::CmpNumber(
                            key.clone(),
                            cmp,
                            n.as_f64().unwrap_or(f64::NAN),
                        )),
                        Json::String(s) => {
                            out.push(Condition::CmpString(key.clone(), cmp, s.clone()));
                        }
                        other => {
                            return Err(bad(format!(
                                "`{op}` compares numbers or strings, not {}",
                                kind(other)
                            )));
                        }
                    }
                }
            }
            Json::Object(_) => out.push(Condition::Contains(key.clone(), spec.clone())),
            _ => out.push(Condition::Eq(key.clone(), spec.clone())),
        }
    }
    Ok(out)
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Whether `value` (a stored item's value) satisfies every condition.
pub fn matches(value: &Json, conditions: &[Condition]) -> bool {
    conditions.iter().all(|c| match c {
        Condition::Eq(k, v) => value.get(k).is_some_and(|f| json_eq(f, v)),
        Condition::Ne(k, v) => !value.get(k).is_some_and(|f| json_eq(f, v)),
        Condition::Contains(k, v) => value.get(k).is_some_and(|f| json_contains(f, v)),
        Condition::CmpNumber(k, op, n) => value
            .get(k)
            .and_then(Json::as_f64)
            .and_then(|f| f.partial_cmp(n))
            .is_some_and(|o| op.holds(o)),
        Condition::CmpString(k, op, s) => value
            .get(k)
            .and_then(Json::as_str)
            .is_some_and(|f| op.holds(f.cmp(s.as_str()))),
    })
}

/// JSON equality with numbers compared by value.
pub fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, a)| y.get(k).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

/// PostgreSQL's `jsonb @>`: does `a` contain `b`?
pub fn json_contains(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => y
            .iter()
            .all(|(k, vb)| x.get(k).is_some_and(|va| json_contains(va, vb))),
        (Json::Array(x), Json::Array(y)) => {
            y.iter().all(|eb| x.iter().any(|ea| json_contains(ea, eb)))
        }
        _ => json_eq(a, b),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(filter: Json, value: Json) -> bool {
        let f = parse_filter(filter.as_object().unwrap()).unwrap();
        matches(&value, &f)
    }

    #[test]
    fn evaluates_every_operator() {
        let v = json!({"n": 10, "s": "b", "o": {"x": 1, "y": [1, 2]}, "l": [1, 2]});
        assert!(check(json!({"n": 10.0}), v.clone()));
        assert!(check(json!({"n": {"$gt": 6}}), v.clone()));
        assert!(!check(json!({"n": {"$lt": 6}}), v.clone()));
        assert!(check(json!({"n": {"$gte": 10, "$lte": 10}}), v.clone()));
        assert!(check(json!({"s": {"$gt": "a"}}), v.clone()));
        assert!(!check(json!({"s": {"$gt": 5}}), v.clone()));
        assert!(check(json!({"missing": {"$ne": 1}}), v.clone()));
        assert!(!check(json!({"missing": 1}), v.clone()));
        assert!(check(json!({"o": {"y": [2]}}), v.clone()));
        assert!(!check(json!({"o": {"x": 2}}), v.clone()));
        assert!(check(json!({"l": [1, 2]}), v.clone()));
        assert!(!check(json!({"l": [2]}), v.clone()));
        assert!(check(json!({"o": {"$eq": {"x": 1, "y": [1, 2]}}}), v));
    }

    #[test]
    fn names_bad_operators() {
        for bad in [
            json!({"n": {"$in": [1]}}),
            json!({"n": {"$gt": true}}),
            json!({"n": {"$gt": 1, "x": 2}}),
        ] {
            let err = parse_filter(bad.as_object().unwrap()).unwrap_err();
            assert!(
                matches!(&err, StoreError::InvalidFilter { key, .. } if key == "n"),
                "{err}"
            );
        }
    }
}
