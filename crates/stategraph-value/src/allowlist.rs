//! Which Python classes may appear in stored values (LangGraph's msgpack allowlist).
//!
//! stategraph never constructs Python objects — an ext value stays bytes until a typed Rust
//! value (such as a LangChain message) reads it — so the code-execution risk behind LangGraph's
//! allowlist (CVE-2025-64439) does not exist here. Strict mode still lets a deployment refuse
//! data carrying classes it does not expect, with an error naming where in the value the class
//! was found.

use std::collections::BTreeSet;

use crate::SerdeError;
use crate::Value;

/// Classes LangGraph always allows (`SAFE_MSGPACK_TYPES`), as `(module, class)`; a class of
/// `*` allows every class of the module.
pub const SAFE_TYPES: &[(&str, &str)] = &[
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("uuid", "UUID"),
    ("decimal", "Decimal"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "deque"),
    ("ipaddress", "*"),
    ("pathlib", "*"),
    ("zoneinfo", "ZoneInfo"),
    ("re", "compile"),
    ("langchain_core.messages.human", "*"),
    ("langchain_core.messages.ai", "*"),
    ("langchain_core.messages.system", "*"),
    ("langchain_core.messages.chat", "*"),
    ("langchain_core.messages.tool", "*"),
    ("langchain_core.messages.function", "*"),
    ("langchain_core.messages.modifier", "*"),
    ("langchain_core.messages.base", "*"),
    ("langchain_core.documents.base", "Document"),
    ("langgraph.types", "*"),
    ("langgraph.store.base", "Item"),
    ("langgraph.store.base", "GetOp"),
];

/// An allowlist of Python classes for strict decoding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    extra: BTreeSet<(String, String)>,
}

impl Allowlist {
    /// LangGraph's safe types only.
    pub fn safe() -> Self {
        Self::default()
    }

    /// Also allows `module.class` (`class = "*"`: the whole module).
    pub fn allow(mut self, module: impl Into<String>, class: impl Into<String>) -> Self {
        self.extra.insert((module.into(), class.into()));
        self
    }

    /// Whether `module.class` may appear.
    pub fn allows(&self, module: &str, class: &str) -> bool {
        let hit = |m: &str, c: &str| m == module && (c == "*" || c == class);
        SAFE_TYPES.iter().any(|(m, c)| hit(m, c)) || self.extra.iter().any(|(m, c)| hit(m, c))
    }

    /// Checks every Python object inside `value`; the error names the path of the first
    /// refused one (`messages[3]`).
    pub fn check(&self, value: &Value) -> Result<(), SerdeError> {
        self.walk(value, &mut String::new())
    }

    fn walk(&self, value: &Value, path: &mut String) -> Result<(), SerdeError> {
        match value {
            Value::List(items) => {
                for (i, v) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    self.walk(v, path)?;
                    path.truncate(len);
                }
            }
            Value::Map(m) => {
                for (k, v) in m.iter() {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    match k {
                        Value::Str(s) => path.push_str(s),
                        other => path.push_str(&other.to_string()),
                    }
                    self.walk(v, path)?;
                    path.truncate(len);
                }
            }
            Value::Ext(e) => {
                if let Ok(Some(obj)) = e.py_object() {
                    if !self.allows(&obj.module, &obj.class) {
                        return Err(SerdeError::Disallowed {
                            path: path.clone(),
                            class: format!("{}.{}", obj.module, obj.class),
                        });
                    }
                    self.walk(&obj.data, path)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ext, ExtCode, value};

    #[test]
    fn safe_and_refused_types() {
        let list = Allowlist::safe();
        let ok = value!({"when": null});
        assert!(list.check(&ok).is_ok());
        let human = Value::Ext(Ext::python(
            ExtCode::PydanticV2,
            "langchain_core.messages.human",
            "HumanMessage",
            value!({"content": "hi", "type": "human"}),
        ));
        let msgs = Value::from(vec![human]);
        assert!(list.check(&msgs).is_ok());
        let evil = Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "os",
            "system",
            "rm -rf /".into(),
        ));
        let doc = Value::Map(
            [("messages", Value::from(vec![Value::Null, evil]))]
                .into_iter()
                .collect(),
        );
        match list.check(&doc) {
            Err(SerdeError::Disallowed { path, class }) => {
                assert_eq!(path, "messages[1]");
                assert_eq!(class, "os.system");
            }
            other => panic!("{other:?}"),
        }
        assert!(Allowlist::safe().allow("os", "system").check(&doc).is_ok());
    }
}
