//! The `Serializer` trait and LangGraph's default `JsonPlusSerializer`.
//!
//! A serializer turns a [`Value`] into `(type_tag, bytes)` and back. The tags and the byte
//! layouts are LangGraph's, so a row written by either side can be read by the other.

use std::fmt;

use stategraph_value::{
    DecodeCache, DecodeLimits, Value, decode_shared, decode_with_limits, encode,
};
pub use stategraph_value::{SerdeError, tags};

/// Deserializes bytes stored under `type_tag` with `serde`: through `cache`
/// ([`Serializer::loads_typed_shared`]) where the read has one, else alone
/// ([`Serializer::loads_typed`]). For readers that decode one value or many with the same code.
pub fn loads_typed_with(
    serde: &dyn Serializer,
    type_tag: &str,
    data: &[u8],
    cache: Option<&mut DecodeCache>,
) -> Result<Value, SerdeError> {
    match cache {
        Some(cache) => serde.loads_typed_shared(type_tag, data, cache),
        None => serde.loads_typed(type_tag, data),
    }
}

/// Turns values into typed bytes and back; LangGraph's `SerializerProtocol`.
pub trait Serializer: Send + Sync + fmt::Debug {
    /// Serializes `value`, returning its type tag and bytes.
    fn dumps_typed(&self, value: &Value) -> Result<(String, Vec<u8>), SerdeError>;
    /// Deserializes bytes stored under `type_tag`.
    fn loads_typed(&self, type_tag: &str, data: &[u8]) -> Result<Value, SerdeError>;

    /// Deserializes bytes stored under `type_tag` as one of many values read together (a
    /// listing's checkpoints and writes): parts whose bytes were decoded before through
    /// `cache` are shared instead of decoded again. The result must equal
    /// [`loads_typed`](Self::loads_typed)'s; the default ignores the cache.
    fn loads_typed_shared(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: &mut DecodeCache,
    ) -> Result<Value, SerdeError> {
        let _ = cache;
        self.loads_typed(type_tag, data)
    }

    /// Deserializes a stored checkpoint (the map [`Checkpoint::to_value`] gives) stored
    /// under `type_tag`, sharing through `cache`, if any, as
    /// [`loads_typed_shared`](Self::loads_typed_shared) does. The result must equal
    /// [`Checkpoint::from_value`] of [`loads_typed`](Self::loads_typed)'s, and so must the
    /// error; the default does exactly that. [`JsonPlusSerializer`] reads msgpack straight
    /// into the checkpoint's fields.
    ///
    /// [`Checkpoint::to_value`]: crate::Checkpoint::to_value
    /// [`Checkpoint::from_value`]: crate::Checkpoint::from_value
    fn loads_checkpoint(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: Option<&mut DecodeCache>,
    ) -> Result<crate::Checkpoint, SerdeError> {
        let value = match cache {
            Some(cache) => self.loads_typed_shared(type_tag, data, cache),
            None => self.loads_typed(type_tag, data),
        }?;
        crate::Checkpoint::from_value(value)
    }

    /// Whether savers with LangGraph's blob layout (Postgres, MySQL) may keep primitive
    /// channel values (None, str, numbers, bool) inline in the checkpoint's JSON, in the
    /// clear, as LangGraph does. `false` sends every value through this serializer into a
    /// blob row. Default `true`.
    fn inline_primitives(&self) -> bool {
        true
    }
}

/// LangGraph's default serializer: `null` for `None`, `bytes` for top-level bytes, msgpack
/// (with LangGraph's ext types kept as [`crate::Ext`]) for everything else; reads the legacy
/// `json` tag and `bytearray`. Decoding is strict and bounded by [`DecodeLimits`].
///
/// Like LangGraph's, it honours `LANGGRAPH_STRICT_MSGPACK`: when the variable is `1`, `true`
/// or `yes` (any case), [`new`](Self::new) refuses stored values carrying Python classes
/// outside LangGraph's safe types (see [`strict`](Self::strict)).
#[derive(Debug, Clone)]
pub struct JsonPlusSerializer {
    limits: DecodeLimits,
    strict: Option<stategraph_value::allowlist::Allowlist>,
}

