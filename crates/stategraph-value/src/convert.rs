//! Typed Rust values to and from [`Value`], directly through serde.
//!
//! What a channel stores is a [`Value`]; what a node works with is usually a Rust type. These
//! two functions convert between them without encoding bytes in between, and produce exactly
//! the value `rmp-serde` (named struct fields) would have written and read: struct fields by
//! name, `None` as nil, unit variants as their name, other variants as `{variant: data}`,
//! 128-bit integers as 16 big-endian bytes, msgpack ext values kept as [`Ext`](super::Ext).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stategraph_value::{from_value, to_value};
//! use stategraph_value::value;
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Order { id: u32, items: Vec<String> }
//!
//! let v = to_value(&Order { id: 7, items: vec!["tea".into()] })?;
//! assert_eq!(v, value!({"id": 7, "items": ["tea"]}));
//! let back: Order = from_value(&v)?;
//! assert_eq!(back.items, ["tea"]);
//!
//! let err = from_value::<Order>(&value!({"id": 7, "items": ["tea", 5]})).unwrap_err();
//! assert_eq!(err.path(), Some("items[1]"));
//! # Ok::<(), stategraph_value::SerdeError>(())
//! ```

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Value;
use crate::SerdeError;

/// Converts any serializable value into a [`Value`] (see the module docs for the layout).
///
/// # Errors
/// [`SerdeError::Shape`] when the value cannot be represented (a map key serde refuses, an
/// ext value with a bad type code, or an error the type's own `Serialize` raises), with the
/// path inside the value.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, SerdeError> {
    super::to_value::to_value(value).map_err(ConvertError::into_serde)
}

/// Converts a [`Value`] into a Rust value.
///
/// # Errors
/// [`SerdeError::Shape`] naming the path inside the value where the shape did not fit
/// (`messages[3].id`) and what was expected there.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, SerdeError> {
    T::deserialize(super::from_value::ValueDeserializer::new(value))
        .map_err(ConvertError::into_serde)
}

/// A conversion error with the path where it happened (innermost segment last).
#[derive(Debug)]
pub(crate) struct ConvertError {
    /// Segments from the innermost outwards (pushed as the error travels up).
    path: Vec<String>,
    message: String,
}

impl ConvertError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            path: Vec::new(),
            message: message.into(),
        }
    }

    /// The error happened inside item `i` of a list.
    pub(crate) fn at_index(mut self, i: usize) -> Self {
        self.path.push(format!("[{i}]"));
        self
    }

    /// The error happened inside field `key`.
    pub(crate) fn at_key(mut self, key: &str) -> Self {
        self.path.push(format!(".{key}"));
        self
    }

    /// The error happened inside the value under the map key `key`.
    pub(crate) fn at_value_key(self, key: &Value) -> Self {
        match key {
            Value::Str(s) => self.at_key(s),
            other => self.at_key(&format!("<{other}>")),
        }
    }

    fn path_string(&self) -> String {
        let joined: String = self.path.iter().rev().map(String::as_str).collect();
        joined.strip_prefix('.').unwrap_or(&joined).to_owned()
    }

    pub(crate) fn into_serde(self) -> SerdeError {
        SerdeError::Shape {
            path: self.path_string(),
            message: self.message,
        }
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at `{}`: {}", self.path_string(), self.message)
        }
    }
}

impl std::error::Error for ConvertError {}

impl serde::ser::Error for ConvertError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }
}

impl serde::de::Error for ConvertError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::{Ext, decode};

    /// What rmp-serde writes for `v`, read back as a Value: the layout `to_value` must match.
    fn via_bytes<T: Serialize>(v: &T) -> Value {
        decode(&rmp_serde::to_vec_named(v).unwrap()).unwrap()
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    enum Kind {
        Unit,
        New(u8),
        Tuple(i32, String),
        Struct { a: bool, b: Option<f32> },
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    struct Unit;

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    struct Wrapper(String);

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    struct Everything {
        b: bool,
        small: i8,
        big: i64,
        huge: u64,
        wide: i128,
        uwide: u128,
        f: f32,
        d: f64,
        c: char,
        s: String,
        bytes: Vec<u8>,
        none: Option<String>,
        some: Option<Vec<u16>>,
        unit: (),
        unit_struct: Unit,
        newtype: Wrapper,
        tuple: (u8, String, bool),
        kinds: Vec<Kind>,
        map: BTreeMap<String, Vec<i32>>,
        int_keys: BTreeMap<u32, String>,
        value: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    fn sample() -> Everything {
        Everything {
            b: true,
            small: -5,
            big: i64::MIN,
            huge: u64::MAX,
            wide: -(1 << 100),
            uwide: 1 << 120,
            f: 1.1,
            d: -0.25,
            c: 'é',
            s: "text".into(),
            bytes: vec![0, 1, 255],
            none: None,
            some: Some(vec![1, 2]),
            unit: (),
            unit_struct: Unit,
            newtype: Wrapper("w".into()),
            tuple: (1, "two".into(), false),
            kinds: vec![
                Kind::Unit,
                Kind::New(3),
                Kind::Tuple(-1, "x".into()),
                Kind::Struct { a: true, b: None },
            ],
            map: BTreeMap::from([("k".into(), vec![1, -2])]),
            int_keys: BTreeMap::from([(7, "seven".into())]),
            value: Value::Ext(Ext::python(
                crate::ExtCode::ConstructorSingleArg,
                "uuid",
                "UUID",
                Value::from("00"),
            )),
            skipped: None,
        }
    }

    #[test]
    fn to_value_matches_rmp_serde_layout() {
        let v = sample();
        assert_eq!(to_value(&v).unwrap(), via_bytes(&v));
    }

    #[test]
    fn from_value_reads_what_rmp_serde_reads() {
        let v = sample();
        let value = via_bytes(&v);
        let back: Everything = from_value(&value).unwrap();
        let rmp_back: Everything =
            rmp_serde::from_slice(&rmp_serde::to_vec_named(&v).unwrap()).unwrap();
        assert_eq!(back, rmp_back);
        assert_eq!(back.kinds, v.kinds);
        assert_eq!(back.value, v.value);
    }

    #[test]
    fn errors_name_the_path() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Msg {
            id: String,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct State {
            messages: Vec<Msg>,
        }
        let v = crate::value!({"messages": [{"id": "a"}, {"id": 3}]});
        let err = from_value::<State>(&v).unwrap_err();
        assert_eq!(err.path(), Some("messages[1].id"));
        assert!(err.to_string().contains("expected a string"), "{err}");

        let v = crate::value!({"messages": [{"di": "a"}]});
        let err = from_value::<State>(&v).unwrap_err();
        assert_eq!(err.path(), Some("messages[0]"));
        assert!(err.to_string().contains("missing field `id`"), "{err}");
    }

    #[test]
    fn bytes_read_as_a_sequence_where_one_is_expected() {
        // rmp-serde reads bin data into a Vec<u8> field (a sequence) item by item.
        let v: Vec<u8> = from_value(&Value::Bytes(vec![4, 5])).unwrap();
        assert_eq!(v, [4, 5]);
    }

    #[test]
    fn out_of_range_integers_are_errors() {
        let err = from_value::<u8>(&Value::Int(300)).unwrap_err();
        assert!(err.to_string().contains("300"), "{err}");
    }
}
