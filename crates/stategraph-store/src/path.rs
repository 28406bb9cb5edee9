//! Index field paths (`"$"`, `"a.b"`, `"arr[0]"`, `"arr[-1]"`, `"arr[*].b"`, `"{a,b}"`) and
//! the texts they select from a stored value, as LangGraph's `get_text_at_path`.

use serde_json::Value as Json;

use super::StoreError;

/// One step of a parsed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathToken {
    /// An object key.
    Key(String),
    /// An array index; negative counts from the end.
    Index(i64),
    /// Every element of an array (`[*]`).
    Wildcard,
    /// Several keys of an object (`{a,b}`).
    Keys(Vec<String>),
}

/// A parsed index path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath {
    /// The path as written (also the `field_name` of its vectors).
    pub raw: String,
    /// The steps; empty for `"$"` (the whole value).
    pub tokens: Vec<PathToken>,
}

impl FieldPath {
    /// Parses `path`, or says what is wrong with it.
    pub fn parse(path: &str) -> Result<Self, StoreError> {
        let bad = |reason: &str| StoreError::InvalidIndexPath {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        if path == "$" {
            return Ok(Self {
                raw: path.to_owned(),
                tokens: Vec::new(),
            });
        }
        if path.is_empty() {
            return Err(bad("the path is empty"));
        }
        let mut tokens = Vec::new();
        let mut chars = path.char_indices().peekable();
        let mut key = String::new();
        let mut expect_key = true;
        while let Some((i, c)) = chars.next() {
            match c {
                '.' => {
                    if key.is_empty() && expect_key {
                        return Err(bad(&format!("empty segment at byte {i}")));
                    }
                    if !key.is_empty() {
                        tokens.push(PathToken::Key(std::mem::take(&mut key)));
                    }
                    expect_key = true;
                }
                '[' => {
                    if !key.is_empty() {
                        tokens.push(PathToken::Key(std::mem::take(&mut key)));
                    } else if tokens.is_empty() {
                        return Err(bad("an index needs an array field before it"));
                    }
                    let mut inner = String::new();
                    loop {
                        match chars.next() {
                            Some((_, ']')) => break,
                            Some((_, ch)) => inner.push(ch),
                            None => return Err(bad(&format!("unclosed `[` at byte {i}"))),
                        }
                    }
                    let token = match inner.trim() {
                        "*" => PathToken::Wildcard,
                        n => PathToken::Index(n.parse().map_err(|_| {
                            bad(&format!("`[{inner}]` at byte {i} is not an index or `*`"))
                        })?),
                    };
                    tokens.push(token);
                    expect_key = false;
                }
                '{' => {
                    if !key.is_empty() {
                        return Err(bad(&format!("`{{` at byte {i} must follow a `.`")));
                    }
                    let mut inner = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '}')) => break,
                            Some((_, ch)) => inner.push(ch),
                            None => return Err(bad(&format!("unclosed `{{` at byte {i}"))),
                        }
                    }
                    let keys: Vec<String> = inner.split(',').map(|k| k.trim().to_owned()).collect();
                    if keys.iter().any(String::is_empty) {
                        return Err(bad(&format!("empty key in `{{{inner}}}` at byte {i}")));
                    }
                    tokens.push(PathToken::Keys(keys));
                    expect_key = false;
                }
                ']' | '}' => return Err(bad(&format!("unmatched `{c}` at byte {i}"))),
                _ => {
                    if !expect_key {
                        return Err(bad(&format!("expected `.` or `[` at byte {i}")));
                    }
                    key.push(c);
                }
            }
        }
        if !key.is_empty() {
            tokens.push(PathToken::Key(key));
        } else if expect_key {
            return Err(bad("the path ends with `.`"));
        }
        Ok(Self {
            raw: path.to_owned(),
            tokens,
        })
    }

    /// The texts this path selects in `value`: strings as they are, numbers and booleans as
    /// Python's `str()` writes them, objects and arrays as sorted-key JSON. Missing parts
    /// select nothing.
    pub fn texts(&self, value: &Json) -> Vec<String> {
        let mut current = vec![value];
        for token in &self.tokens {
            let mut next = Vec::new();
            for v in current {
                match (token, v) {
                    (PathToken::Key(k), Json::Object(m)) => next.extend(m.get(k)),
                    (PathToken::Keys(ks), Json::Object(m)) => {
                        next.extend(ks.iter().filter_map(|k| m.get(k)));
                    }
                    (PathToken::Index(i), Json::Array(a)) => {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        next.extend(usize::try_from(idx).ok().and_then(|i| a.get(i)));
                    }
                    (PathToken::Wildcard, Json::Array(a)) => next.extend(a.iter()),
                    _ => {}
                }
            }
            current = next;
        }
        current
            .into_iter()
            .filter(|v| !v.is_null())
            .map(text_of)
            .collect()
    }
}

