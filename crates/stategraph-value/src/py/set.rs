//! Rust sets as Python's `set` (reading `frozenset` too).

use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasher, Hash};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{PyType, from_value, object_data, shape, to_value};
use crate::SerdeError;
use crate::{Ext, ExtCode, Value};

const SETS: [(&str, &str); 2] = [("builtins", "set"), ("builtins", "frozenset")];

fn set_to_py<'a, T: Serialize + 'a>(
    items: impl Iterator<Item = &'a T>,
) -> Result<Value, SerdeError> {
    let items = items.map(to_value).collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        "builtins",
        "set",
        Value::from(items),
    )))
}

fn set_items<T: DeserializeOwned>(value: &Value) -> Result<Vec<T>, SerdeError> {
    match object_data(value, ExtCode::ConstructorSingleArg, &SETS)? {
        Value::List(items) => items.iter().map(from_value).collect(),
        data => Err(shape(format!(
            "a set's data is a list of items, not {data}"
        ))),
    }
}

impl<T: Serialize + DeserializeOwned + Ord> PyType for BTreeSet<T> {
    fn to_py(&self) -> Result<Value, SerdeError> {
        set_to_py(self.iter())
    }
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        Ok(set_items(value)?.into_iter().collect())
    }
}

impl<T: Serialize + DeserializeOwned + Eq + Hash, S: BuildHasher + Default> PyType
    for HashSet<T, S>
{
    fn to_py(&self) -> Result<Value, SerdeError> {
        set_to_py(self.iter())
    }
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        Ok(set_items(value)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_read_frozensets() {
        let v = Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "builtins",
            "frozenset",
            Value::from(vec![Value::from("a"), Value::from("b")]),
        ));
        let s = BTreeSet::<String>::from_py(&v).unwrap();
        assert_eq!(s.len(), 2);
        let back = s.to_py().unwrap();
        assert_eq!(BTreeSet::<String>::from_py(&back).unwrap(), s);
    }
}
