//! The refinements terraform attaches to an unknown value (not null, a string prefix, number
//! bounds, collection lengths). Their fields are parsed for whatever wants to reason about the
//! unknown, but the item itself is kept whole and written back as it came, so that nothing a
//! newer terraform adds is lost on the way through.

use rmp::Marker;

use super::{MAX_DEPTH, Reader};
use crate::msgpack::{CodecError, err};
use crate::types::Type;
use crate::value::{Refinements, Value};

pub(super) fn parse_refinements(payload: &[u8]) -> Result<Refinements, CodecError> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let mut out = Refinements::default();
    let n = r.map_len()?;
    for _ in 0..n {
        let key = r
            .number()?
            .as_i64()
            .ok_or_else(|| CodecError("refinement key must be an integer".into()))?;
        match key {
            1 => out.not_null = r.value(&Type::Bool, 0)?.as_bool().unwrap_or(false),
            2 => out.string_prefix = r.value(&Type::String, 0)?.as_str().map(str::to_string),
            3 | 4 => {
                let bound = r.value(&Type::Tuple(vec![Type::Number, Type::Bool]), 0)?;
                let parts = bound.elements();
                let b = match (parts.first(), parts.get(1)) {
                    (Some(Value::Number(n)), Some(Value::Bool(inc))) => Some((n.clone(), *inc)),
                    _ => None,
                };
                if key == 3 {
                    out.number_lower = b
                } else {
                    out.number_upper = b
                }
            }
            5 | 6 => {
                let len = r.number()?.as_i64().and_then(|i| u64::try_from(i).ok());
                if key == 5 {
                    out.length_min = len
                } else {
                    out.length_max = len
                }
            }
            // Refinements a newer terraform may add: skip them, keep the raw bytes.
            _ => {
                r.value(&Type::Dynamic, 0).or_else(|_| skip_any(&mut r))?;
            }
        }
    }
    Ok(out)
}

/// Skips one msgpack item of any shape (used for refinement keys we do not know).
fn skip_any(r: &mut Reader<'_>) -> Result<Value, CodecError> {
    fn skip(r: &mut Reader<'_>, depth: usize) -> Result<(), CodecError> {
        if depth > MAX_DEPTH {
            return err("value nesting is too deep");
        }
        if r.unknown()?.is_some() {
            return Ok(());
        }
        match r.peek_marker()? {
            Marker::Null | Marker::True | Marker::False => {
                r.pos += 1;
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                for _ in 0..r.array_len()? {
                    skip(r, depth + 1)?;
                }
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                for _ in 0..r.map_len()? * 2 {
                    skip(r, depth + 1)?;
                }
            }
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => {
                r.str_or_bin()?;
            }
            _ => {
                r.number()?;
            }
        }
        Ok(())
    }
    skip(r, 0).map(|()| Value::Null)
}
