//! msgpack ext values: the Python objects LangGraph's serializer writes.
//!
//! LangGraph encodes a Python object as an ext value whose payload is itself msgpack, usually
//! the array `[module, class, data]` or `[module, class, data, method]` (see [`ExtCode`]). An
//! [`Ext`] keeps the payload bytes exactly as read, so a value of a Python type that stategraph
//! has no Rust type for (a pydantic model, a LangChain message) survives a read-modify-write
//! byte for byte; [`Ext::py_object`] decodes the payload for inspection.

use std::fmt;

use super::{DecodeError, Value, decode, encode};

/// The ext type codes LangGraph's `JsonPlusSerializer` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExtCode {
    /// `cls(arg)`: UUID, Decimal, set, frozenset, deque, ipaddress, ZoneInfo, Enum, SecretStr.
    ConstructorSingleArg = 0,
    /// `cls(*args)`: Path, re.Pattern, timedelta, date, timezone, `Send`.
    ConstructorPosArgs = 1,
    /// `cls(**kwargs)`: dataclasses (`Interrupt`, `Command`), namedtuples, time, store `Item`.
    ConstructorKwArgs = 2,
    /// `getattr(cls, method)(arg)`: datetime via `fromisoformat`.
    MethodSingleArg = 3,
    /// Pydantic v1 models (`.dict()`).
    PydanticV1 = 4,
    /// Pydantic v2 models (`.model_dump()`), including every LangChain message.
    PydanticV2 = 5,
    /// numpy arrays: `[dtype, shape, order, buffer]`.
    NumpyArray = 6,
    /// `_DeltaSnapshot(value)`: the payload is the wrapped value itself.
    DeltaSnapshot = 7,
}

impl ExtCode {
    /// The code for a raw ext type byte, if LangGraph defines it.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            0 => Self::ConstructorSingleArg,
            1 => Self::ConstructorPosArgs,
            2 => Self::ConstructorKwArgs,
            3 => Self::MethodSingleArg,
            4 => Self::PydanticV1,
            5 => Self::PydanticV2,
            6 => Self::NumpyArray,
            7 => Self::DeltaSnapshot,
            _ => return None,
        })
    }
}

/// A msgpack ext value: a type code and its payload bytes, kept verbatim.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Ext {
    code: i8,
    /// Shared: cloning a message (an ext value) is a reference count, not a copy.
    data: std::sync::Arc<[u8]>,
}

impl Ext {
    /// An ext value from its raw parts.
    pub fn from_raw(code: i8, data: Vec<u8>) -> Self {
        Self {
            code,
            data: data.into(),
        }
    }

    /// A Python object in LangGraph's `[module, class, data(, method)]` form.
    pub fn python(code: ExtCode, module: &str, class: &str, data: Value) -> Self {
        Self::from_py_object(code, &PyObject::new(module, class, data))
    }

    /// Encodes a [`PyObject`] under `code`.
    pub fn from_py_object(code: ExtCode, obj: &PyObject) -> Self {
        let mut parts = vec![
            Value::from(obj.module.as_str()),
            Value::from(obj.class.as_str()),
            obj.data.clone(),
        ];
        if let Some(m) = &obj.method {
            parts.push(Value::from(m.as_str()));
        }
        Self::from_raw(code as i8, encode(&Value::from(parts)))
    }

    /// A `_DeltaSnapshot(value)` (ext 7), whose payload is the value itself.
    pub fn delta_snapshot(value: &Value) -> Self {
        Self::from_raw(ExtCode::DeltaSnapshot as i8, encode(value))
    }

    /// The raw type code.
    pub fn code(&self) -> i8 {
        self.code
    }

    /// The type code, if LangGraph defines it.
    pub fn ext_code(&self) -> Option<ExtCode> {
        ExtCode::from_code(self.code)
    }

    /// The payload bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The class name of a `[module, class, data(, method)]` object, and a cursor on what
    /// follows it, read without decoding the payload.
    fn py_header(&self) -> Option<(&str, super::peek::Peek<'_>)> {
        if !(0..=5).contains(&self.code) {
            return None;
        }
        let mut p = super::peek::Peek::new(&self.data);
        if !(3..=4).contains(&p.array_len()?) {
            return None;
        }
        p.skip()?;
        Some((p.str()?, p))
    }

    /// The class name of a `[module, class, data(, method)]` object, read without decoding
    /// the payload.
    pub fn py_class(&self) -> Option<&str> {
        self.py_header().map(|(class, _)| class)
    }

