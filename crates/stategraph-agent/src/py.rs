//! JSON rendered the way Python renders it in the texts LangGraph puts into tool messages
//! (`json.dumps`, and `repr` of the arguments in error messages), so that a model sees the
//! same text from stategraph's tools as from LangGraph's.

use serde_json::Value as Json;

/// `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators.
pub(crate) fn json_dumps(value: &Json) -> String {
    let mut out = String::new();
    write(value, &mut out, false);
    out
}

/// Python's `repr` of the value as a dict/list/str/number/bool/None.
pub(crate) fn repr(value: &Json) -> String {
    let mut out = String::new();
    write(value, &mut out, true);
    out
}

fn write(value: &Json, out: &mut String, repr: bool) {
    match value {
        Json::Null => out.push_str(if repr { "None" } else { "null" }),
        Json::Bool(b) => out.push_str(match (b, repr) {
            (true, true) => "True",
            (false, true) => "False",
            (true, false) => "true",
            (false, false) => "false",
        }),
        Json::Number(n) => out.push_str(&n.to_string()),
        Json::String(s) if repr => out.push_str(&py_str(s)),
        Json::String(s) => out.push_str(&Json::String(s.clone()).to_string()),
        Json::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(v, out, repr);
            }
            out.push(']');
        }
        Json::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if repr {
                    out.push_str(&py_str(k));
                } else {
                    out.push_str(&Json::String(k.clone()).to_string());
                }
                out.push_str(": ");
                write(v, out, repr);
            }
            out.push('}');
        }
    }
}

fn py_str(s: &str) -> String {
    stategraph_value::py::repr_str(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_as_python() {
        let v = json!({"city": "Paris", "n": [1, true, null], "q": "it's"});
        assert_eq!(
            json_dumps(&v),
            r#"{"city": "Paris", "n": [1, true, null], "q": "it's"}"#
        );
        assert_eq!(
            repr(&v),
            r#"{'city': 'Paris', 'n': [1, True, None], 'q': "it's"}"#
        );
    }
}
