//! msgpack encoding with ormsgpack's choices: the smallest integer and length markers, floats
//! always as float64, fixext when the payload length allows it.

use super::Value;

/// Encodes `value` as msgpack.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode_into(value, &mut out);
    out
}

/// Appends the msgpack encoding of `value` to `out`.
pub fn encode_into(value: &Value, out: &mut Vec<u8>) {
    write_value(value, out);
}

// Writing into a Vec cannot fail; rmp's error types exist for generic writers only, so the
// results below are deliberately ignored.
fn write_value(value: &Value, out: &mut Vec<u8>) {
    use rmp::encode as e;
    match value {
        Value::Null => {
            let _ = e::write_nil(out);
        }
        Value::Bool(b) => {
            let _ = e::write_bool(out, *b);
        }
        Value::Int(i) if *i >= 0 => {
            let _ = e::write_uint(out, i.unsigned_abs());
        }
        Value::Int(i) => {
            let _ = e::write_sint(out, *i);
        }
        Value::UInt(u) => {
            let _ = e::write_uint(out, *u);
        }
        Value::Float(f) => {
            let _ = e::write_f64(out, *f);
        }
        Value::Str(s) => {
            let _ = e::write_str(out, s);
        }
        Value::Bytes(b) => {
            let _ = e::write_bin(out, b);
        }
        Value::List(items) => {
            let _ = e::write_array_len(out, len32(items.len()));
            for item in items {
                write_value(item, out);
            }
        }
        Value::Map(map) => {
            let _ = e::write_map_len(out, len32(map.len()));
            for (k, v) in map.iter() {
                write_value(k, out);
                write_value(v, out);
            }
        }
        Value::Ext(ext) => {
            let _ = e::write_ext_meta(out, len32(ext.data().len()), ext.code());
            out.extend_from_slice(ext.data());
        }
    }
}

/// msgpack lengths are 32-bit; a longer container cannot be represented. We saturate, which
/// makes the decoder reject the value instead of silently mis-framing it (4 GiB collections do
/// not occur in checkpoints).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Map;

    fn hex(v: &Value) -> String {
        encode(v).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn integers_use_the_smallest_marker_like_ormsgpack() {
        assert_eq!(hex(&Value::Int(7)), "07");
        assert_eq!(hex(&Value::Int(-3)), "fd");
        assert_eq!(hex(&Value::Int(200)), "ccc8");
        assert_eq!(hex(&Value::Int(-100)), "d09c");
        assert_eq!(hex(&Value::UInt(1 << 63)), "cf8000000000000000");
    }

    #[test]
    fn floats_are_always_float64() {
        assert_eq!(hex(&Value::Float(1.5)), "cb3ff8000000000000");
    }

    #[test]
    fn map_and_str_layout() {
        let mut m = Map::new();
        m.insert("foo", "");
        assert_eq!(hex(&Value::Map(m)), "81a3666f6fa0");
        assert_eq!(hex(&Value::from(vec!["a".into()])), "91a161");
    }
}
