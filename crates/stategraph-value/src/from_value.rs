//! A `serde::Deserializer` over a borrowed [`Value`]: typed Rust data read straight from the
//! value, accepting exactly what `rmp-serde` accepts from the same value's bytes.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::convert::ConvertError;
use super::serde_impl::EXT_STRUCT;
use super::{Ext, Value};

/// Reads Rust values out of a [`Value`] (borrowing its strings and bytes where the target
/// type can).
#[derive(Clone, Copy)]
pub(crate) struct ValueDeserializer<'a> {
    value: &'a Value,
}

impl<'a> ValueDeserializer<'a> {
    pub(crate) fn new(value: &'a Value) -> Self {
        Self { value }
    }

    fn unexpected(&self) -> de::Unexpected<'a> {
        match self.value {
            Value::Null => de::Unexpected::Unit,
            Value::Bool(b) => de::Unexpected::Bool(*b),
            Value::Int(i) => de::Unexpected::Signed(*i),
            Value::UInt(u) => de::Unexpected::Unsigned(*u),
            Value::Float(f) => de::Unexpected::Float(*f),
            Value::Str(s) => de::Unexpected::Str(s),
            Value::Bytes(b) => de::Unexpected::Bytes(b),
            Value::List(_) => de::Unexpected::Seq,
            Value::Map(_) => de::Unexpected::Map,
            Value::Ext(_) => de::Unexpected::NewtypeStruct,
        }
    }

    /// A sequence where one is expected: bin data reads as its bytes, one by one (as
    /// rmp-serde reads it).
    fn seq_like<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Bytes(b) => {
                visitor.visit_seq(de::value::SeqDeserializer::new(b.iter().copied()))
            }
            _ => self.any(visitor),
        }
    }

    fn any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::UInt(u) => visitor.visit_u64(*u),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::Str(s) => visitor.visit_borrowed_str(s),
            Value::Bytes(b) => visitor.visit_borrowed_bytes(b),
            Value::List(items) => {
                let mut seq = SeqAccess {
                    items: items.iter(),
                    index: 0,
                };
                let out = visitor.visit_seq(&mut seq)?;
                match seq.items.len() {
                    0 => Ok(out),
                    left => Err(de::Error::invalid_length(seq.index + left, &"fewer items")),
                }
            }
            Value::Map(map) => {
                let mut access = MapAccess {
                    entries: map.iter(),
                    value: None,
                };
                let out = visitor.visit_map(&mut access)?;
                match access.entries.len() {
                    0 => Ok(out),
                    left => Err(de::Error::invalid_length(
                        map.len() - left,
                        &"fewer entries",
                    )),
                }
            }
            Value::Ext(e) => visitor.visit_newtype_struct(ExtDeserializer { ext: e }),
        }
    }
}

macro_rules! forward_to_any {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
                self.any(visitor)
            }
        )*
    };
}

impl<'a> de::Deserializer<'a> for ValueDeserializer<'a> {
    type Error = ConvertError;

    fn is_human_readable(&self) -> bool {
        false
    }

    forward_to_any! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64 deserialize_char deserialize_str deserialize_string
        deserialize_bytes deserialize_byte_buf deserialize_unit deserialize_map
        deserialize_identifier
    }

    fn deserialize_i128<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Int(i) => visitor.visit_i128(i128::from(*i)),
            Value::UInt(u) => visitor.visit_i128(i128::from(*u)),
            Value::Bytes(b) => visitor.visit_i128(i128::from_be_bytes(sixteen(b)?)),
            _ => Err(de::Error::invalid_type(
                self.unexpected(),
                &"a 128-bit integer",
            )),
        }
    }

    fn deserialize_u128<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Int(i) => match u128::try_from(*i) {
                Ok(u) => visitor.visit_u128(u),
                Err(_) => Err(de::Error::invalid_value(
                    self.unexpected(),
                    &"an unsigned integer",
                )),
            },
            Value::UInt(u) => visitor.visit_u128(u128::from(*u)),
            Value::Bytes(b) => visitor.visit_u128(u128::from_be_bytes(sixteen(b)?)),
            _ => Err(de::Error::invalid_type(
                self.unexpected(),
                &"a 128-bit integer",
            )),
        }
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::List(l) if l.is_empty() => visitor.visit_unit(),
            _ => self.any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        match self.value {
            Value::Ext(e) if name == EXT_STRUCT => {
                visitor.visit_newtype_struct(ExtDeserializer { ext: e })
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        self.seq_like(visitor)
    }

    fn deserialize_tuple<V: Visitor<'a>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        self.seq_like(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        self.seq_like(visitor)
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        self.seq_like(visitor)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        match self.value {
            // A unit variant is its name; any other variant a one-entry map {name: data}.
            Value::Str(_) => visitor.visit_enum(EnumAccess {
                variant: self.value,
                data: None,
            }),
            Value::Map(m) if m.len() == 1 => {
                let Some((k, v)) = m.iter().next() else {
                    return Err(de::Error::invalid_length(0, &"one entry"));
                };
                visitor.visit_enum(EnumAccess {
                    variant: k,
                    data: Some(v),
                })
            }
            Value::Map(m) => Err(de::Error::invalid_length(m.len(), &"an enum as one entry")),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"an enum")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        visitor.visit_unit()
    }
}

