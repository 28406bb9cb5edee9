//! Conversions between [`Value`] and JSON.
//!
//! JSON → `Value` is lossless. `Value` → JSON is lossless for plain data; bytes become a list of
//! integers and ext values become `{"__ext__": code, "module", "class", "data", "method"}` (or the
//! raw payload as hex for non-LangGraph layouts). This form is for display and for metadata,
//! never for storage of channel values, which always go through msgpack.

use serde_json::Value as Json;

use super::{Map, Value};

impl From<Json> for Value {
    fn from(j: Json) -> Self {
        match j {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::UInt(u)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(s) => Value::Str(s.into()),
            Json::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            Json::Object(o) => {
                Value::Map(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl Value {
    /// A JSON rendering of this value (see the module docs for bytes and ext values).
    /// Non-finite floats become `null`, as in JSON they cannot be written otherwise.
    pub fn to_json(&self) -> Json {
        match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => Json::from(*i),
            Value::UInt(u) => Json::from(*u),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Value::Str(s) => Json::String(s.to_string()),
            Value::Bytes(b) => Json::Array(b.iter().map(|x| Json::from(*x)).collect()),
            Value::List(l) => Json::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => Json::Object(map_to_json(m)),
            Value::Ext(e) => {
                let mut o = serde_json::Map::new();
                o.insert("__ext__".into(), Json::from(e.code()));
                match e.py_object() {
                    Ok(Some(obj)) => {
                        o.insert("module".into(), Json::String(obj.module));
                        o.insert("class".into(), Json::String(obj.class));
                        o.insert("data".into(), obj.data.to_json());
                        if let Some(m) = obj.method {
                            o.insert("method".into(), Json::String(m));
                        }
                    }
                    _ => match e.payload() {
                        Ok(v) if e.code() == 7 => {
                            o.insert("data".into(), v.to_json());
                        }
                        _ => {
                            let hex: String = e.data().iter().map(|b| format!("{b:02x}")).collect();
                            o.insert("hex".into(), Json::String(hex));
                        }
                    },
                }
                Json::Object(o)
            }
        }
    }
}

fn map_to_json(m: &Map) -> serde_json::Map<String, Json> {
    m.iter()
        .map(|(k, v)| {
            let key = match k {
                Value::Str(s) => s.to_string(),
                other => other.to_string(),
            };
            (key, v.to_json())
        })
        .collect()
}
