//! PostgreSQL's `text` and `jsonb` cannot hold the character U+0000: finding it in what is
//! about to be sent, so that the saver and the store can answer for it themselves.

use serde_json::Value as Json;

/// The path (`value.a[2]`) of the first string or object key in `value` holding U+0000.
pub(crate) fn nul_at(value: &Json, path: &str) -> Option<String> {
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