/// A 128-bit integer's 16 big-endian bytes (how rmp-serde writes one).
fn sixteen(b: &[u8]) -> Result<[u8; 16], ConvertError> {
    <[u8; 16]>::try_from(b).map_err(|_| de::Error::invalid_length(b.len(), &"16 bytes"))
}

struct SeqAccess<'a> {
    items: std::slice::Iter<'a, Value>,
    index: usize,
}

impl<'a> de::SeqAccess<'a> for SeqAccess<'a> {
    type Error = ConvertError;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ConvertError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let i = self.index;
        self.index += 1;
        seed.deserialize(ValueDeserializer::new(item))
            .map(Some)
            .map_err(|e| e.at_index(i))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'a, I> {
    entries: I,
    value: Option<(&'a Value, &'a Value)>,
}

impl<'a, I> de::MapAccess<'a> for MapAccess<'a, I>
where
    I: ExactSizeIterator<Item = (&'a Value, &'a Value)>,
{
    type Error = ConvertError;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ConvertError> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((k, v));
        seed.deserialize(ValueDeserializer::new(k)).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, ConvertError> {
        let (k, v) = self
            .value
            .take()
            .ok_or_else(|| ConvertError::new("a map value read before its key"))?;
        seed.deserialize(ValueDeserializer::new(v))
            .map_err(|e| e.at_value_key(k))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A msgpack ext value as rmp-serde presents it: a newtype holding (type code, bytes).
struct ExtDeserializer<'a> {
    ext: &'a Ext,
}

impl<'de> de::Deserializer<'de> for ExtDeserializer<'de> {
    type Error = ConvertError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConvertError> {
        visitor.visit_seq(ExtParts {
            ext: self.ext,
            next: 0,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

struct ExtParts<'a> {
    ext: &'a Ext,
    next: u8,
}

impl<'a> de::SeqAccess<'a> for ExtParts<'a> {
    type Error = ConvertError;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ConvertError> {
        self.next += 1;
        match self.next {
            1 => seed
                .deserialize(self.ext.code().into_deserializer())
                .map(Some),
            2 => seed
                .deserialize(de::value::BorrowedBytesDeserializer::new(self.ext.data()))
                .map(Some),
            _ => Ok(None),
        }
    }
}

/// An enum variant: its name, and its data unless it is a unit variant written as a name.
struct EnumAccess<'a> {
    variant: &'a Value,
    data: Option<&'a Value>,
}

impl<'a> de::EnumAccess<'a> for EnumAccess<'a> {
    type Error = ConvertError;
    type Variant = VariantAccess<'a>;

    fn variant_seed<V: DeserializeSeed<'a>>(
        self,
        seed: V,
    ) -> Result<(V::Value, VariantAccess<'a>), ConvertError> {
        let name = seed.deserialize(ValueDeserializer::new(self.variant))?;
        Ok((
            name,
            VariantAccess {
                variant: self.variant,
                data: self.data,
            },
        ))
    }
}

struct VariantAccess<'a> {
    variant: &'a Value,
    data: Option<&'a Value>,
}

impl<'a> VariantAccess<'a> {
    fn data(&self) -> Result<&'a Value, ConvertError> {
        self.data.ok_or_else(|| {
            de::Error::invalid_type(de::Unexpected::UnitVariant, &"a variant with data")
        })
    }
}

impl<'a> de::VariantAccess<'a> for VariantAccess<'a> {
    type Error = ConvertError;

    fn unit_variant(self) -> Result<(), ConvertError> {
        match self.data {
            None | Some(Value::Null) => Ok(()),
            Some(_) => {
                Err(ConvertError::new("a unit variant carries no data").at_value_key(self.variant))
            }
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'a>>(
        self,
        seed: T,
    ) -> Result<T::Value, ConvertError> {
        let data = self.data()?;
        seed.deserialize(ValueDeserializer::new(data))
            .map_err(|e| e.at_value_key(self.variant))
    }

    fn tuple_variant<V: Visitor<'a>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        let data = self.data()?;
        ValueDeserializer::new(data)
            .seq_like(visitor)
            .map_err(|e| e.at_value_key(self.variant))
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConvertError> {
        let data = self.data()?;
        ValueDeserializer::new(data)
            .seq_like(visitor)
            .map_err(|e| e.at_value_key(self.variant))
    }
}