/// The text embedded for one JSON value.
pub fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Bool(true) => "True".into(),
        Json::Bool(false) => "False".into(),
        Json::Null => "None".into(),
        Json::Number(n) => n.to_string(),
        other => python_json(other),
    }
}

/// `json.dumps(v, sort_keys=True, ensure_ascii=False)`: Python's separators, sorted keys.
pub fn python_json(v: &Json) -> String {
    let mut out = String::new();
    write_python_json(v, &mut out);
    out
}

fn write_python_json(v: &Json, out: &mut String) {
    match v {
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(x, out);
            }
            out.push(']');
        }
        Json::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Json::String(k.clone()).to_string());
                out.push_str(": ");
                write_python_json(&m[k], out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The `(field_name, text)` pairs to embed for `value` under `paths`: the path itself when it
/// selects one text, `path.i` for each of several.
pub fn texts_to_embed(value: &Json, paths: &[FieldPath]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in paths {
        let texts = if path.tokens.is_empty() {
            vec![python_json(value)]
        } else {
            path.texts(value)
        };
        if texts.len() == 1 {
            out.extend(texts.into_iter().map(|t| (path.raw.clone(), t)));
        } else {
            out.extend(
                texts
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| (format!("{}.{i}", path.raw), t)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn texts(path: &str, v: &Json) -> Vec<String> {
        FieldPath::parse(path).unwrap().texts(v)
    }

    #[test]
    fn selects_like_langgraph() {
        let v = json!({"a": {"b": "x", "n": 3, "t": true}, "arr": [{"c": "p"}, {"c": "q"}],
                       "tags": ["u", "v", "w"]});
        assert_eq!(texts("a.b", &v), ["x"]);
        assert_eq!(texts("a.n", &v), ["3"]);
        assert_eq!(texts("a.t", &v), ["True"]);
        assert_eq!(texts("arr[*].c", &v), ["p", "q"]);
        assert_eq!(texts("tags[-1]", &v), ["w"]);
        assert_eq!(texts("tags[0]", &v), ["u"]);
        assert_eq!(texts("tags[7]", &v), Vec::<String>::new());
        assert_eq!(texts("a.{b,n}", &v), ["x", "3"]);
        assert_eq!(texts("missing.x", &v), Vec::<String>::new());
        assert_eq!(texts("arr[0]", &v), [r#"{"c": "p"}"#]);
        let paths = [
            FieldPath::parse("$").unwrap(),
            FieldPath::parse("tags[*]").unwrap(),
        ];
        let got = texts_to_embed(&json!({"z": 1, "tags": ["é", "b"]}), &paths);
        assert_eq!(
            got,
            [
                ("$".to_owned(), r#"{"tags": ["é", "b"], "z": 1}"#.to_owned()),
                ("tags[*].0".to_owned(), "é".to_owned()),
                ("tags[*].1".to_owned(), "b".to_owned()),
            ]
        );
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in [
            "", "a..b", "a.", ".a", "a[", "a[x]", "a]", "[0]", "a{b}", "a.{b,}",
        ] {
            assert!(
                matches!(
                    FieldPath::parse(bad),
                    Err(StoreError::InvalidIndexPath { .. })
                ),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(text in proptest::arbitrary::any::<String>()) {
            let _ = FieldPath::parse(&text);
        }

        /// Path-like text (keys, indexes, wildcards, key sets, multi-byte labels) parses or is
        /// refused, and what parses selects from a value without panicking.
        #[test]
        fn path_like_text_never_panics(text in r"([a-zé🍕]{0,3}|[.\[\]{},*$-]|-?[0-9]{1,20}){0,12}") {
            if let Ok(path) = FieldPath::parse(&text) {
                let v = json!({"a": [{"b": "x"}, "é", [1, 2]], "é": {"🍕": true}, "b": null});
                let _ = path.texts(&v);
                let _ = texts_to_embed(&v, &[path]);
            }
        }
    }
}
