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
//! `#[serde(with = "stategraph_checkpoint::py")]` or by wrapping it in [`Py`]:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stategraph_checkpoint::py::{Py, PyDecimal, PyType};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Order {
//!     #[serde(with = "stategraph_checkpoint::py")]
//!     id: uuid::Uuid,
//!     total: Py<PyDecimal>,
//! }
//!
//! let id = uuid::Uuid::from_u128(0x1234_5678_1234_5678_1234_5678_1234_5678);
//! let v = id.to_py().unwrap();
//! assert_eq!(v.to_string(), "uuid.UUID(\"12345678123456781234567812345678\")");
//! assert_eq!(uuid::Uuid::from_py(&v).unwrap(), id);
//! ```

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::serializer::SerdeError;
use crate::value::{Ext, ExtCode, Value};

/// A Rust type stored the way Python LangGraph stores the Python type it stands for.
pub trait PyType: Sized {
    /// The value as Python's serializer writes it. Fails when Python could not hold it
    /// (a time finer than a microsecond, a year outside 1–9999).
    fn to_py(&self) -> Result<Value, SerdeError>;

    /// Reads the Python form back; the error says what was expected and what was found.
    fn from_py(value: &Value) -> Result<Self, SerdeError>;
}

/// serde `with` module: `#[serde(with = "stategraph_checkpoint::py")]` stores a [`PyType`]
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
    crate::value::to_value(v)
}

/// Converts a [`Value`] into a serde value.
fn from_value<T: DeserializeOwned>(v: &Value) -> Result<T, SerdeError> {
    crate::value::from_value(v)
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

/// A Python `decimal.Decimal`: exact decimal text, checked on construction (digits with an
/// optional sign, point and exponent, or `NaN`, `sNaN`, `Infinity`). Kept as text, so no digit
/// is ever lost; `-12.3400` stays `-12.3400`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyDecimal(String);

impl PyDecimal {
    /// Checks `text` is a decimal Python's `Decimal(text)` accepts in its canonical form.
    pub fn new(text: &str) -> Result<Self, SerdeError> {
        text.parse()
    }

    /// The decimal's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The nearest `f64` (lossy).
    pub fn to_f64(&self) -> f64 {
        let t = self.0.trim_start_matches(['+', '-']);
        let neg = self.0.starts_with('-');
        let v = match t {
            "NaN" | "sNaN" => f64::NAN,
            "Infinity" | "Inf" => f64::INFINITY,
            _ => t.parse().unwrap_or(f64::NAN),
        };
        if neg { -v } else { v }
    }
}

impl FromStr for PyDecimal {
    type Err = SerdeError;

    fn from_str(text: &str) -> Result<Self, SerdeError> {
        let bad = || shape(format!("`{text}` is not a decimal number"));
        let body = text.strip_prefix(['+', '-']).unwrap_or(text);
        if matches!(body, "NaN" | "sNaN" | "Infinity" | "Inf") {
            return Ok(Self(text.to_owned()));
        }
        let (mantissa, exponent) = match body.split_once(['e', 'E']) {
            Some((m, e)) => (m, Some(e)),
            None => (body, None),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
            return Err(bad());
        }
        if let Some(e) = exponent {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            if e.is_empty() || !digits(e) {
                return Err(bad());
            }
        }
        Ok(Self(text.to_owned()))
    }
}

impl fmt::Display for PyDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PyType for PyDecimal {
    fn to_py(&self) -> Result<Value, SerdeError> {
        Ok(Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "decimal",
            "Decimal",
            Value::from(self.0.as_str()),
        )))
    }

    fn from_py(value: &Value) -> Result<Self, SerdeError> {
        match object_data(
            value,
            ExtCode::ConstructorSingleArg,
            &[("decimal", "Decimal")],
        )? {
            Value::Str(s) => s.parse(),
            data => Err(shape(format!("a Decimal's data is its text, not {data}"))),
        }
    }
}

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