impl Default for JsonPlusSerializer {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `LANGGRAPH_STRICT_MSGPACK` asks for strict decoding (as LangGraph reads it).
pub(crate) fn strict_msgpack_from_env() -> bool {
    std::env::var("LANGGRAPH_STRICT_MSGPACK")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

impl JsonPlusSerializer {
    /// A serializer with the default decoding limits; strict when `LANGGRAPH_STRICT_MSGPACK`
    /// says so.
    pub fn new() -> Self {
        Self::with_limits(DecodeLimits::default())
    }

    /// A serializer that decodes every Python class (as LangGraph does without
    /// `LANGGRAPH_STRICT_MSGPACK`), whatever the environment says.
    pub fn permissive() -> Self {
        Self {
            limits: DecodeLimits::default(),
            strict: None,
        }
    }

    /// A serializer with custom decoding limits; strict when `LANGGRAPH_STRICT_MSGPACK` says
    /// so.
    pub fn with_limits(limits: DecodeLimits) -> Self {
        Self {
            limits,
            strict: strict_msgpack_from_env().then(stategraph_value::allowlist::Allowlist::safe),
        }
    }

    /// Refuses values carrying Python classes outside `allowlist` (LangGraph's
    /// `LANGGRAPH_STRICT_MSGPACK`), naming where they were found.
    pub fn strict(mut self, allowlist: stategraph_value::allowlist::Allowlist) -> Self {
        self.strict = Some(allowlist);
        self
    }
}

impl Serializer for JsonPlusSerializer {
    fn dumps_typed(&self, value: &Value) -> Result<(String, Vec<u8>), SerdeError> {
        Ok(match value {
            Value::Null => (tags::NULL.to_owned(), Vec::new()),
            Value::Bytes(b) => (tags::BYTES.to_owned(), b.clone()),
            other => (tags::MSGPACK.to_owned(), encode(other)),
        })
    }

    fn loads_typed(&self, type_tag: &str, data: &[u8]) -> Result<Value, SerdeError> {
        self.load(type_tag, data, None)
    }

    fn loads_typed_shared(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: &mut DecodeCache,
    ) -> Result<Value, SerdeError> {
        self.load(type_tag, data, Some(cache))
    }

    fn loads_checkpoint(
        &self,
        type_tag: &str,
        data: &[u8],
        mut cache: Option<&mut DecodeCache>,
    ) -> Result<crate::Checkpoint, SerdeError> {
        if type_tag == tags::MSGPACK
            && let Some(checkpoint) = crate::Checkpoint::from_msgpack(
                data,
                self.limits,
                cache.as_deref_mut(),
                self.strict.as_ref(),
            )
        {
            return Ok(checkpoint);
        }
        // Whatever the direct read does not take, the full decode reads, or says what is
        // wrong and where.
        crate::Checkpoint::from_value(self.load(type_tag, data, cache)?)
    }
}

impl JsonPlusSerializer {
    fn load(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: Option<&mut DecodeCache>,
    ) -> Result<Value, SerdeError> {
        match type_tag {
            tags::NULL => Ok(Value::Null),
            tags::BYTES | tags::BYTEARRAY => Ok(Value::Bytes(data.to_vec())),
            tags::MSGPACK => {
                let decoded = match cache {
                    Some(cache) => decode_shared(data, self.limits, cache),
                    None => decode_with_limits(data, self.limits),
                };
                let value = decoded.map_err(|source| SerdeError::Decode {
                    tag: type_tag.to_owned(),
                    source,
                })?;
                if let Some(list) = &self.strict {
                    list.check(&value)?;
                }
                Ok(value)
            }
            tags::JSON => serde_json::from_slice::<serde_json::Value>(data)
                .map(Value::from)
                .map_err(|e| SerdeError::Shape {
                    path: String::new(),
                    message: format!("invalid legacy JSON: {e}"),
                }),
            tags::PICKLE => Err(SerdeError::Unsupported {
                tag: type_tag.to_owned(),
                reason: "Python pickle can only be read by Python; re-save the thread without \
                         LangGraph's pickle_fallback"
                    .to_owned(),
            }),
            other if other.contains('+') => Err(SerdeError::Unsupported {
                tag: other.to_owned(),
                reason: "the data is encrypted; read it with an EncryptedSerializer holding the \
                         key (LANGGRAPH_AES_KEY)"
                    .to_owned(),
            }),
            other => Err(SerdeError::UnknownType(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_langgraph() {
        let s = JsonPlusSerializer::new();
        assert_eq!(
            s.dumps_typed(&Value::Null).unwrap(),
            ("null".into(), vec![])
        );
        assert_eq!(
            s.dumps_typed(&Value::Bytes(vec![1, 2])).unwrap(),
            ("bytes".into(), vec![1, 2])
        );
        assert_eq!(s.dumps_typed(&Value::Int(1)).unwrap().0, "msgpack");
        assert_eq!(
            s.loads_typed("bytearray", &[3]).unwrap(),
            Value::Bytes(vec![3])
        );
    }

    #[test]
    fn unknown_and_pickle_tags_are_typed_errors() {
        let s = JsonPlusSerializer::new();
        assert_eq!(
            s.loads_typed("cbor", &[]).unwrap_err(),
            SerdeError::UnknownType("cbor".into())
        );
        assert!(matches!(
            s.loads_typed("pickle", &[0x80]).unwrap_err(),
            SerdeError::Unsupported { .. }
        ));
    }

    #[test]
    fn legacy_json_is_readable() {
        let s = JsonPlusSerializer::new();
        assert_eq!(
            s.loads_typed("json", br#"{"a": [1, "x"]}"#).unwrap(),
            crate::value!({"a": [1, "x"]})
        );
    }
}