    /// The string field `key` of a `[module, class, data(, method)]` object's data map (a
    /// message's `id`, `type`), read without decoding the rest of the payload.
    pub fn py_data_str(&self, key: &str) -> Option<&str> {
        let (_, mut p) = self.py_header()?;
        for _ in 0..p.map_len()? {
            let k = p.str();
            if k == Some(key) {
                return p.str();
            }
            if k.is_none() {
                p.skip()?;
            }
            p.skip()?;
        }
        None
    }

    /// Decodes the payload as msgpack.
    pub fn payload(&self) -> Result<Value, DecodeError> {
        decode(&self.data)
    }

    /// The Python object this ext describes, when it uses LangGraph's
    /// `[module, class, data(, method)]` layout (codes 0–5). `Ok(None)` for other layouts.
    pub fn py_object(&self) -> Result<Option<PyObject>, DecodeError> {
        if !(0..=5).contains(&self.code) {
            return Ok(None);
        }
        let Value::List(parts) = self.payload()? else {
            return Ok(None);
        };
        if !(3..=4).contains(&parts.len()) {
            return Ok(None);
        }
        let mut parts = parts.into_vec();
        let method = if parts.len() == 4 {
            match parts.pop() {
                Some(Value::Str(m)) => Some(m.to_string()),
                _ => return Ok(None),
            }
        } else {
            None
        };
        let data = parts.pop().unwrap_or_default();
        let (Some(Value::Str(class)), Some(Value::Str(module))) = (parts.pop(), parts.pop()) else {
            return Ok(None);
        };
        Ok(Some(PyObject {
            module: module.to_string(),
            class: class.to_string(),
            data,
            method,
        }))
    }
}

impl fmt::Debug for Ext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ext({}, {self})", self.code)
    }
}

impl fmt::Display for Ext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.py_object() {
            Ok(Some(obj)) => write!(f, "{}.{}({})", obj.module, obj.class, obj.data),
            _ if self.code == ExtCode::DeltaSnapshot as i8 => match self.payload() {
                Ok(v) => write!(f, "_DeltaSnapshot({v})"),
                Err(_) => write!(f, "ext{}<{} bytes>", self.code, self.data.len()),
            },
            _ => write!(f, "ext{}<{} bytes>", self.code, self.data.len()),
        }
    }
}

/// The decoded form of a LangGraph ext payload: which Python class, and its data.
#[derive(Clone, Debug, PartialEq)]
pub struct PyObject {
    /// Python module, e.g. `langchain_core.messages.human`.
    pub module: String,
    /// Class name, e.g. `HumanMessage`.
    pub class: String,
    /// Constructor argument(s) or the model's fields.
    pub data: Value,
    /// The class method used to rebuild it (`model_validate_json`, `fromisoformat`), if any.
    pub method: Option<String>,
}

impl PyObject {
    /// A `[module, class, data]` object.
    pub fn new(module: &str, class: &str, data: Value) -> Self {
        Self {
            module: module.to_owned(),
            class: class.to_owned(),
            data,
            method: None,
        }
    }

    /// Adds the rebuild method.
    pub fn with_method(mut self, method: &str) -> Self {
        self.method = Some(method.to_owned());
        self
    }
}

impl Value {
    /// A timezone-aware or naive Python `datetime`, from its ISO-8601 text (ext 3, rebuilt
    /// with `datetime.fromisoformat`).
    pub fn py_datetime(iso: &str) -> Value {
        Value::Ext(Ext::from_py_object(
            ExtCode::MethodSingleArg,
            &PyObject::new("datetime", "datetime", Value::from(iso)).with_method("fromisoformat"),
        ))
    }

    /// A Python `uuid.UUID` from its 32 lowercase hex digits (ext 0).
    pub fn py_uuid(hex32: &str) -> Value {
        Value::Ext(Ext::python(
            ExtCode::ConstructorSingleArg,
            "uuid",
            "UUID",
            Value::from(hex32),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_layout_matches_python() {
        // Verified against Python: c7 2d 00 93 a4"uuid" a4"UUID" d9 20 <32 hex>.
        let v = Value::py_uuid("12345678123456781234567812345678");
        let bytes = encode(&v);
        assert_eq!(&bytes[..3], &[0xc7, 0x2d, 0x00]);
        assert_eq!(bytes[3], 0x93);
        assert_eq!(bytes.len(), 3 + 0x2d);
    }

    #[test]
    fn py_object_round_trip() {
        let v = Value::py_datetime("2024-01-02T03:04:05.000006+00:00");
        let Value::Ext(e) = &v else { panic!() };
        let obj = e.py_object().unwrap().unwrap();
        assert_eq!(obj.class, "datetime");
        assert_eq!(obj.method.as_deref(), Some("fromisoformat"));
        assert_eq!(Ext::from_py_object(ExtCode::MethodSingleArg, &obj), *e);
    }
}