/// Support for [`py_enum!`](crate::py_enum): an enum value as Python stores an `Enum` member.
pub fn enum_to_py<E: Serialize>(module: &str, class: &str, value: &E) -> Result<Value, SerdeError> {
    Ok(Value::Ext(Ext::python(
        ExtCode::ConstructorSingleArg,
        module,
        class,
        to_value(value)?,
    )))
}

/// Support for [`py_enum!`](crate::py_enum): reads a Python `Enum` member of `module.class`.
pub fn enum_from_py<E: DeserializeOwned>(
    module: &str,
    class: &str,
    value: &Value,
) -> Result<E, SerdeError> {
    let data = object_data(value, ExtCode::ConstructorSingleArg, &[(module, class)])?;
    from_value(&data).map_err(|e| shape(format!("not a member of {module}.{class}: {e}")))
}

/// Declares that a Rust enum stands for a Python `Enum` class: its members are stored as
/// Python stores them (`[module, class, member.value]`), the value being the enum's serde form
/// (a unit variant is its name — rename variants to match the Python values, or use
/// `serde_repr` for integer values).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph_checkpoint::py::PyType;
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// enum Color {
///     #[serde(rename = "red")]
///     Red,
///     #[serde(rename = "blue")]
///     Blue,
/// }
/// stategraph_checkpoint::py_enum!(Color, "myapp.colors", "Color");
///
/// let v = Color::Red.to_py().unwrap();
/// assert_eq!(v.to_string(), "myapp.colors.Color(\"red\")");
/// assert_eq!(Color::from_py(&v).unwrap(), Color::Red);
/// ```
#[macro_export]
macro_rules! py_enum {
    ($ty:ty, $module:expr, $class:expr) => {
        impl $crate::py::PyType for $ty {
            fn to_py(&self) -> ::std::result::Result<$crate::Value, $crate::SerdeError> {
                $crate::py::enum_to_py($module, $class, self)
            }
            fn from_py(value: &$crate::Value) -> ::std::result::Result<Self, $crate::SerdeError> {
                $crate::py::enum_from_py($module, $class, value)
            }
        }
    };
}

#[cfg(feature = "chrono")]
mod chrono_types {
    use chrono::{
        DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Timelike,
        Utc,
    };

    use super::*;
    use crate::value::{Map, PyObject};

    const DATETIME: [(&str, &str); 1] = [("datetime", "datetime")];

    fn micros(nanos: u32, what: &str) -> Result<u32, SerdeError> {
        if nanos >= 1_000_000_000 {
            return Err(shape(format!("{what}: Python has no leap seconds")));
        }
        if !nanos.is_multiple_of(1000) {
            return Err(shape(format!(
                "{what} has {nanos} ns: Python keeps microseconds; truncate first \
                 (chrono::SubsecRound::trunc_subsecs(6))"
            )));
        }
        Ok(nanos / 1000)
    }

    /// Python's `isoformat()` of a naive datetime.
    fn iso_naive(dt: &NaiveDateTime) -> Result<String, SerdeError> {
        if !(1..=9999).contains(&dt.year()) {
            return Err(shape(format!(
                "year {} is outside Python's 1..=9999",
                dt.year()
            )));
        }
        let us = micros(dt.nanosecond(), "the datetime")?;
        let mut s = dt.format("%Y-%m-%dT%H:%M:%S").to_string();
        if us != 0 {
            s.push_str(&format!(".{us:06}"));
        }
        Ok(s)
    }

    /// Python's `+HH:MM[:SS]` form of an offset.
    fn iso_offset(offset: &FixedOffset) -> String {
        let total = offset.local_minus_utc();
        let sign = if total < 0 { '-' } else { '+' };
        let t = total.unsigned_abs();
        let (h, m, s) = (t / 3600, t / 60 % 60, t % 60);
        if s == 0 {
            format!("{sign}{h:02}:{m:02}")
        } else {
            format!("{sign}{h:02}:{m:02}:{s:02}")
        }
    }

