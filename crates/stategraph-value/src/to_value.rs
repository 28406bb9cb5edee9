//! A `serde::Serializer` that builds a [`Value`] directly: typed Rust data becomes the value
//! msgpack would have carried (structs as maps of their field names, enums as LangGraph's
//! serializer and `rmp-serde` write them), without encoding bytes and parsing them back.

use serde::ser::{self, Serialize};

use super::convert::ConvertError;
use super::serde_impl::EXT_STRUCT;
use super::{Ext, List, Map, Value};

/// Converts any serializable value into a [`Value`]; the layout is exactly the one
/// `rmp_serde::to_vec_named` writes (so stored bytes do not depend on the path taken).
pub(crate) fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, ConvertError> {
    value.serialize(ValueSerializer)
}

/// Builds a [`Value`] from serde's data model.
pub(crate) struct ValueSerializer;

fn variant_map(variant: &'static str, value: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.push_raw(Value::from(variant), value);
    Value::Map(m)
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = ConvertError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = SeqBuilder;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = MapBuilder;

    fn is_human_readable(&self) -> bool {
        false
    }
    fn serialize_bool(self, v: bool) -> Result<Value, ConvertError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, ConvertError> {
        Ok(Value::Int(v))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, ConvertError> {
        // rmp-serde writes 128-bit integers as 16 big-endian bytes.
        Ok(Value::Bytes(v.to_be_bytes().to_vec()))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, ConvertError> {
        Ok(Value::Int(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, ConvertError> {
        Ok(Value::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, ConvertError> {
        Ok(Value::Bytes(v.to_be_bytes().to_vec()))
    }
    fn serialize_f32(self, v: f32) -> Result<Value, ConvertError> {
        Ok(Value::Float(f64::from(v)))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, ConvertError> {
        Ok(Value::Float(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, ConvertError> {
        let mut buf = [0; 4];
        Ok(Value::from(&*v.encode_utf8(&mut buf)))
    }
    fn serialize_str(self, v: &str) -> Result<Value, ConvertError> {
        Ok(Value::from(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, ConvertError> {
        Ok(Value::Bytes(v.to_vec()))
    }
    fn serialize_none(self) -> Result<Value, ConvertError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, ConvertError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, ConvertError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, ConvertError> {
        // rmp-serde writes a unit struct as an empty array.
        Ok(Value::List(List::new()))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, ConvertError> {
        Ok(Value::from(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<Value, ConvertError> {
        if name != EXT_STRUCT {
            return value.serialize(self);
        }
        // A msgpack ext value (how `Value::Ext` and the Python types serialize): (code, bytes).
        match value.serialize(ValueSerializer)? {
            Value::List(parts) => match parts.as_slice() {
                [Value::Int(code), Value::Bytes(data)] => {
                    let code = i8::try_from(*code)
                        .map_err(|_| ConvertError::new(format!("ext type {code} out of range")))?;
                    Ok(Value::Ext(Ext::from_raw(code, data.clone())))
                }
                _ => Err(ConvertError::new("an ext value is (type code, bytes)")),
            },
            _ => Err(ConvertError::new("an ext value is (type code, bytes)")),
        }
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, ConvertError> {
        Ok(variant_map(variant, value.serialize(self)?))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, ConvertError> {
        Ok(SeqBuilder::new(None, len.unwrap_or(0)))
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, ConvertError> {
        Ok(SeqBuilder::new(None, len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, ConvertError> {
        Ok(SeqBuilder::new(None, len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, ConvertError> {
        Ok(SeqBuilder::new(Some(variant), len))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<MapBuilder, ConvertError> {
        Ok(MapBuilder::new(None, len.unwrap_or(0)))
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MapBuilder, ConvertError> {
        Ok(MapBuilder::new(None, len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<MapBuilder, ConvertError> {
        Ok(MapBuilder::new(Some(variant), len))
    }
}

/// Collects a sequence (or a tuple variant's fields).
pub(crate) struct SeqBuilder {
    variant: Option<&'static str>,
    items: Vec<Value>,
}

impl SeqBuilder {
    fn new(variant: Option<&'static str>, len: usize) -> Self {
        Self {
            variant,
            items: Vec::with_capacity(len.min(4096)),
        }
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ConvertError> {
        let i = self.items.len();
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.at_index(i))?;
        self.items.push(v);
        Ok(())
    }

    fn finish(self) -> Value {
        let list = Value::from(self.items);
        match self.variant {
            Some(variant) => variant_map(variant, list),
            None => list,
        }
    }
}

/// The four sequence-like serde traits, all collecting into a [`SeqBuilder`].
macro_rules! seq_traits {
    ($($trait:ident :: $method:ident),*) => {
        $(
            impl ser::$trait for SeqBuilder {
                type Ok = Value;
                type Error = ConvertError;
                fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ConvertError> {
                    self.push(value)
                }
                fn end(self) -> Result<Value, ConvertError> {
                    Ok(self.finish())
                }
            }
        )*
    };
}

seq_traits!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// Collects a map, a struct's fields or a struct variant's fields, in order.
pub(crate) struct MapBuilder {
    variant: Option<&'static str>,
    map: Map,
    key: Option<Value>,
}

impl MapBuilder {
    fn new(variant: Option<&'static str>, len: usize) -> Self {
        Self {
            variant,
            map: Map::with_capacity(len.min(4096)),
            key: None,
        }
    }

    fn field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ConvertError> {
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.at_key(key))?;
        self.map.push_raw(Value::from(key), v);
        Ok(())
    }

    fn finish(self) -> Value {
        let map = Value::Map(self.map);
        match self.variant {
            Some(variant) => variant_map(variant, map),
            None => map,
        }
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = ConvertError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), ConvertError> {
        self.key = Some(key.serialize(ValueSerializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ConvertError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| ConvertError::new("a map value without its key"))?;
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.at_value_key(&key))?;
        self.map.push_raw(key, v);
        Ok(())
    }
    fn end(self) -> Result<Value, ConvertError> {
        Ok(self.finish())
    }
}

/// The two struct-like serde traits, both collecting fields into a [`MapBuilder`].
macro_rules! struct_traits {
    ($($trait:ident),*) => {
        $(
            impl ser::$trait for MapBuilder {
                type Ok = Value;
                type Error = ConvertError;
                fn serialize_field<T: Serialize + ?Sized>(
                    &mut self,
                    key: &'static str,
                    value: &T,
                ) -> Result<(), ConvertError> {
                    self.field(key, value)
                }
                fn end(self) -> Result<Value, ConvertError> {
                    Ok(self.finish())
                }
            }
        )*
    };
}

struct_traits!(SerializeStruct, SerializeStructVariant);
