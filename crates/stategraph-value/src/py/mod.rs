//! Python's rich types as Rust types, stored exactly as Python LangGraph stores them.
//!
//! LangGraph's serializer writes `datetime`, `date`, `time`, `timedelta`, `UUID`, `Decimal`,
//! `set`/`frozenset` and `Enum` values as msgpack ext values. A type
//! implementing [`PyType`] converts to and from that form, so a field of a typed state holds a
//! real Rust value while the checkpoint holds what Python would have written — Python reads a
//! `datetime`, not a string, and we read Python's.
//!
//! | Rust | Python | ext |
//! | --- | --- | --- |
//! | [`uuid::Uuid`] | `uuid.UUID` | 0, `.hex` |
//! | [`PyDecimal`] | `decimal.Decimal` | 0, `str(d)` |
//! | `BTreeSet<T>`, `HashSet<T>` | `set` (reads `frozenset` too) | 0, the items |
//! | an enum declared with [`py_enum!`](crate::py_enum) | a Python `Enum` | 0, `.value` |
//! | `chrono::DateTime<FixedOffset>`, `DateTime<Utc>`, `NaiveDateTime` (feature `chrono`) | `datetime` | 3, `isoformat()` |
//! | `chrono::NaiveDate` | `date` | 1, `[y, m, d]` |
//! | `chrono::NaiveTime` | `time` (no tzinfo) | 2, its fields |
//! | `chrono::TimeDelta` | `timedelta` | 1, `[days, seconds, microseconds]` |
//!
//! Python's times have microsecond precision: a Rust time with a finer part is an error, not
//! silently truncated (truncate with `chrono::SubsecRound::trunc_subsecs(6)` first). Tuples
//! need nothing: serde writes them as arrays, and Python reads its tuples back as lists too.
//!
//! Use a type through serde, either with the field attribute
//! `#[serde(with = "stategraph_value::py")]` or by wrapping it in [`Py`]:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stategraph_value::py::{Py, PyDecimal, PyType};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Order {
//!     #[serde(with = "stategraph_value::py")]
//!     id: uuid::Uuid,
//!     total: Py<PyDecimal>,
//! }
//!
//! let id = uuid::Uuid::from_u128(0x1234_5678_1234_5678_1234_5678_1234_5678);
//! let v = id.to_py().unwrap();
//! assert_eq!(v.to_string(), "uuid.UUID(\"12345678123456781234567812345678\")");
//! assert_eq!(uuid::Uuid::from_py(&v).unwrap(), id);
//! ```

#[cfg(feature = "chrono")]
mod datetime;
mod decimal;
mod enums;
mod set;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use self::decimal::PyDecimal;
pub use self::enums::{enum_from_py, enum_to_py};
use crate::SerdeError;
use crate::{ExtCode, Value};

/// A Rust type stored the way Python LangGraph stores the Python type it stands for.
pub trait PyType: Sized {
    /// The value as Python's serializer writes it. Fails when Python could not hold it
    /// (a time finer than a microsecond, a year outside 1–9999).
    fn to_py(&self) -> Result<Value, SerdeError>;

    /// Reads the Python form back; the error says what was expected and what was found.
    fn from_py(value: &Value) -> Result<Self, SerdeError>;
}

/// serde `with` module: `#[serde(with = "stategraph_value::py")]` stores a [`PyType`]
/// field in its Python form.
pub fn serialize<T: PyType, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    value
        .to_py()
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

/// The deserializing half of the `with` module (see [`serialize`]).
pub fn deserialize<'de, T: PyType, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    T::from_py(&v).map_err(serde::de::Error::custom)
}

/// A [`PyType`] that serde stores in its Python form; for places a field attribute cannot
/// reach (`Vec<Py<Uuid>>`, `Option<Py<NaiveDate>>`, map values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Py<T>(pub T);

impl<T: PyType> Serialize for Py<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, s)
    }
}

impl<'de, T: PyType> Deserialize<'de> for Py<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize(d).map(Py)
    }
}

impl<T> std::ops::Deref for Py<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

fn shape(message: impl Into<String>) -> SerdeError {
    SerdeError::Shape {
        path: String::new(),
        message: message.into(),
    }
}

/// The data of a Python object of one of `classes` (`(module, class)`) stored under `code`;
/// an error naming the expected classes otherwise. For implementing [`PyType`].
pub fn object_data(
    value: &Value,
    code: ExtCode,
    classes: &[(&str, &str)],
) -> Result<Value, SerdeError> {
    let wanted = || {
        classes
            .iter()
            .map(|(m, c)| format!("{m}.{c}"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let Value::Ext(ext) = value else {
        return Err(shape(format!(
            "expected a Python {}, found {value}",
            wanted()
        )));
    };
    let obj = ext
        .py_object()
        .map_err(|e| shape(format!("a {} with an unreadable payload: {e}", wanted())))?;
    match obj {
        Some(obj)
            if ext.ext_code() == Some(code)
                && classes
                    .iter()
                    .any(|(m, c)| obj.module == *m && obj.class == *c) =>
        {
            Ok(obj.data)
        }
        _ => Err(shape(format!(
            "expected a Python {}, found {value}",
            wanted()
        ))),
    }
}

/// Converts any serde value into a [`Value`] (msgpack, named struct fields).
fn to_value<T: Serialize + ?Sized>(v: &T) -> Result<Value, SerdeError> {
    crate::to_value(v)
}

/// Converts a [`Value`] into a serde value.
fn from_value<T: DeserializeOwned>(v: &Value) -> Result<T, SerdeError> {
    crate::from_value(v)
}

impl PyType for Value {
    fn to_py(&self) -> Result<Value, SerdeError> {
        Ok(self.clone())
    }
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        Ok(value.clone())
    }
}

impl PyType for uuid::Uuid {
    fn to_py(&self) -> Result<Value, SerdeError> {
        Ok(Value::py_uuid(&self.simple().to_string()))
    }

    /// Reads a `uuid.UUID`, or a UUID in a string (with or without hyphens).
    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        let text = match value {
            Value::Str(s) => s.clone(),
            other => {
                match object_data(other, ExtCode::ConstructorSingleArg, &[("uuid", "UUID")])? {
                    Value::Str(s) => s,
                    data => {
                        return Err(shape(format!("a UUID's data is its hex text, not {data}")));
                    }
                }
            }
        };
        uuid::Uuid::parse_str(&text).map_err(|e| shape(format!("invalid UUID `{text}`: {e}")))
    }
}

/// Python's `repr` of a string (single quotes unless the text contains one and no double quote).
pub fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_class_is_a_clear_error() {
        let d = PyDecimal::new("1").unwrap().to_py().unwrap();
        let err = uuid::Uuid::from_py(&d).unwrap_err().to_string();
        assert!(err.contains("expected a Python uuid.UUID"), "{err}");
        assert!(err.contains("decimal.Decimal"), "{err}");
    }
}