    fn datetime_value(iso: String) -> Value {
        Value::Ext(Ext::from_py_object(
            ExtCode::MethodSingleArg,
            &PyObject::new("datetime", "datetime", Value::from(iso)).with_method("fromisoformat"),
        ))
    }

    fn datetime_text(value: &Value) -> Result<String, SerdeError> {
        match object_data(value, ExtCode::MethodSingleArg, &DATETIME)? {
            Value::Str(s) => Ok(s.to_string()),
            data => Err(shape(format!(
                "a datetime's data is its ISO text, not {data}"
            ))),
        }
    }

    impl PyType for DateTime<FixedOffset> {
        fn to_py(&self) -> Result<Value, SerdeError> {
            let iso = iso_naive(&self.naive_local())? + &iso_offset(self.offset());
            Ok(datetime_value(iso))
        }

        /// Reads an aware `datetime`; a naive one is an error (read it as `NaiveDateTime`).
        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            let text = datetime_text(value)?;
            DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%:z")
                .or_else(|_| DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%::z"))
                .map_err(|_| {
                    shape(format!(
                        "`{text}` is not an aware datetime (naive ones read as NaiveDateTime)"
                    ))
                })
        }
    }

    impl PyType for DateTime<Utc> {
        fn to_py(&self) -> Result<Value, SerdeError> {
            self.fixed_offset().to_py()
        }

