//! PostgreSQL's `text` and `jsonb` cannot hold the character U+0000: a put or a filter that
//! carries one (a delete's key included) is the caller's error, named before anything is sent
//! (the server's own error would say only that a byte sequence is invalid, and not where). A
//! get by a key with U+0000 finds nothing: no such item can have been stored.

use serde_json::Value as Json;
use stategraph_checkpoint::store::{Op, StoreError};

/// Refuses the puts and searches of `ops` that carry U+0000, naming where.
pub(super) fn refuse_nul(ops: &[Op]) -> Result<(), StoreError> {
    for op in ops {
        match op {
            Op::Put(p) => {
                let at = if p.key.contains('\0') {
                    Some("the key".to_owned())
                } else {
                    p.value
                        .as_ref()
                        .and_then(|v| nul_at(v, "value"))
                        .map(|path| format!("`{path}`"))
                };
                if let Some(at) = at {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: format!("{at} contains U+0000, which PostgreSQL cannot store"),
                    });
                }
            }
            Op::Search(s) => {
                for (key, value) in s.filter.iter().flatten() {
                    if key.contains('\0') || nul_at(value, key).is_some() {
                        return Err(StoreError::InvalidFilter {
                            key: key.clone(),
                            reason: "contains U+0000, which PostgreSQL cannot store".into(),
                        });
                    }
                }
            }
            Op::Get(_) | Op::ListNamespaces(_) => {}
        }
    }
    Ok(())
}

/// Whether `key` can name a stored item (it cannot if it holds U+0000).
pub(super) fn storable_key(key: &str) -> bool {
    !key.contains('\0')
}

/// The path (`value.a[2]`) of the first string or object key in `value` holding U+0000.
fn nul_at(value: &Json, path: &str) -> Option<String> {
    match value {
        Json::String(s) if s.contains('\0') => Some(path.to_owned()),
        Json::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_at(v, &format!("{path}[{i}]"))),
        Json::Object(map) => map.iter().find_map(|(k, v)| {
            let here = format!("{path}.{k}");
            if k.contains('\0') {
                Some(here)
            } else {
                nul_at(v, &here)
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_nul_is_named_by_its_path() {
        assert_eq!(
            nul_at(&json!({"a": [1, "ok", "x\u{0}"]}), "value"),
            Some("value.a[2]".into())
        );
        assert_eq!(
            nul_at(&json!({"a\u{0}": 1}), "value"),
            Some("value.a\u{0}".into())
        );
        assert_eq!(nul_at(&json!({"a": {"b": "fine"}}), "value"), None);
    }
}
