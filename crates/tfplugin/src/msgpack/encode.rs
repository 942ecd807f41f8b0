//! Values to bytes. The schema's type decides the shape, so a value that does not fit its type
//! is refused here rather than sent for terraform to reject with a less helpful message.

use super::error::{CodecError, err};
use crate::types::Type;
use crate::value::{Number, Value};

/// A value as msgpack of `ty`, for terraform.
pub fn encode(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(64);
    write_value(&mut out, value, ty)?;
    Ok(out)
}

fn io<T, E: std::fmt::Debug>(r: Result<T, E>) -> Result<T, CodecError> {
    r.map_err(|e| CodecError(format!("msgpack write failed: {e:?}")))
}

fn len32(n: usize) -> Result<u32, CodecError> {
    u32::try_from(n).map_err(|_| CodecError("collection too large".into()))
}

fn write_value(out: &mut Vec<u8>, value: &Value, ty: &Type) -> Result<(), CodecError> {
    match value {
        Value::Unknown(None) => {
            // The plain unknown terraform itself writes: fixext1, type 0, payload 0.
            out.extend_from_slice(&[0xd4, 0, 0]);
            return Ok(());
        }
        // `raw` is the whole extension item as it arrived, header included; refinements built
        // by the provider itself (no raw bytes) travel as a plain unknown.
        Value::Unknown(Some(r)) if !r.raw.is_empty() => {
            out.extend_from_slice(&r.raw);
            return Ok(());
        }
        Value::Unknown(Some(_)) => {
            out.extend_from_slice(&[0xd4, 0, 0]);
            return Ok(());
        }
        Value::Null => {
            io(rmp::encode::write_nil(out))?;
            return Ok(());
        }
        _ => {}
    }
    if *ty == Type::Dynamic {
        let Value::Dynamic(inner_ty, inner) = value else {
            return err("a value in a dynamic slot must carry its type");
        };
        io(rmp::encode::write_array_len(out, 2))?;
        io(rmp::encode::write_bin(out, &inner_ty.to_json_bytes()))?;
        return write_value(out, inner, inner_ty);
    }
    match (value, ty) {
        (Value::Bool(b), Type::Bool) => io(rmp::encode::write_bool(out, *b)),
        (Value::Number(n), Type::Number) => write_number(out, n),
        (Value::String(s), Type::String) => io(rmp::encode::write_str(out, s)),
        (Value::List(items), Type::List(et)) | (Value::Set(items), Type::Set(et)) => {
            io(rmp::encode::write_array_len(out, len32(items.len())?))?;
            items.iter().try_for_each(|v| write_value(out, v, et))
        }
        (Value::Tuple(items), Type::Tuple(types)) => {
            if items.len() != types.len() {
                return err("tuple length does not match its type");
            }
            io(rmp::encode::write_array_len(out, len32(items.len())?))?;
            items
                .iter()
                .zip(types)
                .try_for_each(|(v, t)| write_value(out, v, t))
        }
        (Value::Map(m), Type::Map(et)) => {
            io(rmp::encode::write_map_len(out, len32(m.len())?))?;
            for (k, v) in m {
                io(rmp::encode::write_str(out, k))?;
                write_value(out, v, et)?;
            }
            Ok(())
        }
        (Value::Object(m), Type::Object(attrs)) => {
            if let Some(extra) = m.keys().find(|k| !attrs.contains_key(*k)) {
                return err(format!(
                    "attribute {extra:?} is not part of the object type"
                ));
            }
            io(rmp::encode::write_map_len(out, len32(attrs.len())?))?;
            for (k, t) in attrs {
                io(rmp::encode::write_str(out, k))?;
                write_value(out, m.get(k).unwrap_or(&Value::Null), t)?;
            }
            Ok(())
        }
        (v, t) => err(format!("value {} does not conform to type {t}", kind(v))),
    }
}

fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), CodecError> {
    match n {
        Number::Int(i) => io(rmp::encode::write_sint(out, *i)).map(drop),
        // Integral floats travel as integers, as cty writes them.
        Number::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
            io(rmp::encode::write_sint(out, *f as i64)).map(drop)
        }
        Number::Float(f) => io(rmp::encode::write_f64(out, *f)),
        Number::Big(s) => io(rmp::encode::write_str(out, s)),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Unknown(_) => "unknown",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::List(_) => "list",
        Value::Set(_) => "set",
        Value::Map(_) => "map",
        Value::Object(_) => "object",
        Value::Tuple(_) => "tuple",
        Value::Dynamic(..) => "dynamic",
    }
}