        /// Reads an aware `datetime` at any offset, as the same instant in UTC.
        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            Ok(DateTime::<FixedOffset>::from_py(value)?.to_utc())
        }
    }

    impl PyType for NaiveDateTime {
        fn to_py(&self) -> Result<Value, SerdeError> {
            Ok(datetime_value(iso_naive(self)?))
        }

        /// Reads a naive `datetime`; an aware one is an error (read it as `DateTime`).
        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            let text = datetime_text(value)?;
            NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f").map_err(|_| {
                shape(format!(
                    "`{text}` is not a naive datetime (aware ones read as DateTime)"
                ))
            })
        }
    }

    fn int(v: &Value, what: &str) -> Result<i64, SerdeError> {
        v.as_i64()
            .ok_or_else(|| shape(format!("{what} is not an integer: {v}")))
    }

    impl PyType for NaiveDate {
        fn to_py(&self) -> Result<Value, SerdeError> {
            if !(1..=9999).contains(&self.year()) {
                return Err(shape(format!(
                    "year {} is outside Python's 1..=9999",
                    self.year()
                )));
            }
            Ok(Value::Ext(Ext::python(
                ExtCode::ConstructorPosArgs,
                "datetime",
                "date",
                Value::from(vec![
                    Value::Int(self.year().into()),
                    Value::Int(self.month().into()),
                    Value::Int(self.day().into()),
                ]),
            )))
        }

        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            let data = object_data(value, ExtCode::ConstructorPosArgs, &[("datetime", "date")])?;
            let Value::List(parts) = &data else {
                return Err(shape(format!("a date's data is [y, m, d], not {data}")));
            };
            let [y, m, d] = parts.as_slice() else {
                return Err(shape(format!("a date's data is [y, m, d], not {data}")));
            };
            let (y, m, d) = (int(y, "year")?, int(m, "month")?, int(d, "day")?);
            i32::try_from(y)
                .ok()
                .zip(u32::try_from(m).ok().zip(u32::try_from(d).ok()))
                .and_then(|(y, (m, d))| NaiveDate::from_ymd_opt(y, m, d))
                .ok_or_else(|| shape(format!("no such date: {y}-{m}-{d}")))
        }
    }

    impl PyType for NaiveTime {
        fn to_py(&self) -> Result<Value, SerdeError> {
            let us = micros(self.nanosecond(), "the time")?;
            let mut m = Map::new();
            m.insert("hour", Value::Int(self.hour().into()));
            m.insert("minute", Value::Int(self.minute().into()));
            m.insert("second", Value::Int(self.second().into()));
            m.insert("microsecond", Value::Int(us.into()));
            m.insert("tzinfo", Value::Null);
            m.insert("fold", Value::Int(0));
            Ok(Value::Ext(Ext::python(
                ExtCode::ConstructorKwArgs,
                "datetime",
                "time",
                Value::Map(m),
            )))
        }

        /// Reads a `time` without tzinfo.
        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            let data = object_data(value, ExtCode::ConstructorKwArgs, &[("datetime", "time")])?;
            let Some(m) = data.as_map() else {
                return Err(shape(format!("a time's data is its fields, not {data}")));
            };
            if m.get("tzinfo").is_some_and(|t| !t.is_null()) {
                return Err(shape("a time with a tzinfo has no Rust NaiveTime form"));
            }
            let field = |k: &str| match m.get(k) {
                Some(v) => int(v, k),
                None => Ok(0),
            };
            let (h, mi, s, us) = (
                field("hour")?,
                field("minute")?,
                field("second")?,
                field("microsecond")?,
            );
            u32::try_from(h)
                .ok()
                .zip(u32::try_from(mi).ok())
                .zip(u32::try_from(s).ok().zip(u32::try_from(us).ok()))
                .and_then(|((h, mi), (s, us))| NaiveTime::from_hms_micro_opt(h, mi, s, us))
                .ok_or_else(|| shape(format!("no such time: {h}:{mi}:{s}.{us:06}")))
        }
    }

    const DAY_MICROS: i128 = 86_400_000_000;

    impl PyType for TimeDelta {
        fn to_py(&self) -> Result<Value, SerdeError> {
            let nanos =
                i128::from(self.num_seconds()) * 1_000_000_000 + i128::from(self.subsec_nanos());
            if nanos % 1000 != 0 {
                return Err(shape(format!(
                    "the timedelta has {} ns: Python keeps microseconds",
                    nanos % 1_000_000_000
                )));
            }
            let total = nanos / 1000;
            let days = total.div_euclid(DAY_MICROS);
            let rest = total.rem_euclid(DAY_MICROS);
            if days.abs() > 999_999_999 {
                return Err(shape("the timedelta exceeds Python's ±999999999 days"));
            }
            let as_value = |n: i128| Value::Int(i64::try_from(n).unwrap_or_default());
            Ok(Value::Ext(Ext::python(
                ExtCode::ConstructorPosArgs,
                "datetime",
                "timedelta",
                Value::from(vec![
                    as_value(days),
                    as_value(rest / 1_000_000),
                    as_value(rest % 1_000_000),
                ]),
            )))
        }

        fn from_py(value: &Value) -> Result<Self, SerdeError> {
            let data = object_data(
                value,
                ExtCode::ConstructorPosArgs,
                &[("datetime", "timedelta")],
            )?;
            let Value::List(parts) = &data else {
                return Err(shape(format!(
                    "a timedelta's data is [days, seconds, microseconds], not {data}"
                )));
            };
            let mut total: i128 = 0;
            for (i, unit) in [DAY_MICROS, 1_000_000, 1].into_iter().enumerate() {
                if let Some(v) = parts.get(i) {
                    total += i128::from(int(v, "a timedelta part")?) * unit;
                }
            }
            i64::try_from(total)
                .ok()
                .map(TimeDelta::microseconds)
                .ok_or_else(|| shape("the timedelta is too large"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_is_checked_and_kept() {
        for ok in ["-12.3400", "0", ".5", "1e-7", "+3E+10", "NaN", "-Infinity"] {
            assert_eq!(PyDecimal::new(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "1.2.3", "abc", "1e", "--1", "."] {
            assert!(PyDecimal::new(bad).is_err(), "{bad}");
        }
        assert_eq!(PyDecimal::new("-2.5").unwrap().to_f64(), -2.5);
    }

    #[test]
    fn wrong_class_is_a_clear_error() {
        let d = PyDecimal::new("1").unwrap().to_py().unwrap();
        let err = uuid::Uuid::from_py(&d).unwrap_err().to_string();
        assert!(err.contains("expected a Python uuid.UUID"), "{err}");
        assert!(err.contains("decimal.Decimal"), "{err}");
    }

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
