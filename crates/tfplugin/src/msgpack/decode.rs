//! Bytes to values, trusting nothing in them: the bytes come from another process, and the fuzz
//! targets feed this cursor arbitrary input.
//!
//! The refinements of an unknown value are decoded here too, at the end: they are values
//! themselves and an unknown value may turn up inside them, so reading them and reading values
//! call each other, and one module holds both.

use std::collections::BTreeMap;

use rmp::Marker;

use super::error::{CodecError, err};
use crate::types::Type;
use crate::value::{Number, Refinements, Value};

/// Extension type terraform uses for an unknown value that carries refinements.
const EXT_REFINED_UNKNOWN: i8 = 12;
/// Deeper nesting than this is refused (terraform's own values are far shallower).
const MAX_DEPTH: usize = 100;

/// A msgpack value from terraform read as a value of `ty`; the whole of `bytes` must be it.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let v = r.value(ty, 0)?;
    if r.pos != bytes.len() {
        return err(format!(
            "{} trailing bytes after the value",
            bytes.len() - r.pos
        ));
    }
    Ok(v)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if n > self.remaining() {
            return err("unexpected end of msgpack data");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    fn be(&mut self, n: usize) -> Result<u64, CodecError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn peek_marker(&self) -> Result<Marker, CodecError> {
        self.buf
            .get(self.pos)
            .map(|b| Marker::from_u8(*b))
            .ok_or_else(|| CodecError("unexpected end of msgpack data".into()))
    }

    fn marker(&mut self) -> Result<Marker, CodecError> {
        Ok(Marker::from_u8(self.byte()?))
    }

    /// A collection length, refused when it cannot possibly fit in what remains
    /// (every element takes at least one byte), so garbage cannot trigger a huge allocation.
    fn checked_len(&self, n: u64, per_item: usize) -> Result<usize, CodecError> {
        let n = usize::try_from(n).map_err(|_| CodecError("length overflow".into()))?;
        if n.saturating_mul(per_item) > self.remaining() {
            return err("collection length exceeds the data");
        }
        Ok(n)
    }

    fn array_len(&mut self) -> Result<usize, CodecError> {
        let n = match self.marker()? {
            Marker::FixArray(n) => u64::from(n),
            Marker::Array16 => self.be(2)?,
            Marker::Array32 => self.be(4)?,
            m => return err(format!("expected an array, found {m:?}")),
        };
        self.checked_len(n, 1)
    }

    fn map_len(&mut self) -> Result<usize, CodecError> {
        let n = match self.marker()? {
            Marker::FixMap(n) => u64::from(n),
            Marker::Map16 => self.be(2)?,
            Marker::Map32 => self.be(4)?,
            m => return err(format!("expected a map, found {m:?}")),
        };
        self.checked_len(n, 2)
    }

    fn str_or_bin(&mut self) -> Result<&'a [u8], CodecError> {
        let n = match self.marker()? {
            Marker::FixStr(n) => u64::from(n),
            Marker::Str8 | Marker::Bin8 => self.be(1)?,
            Marker::Str16 | Marker::Bin16 => self.be(2)?,
            Marker::Str32 | Marker::Bin32 => self.be(4)?,
            m => return err(format!("expected a string, found {m:?}")),
        };
        let n = self.checked_len(n, 1)?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        let b = self.str_or_bin()?;
        String::from_utf8(b.to_vec()).map_err(|_| CodecError("string is not valid UTF-8".into()))
    }

    /// If the next item is an extension (an unknown value), consumes it.
    fn unknown(&mut self) -> Result<Option<Value>, CodecError> {
        let (ext_ty, len) = match self.peek_marker()? {
            Marker::FixExt1 => (None, 1),
            Marker::FixExt2 => (None, 2),
            Marker::FixExt4 => (None, 4),
            Marker::FixExt8 => (None, 8),
            Marker::FixExt16 => (None, 16),
            Marker::Ext8 => (Some(1), 0),
            Marker::Ext16 => (Some(2), 0),
            Marker::Ext32 => (Some(4), 0),
            _ => return Ok(None),
        };
        let start = self.pos;
        self.pos += 1;
        let len = match ext_ty {
            Some(width) => {
                let n = self.be(width)?;
                self.checked_len(n, 1)?
            }
            None => len,
        };
        let type_id = self.byte()? as i8;
        let payload = self.take(len)?;
        if type_id != EXT_REFINED_UNKNOWN {
            return Ok(Some(Value::UNKNOWN));
        }
        let mut refinements = parse_refinements(payload)?;
        refinements.raw = self.buf[start..self.pos].to_vec();
        Ok(Some(Value::Unknown(Some(Box::new(refinements)))))
    }

    fn value(&mut self, ty: &Type, depth: usize) -> Result<Value, CodecError> {
        if depth > MAX_DEPTH {
            return err("value nesting is too deep");
        }
        if self.peek_marker()? == Marker::Null {
            self.pos += 1;
            return Ok(Value::Null);
        }
        if let Some(u) = self.unknown()? {
            return Ok(u);
        }
        match ty {
            Type::Dynamic => {
                if self.array_len()? != 2 {
                    return err("a dynamic value must be a [type, value] pair");
                }
                let type_json = self.str_or_bin()?;
                let inner_ty = Type::from_json_bytes(type_json)
                    .map_err(|e| CodecError(format!("dynamic value: {e}")))?;
                let inner = self.value(&inner_ty, depth + 1)?;
                Ok(Value::Dynamic(Box::new(inner_ty), Box::new(inner)))
            }
            Type::Bool => match self.marker()? {
                Marker::True => Ok(Value::Bool(true)),
                Marker::False => Ok(Value::Bool(false)),
                m => err(format!("expected a bool, found {m:?}")),
            },
            Type::Number => self.number().map(Value::Number),
            Type::String => self.string().map(Value::String),
            Type::List(et) => Ok(Value::List(self.items(et, depth)?)),
            Type::Set(et) => Ok(Value::Set(self.items(et, depth)?)),
            Type::Tuple(types) => {
                let n = self.array_len()?;
                if n != types.len() {
                    return err(format!(
                        "tuple of {} elements where {} were expected",
                        n,
                        types.len()
                    ));
                }
                let items = types
                    .iter()
                    .map(|t| self.value(t, depth + 1))
                    .collect::<Result<_, _>>()?;
                Ok(Value::Tuple(items))
            }
            Type::Map(et) => {
                let n = self.map_len()?;
                let mut m = BTreeMap::new();
                for _ in 0..n {
                    let k = self.string()?;
                    let v = self.value(et, depth + 1)?;
                    if m.insert(k, v).is_some() {
                        return err("duplicate map key");
                    }
                }
                Ok(Value::Map(m))
            }
            Type::Object(attrs) => {
                let n = self.map_len()?;
                let mut m = BTreeMap::new();
                for _ in 0..n {
                    let k = self.string()?;
                    let Some(t) = attrs.get(&k) else {
                        return err(format!("unsupported attribute {k:?}"));
                    };
                    let v = self.value(t, depth + 1)?;
                    if m.insert(k, v).is_some() {
                        return err("duplicate object attribute");
                    }
                }
                for k in attrs.keys() {
                    m.entry(k.clone()).or_insert(Value::Null);
                }
                Ok(Value::Object(m))
            }
        }
    }

    fn items(&mut self, et: &Type, depth: usize) -> Result<Vec<Value>, CodecError> {
        let n = self.array_len()?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(et, depth + 1)?);
        }
        Ok(items)
    }

    fn number(&mut self) -> Result<Number, CodecError> {
        let m = self.marker()?;
        Ok(match m {
            Marker::FixPos(n) => Number::Int(i64::from(n)),
            Marker::FixNeg(n) => Number::Int(i64::from(n)),
            Marker::U8 => Number::Int(self.be(1)? as i64),
            Marker::U16 => Number::Int(self.be(2)? as i64),
            Marker::U32 => Number::Int(self.be(4)? as i64),
            Marker::U64 => {
                let u = self.be(8)?;
                i64::try_from(u)
                    .map(Number::Int)
                    .unwrap_or_else(|_| Number::Big(u.to_string()))
            }
            Marker::I8 => Number::Int(i64::from(self.be(1)? as u8 as i8)),
            Marker::I16 => Number::Int(i64::from(self.be(2)? as u16 as i16)),
            Marker::I32 => Number::Int(i64::from(self.be(4)? as u32 as i32)),
            Marker::I64 => Number::Int(self.be(8)? as i64),
            Marker::F32 => finite(f64::from(f32::from_bits(self.be(4)? as u32)))?,
            Marker::F64 => finite(f64::from_bits(self.be(8)?))?,
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                self.pos -= 1;
                let s = self.string()?;
                Number::parse(&s).ok_or_else(|| CodecError(format!("{s:?} is not a number")))?
            }
            m => return err(format!("expected a number, found {m:?}")),
        })
    }
}

fn finite(f: f64) -> Result<Number, CodecError> {
    if f.is_finite() {
        Ok(Number::Float(f))
    } else {
        err("numbers must be finite")
    }
}

// The refinements terraform attaches to an unknown value (not null, a string prefix, number
// bounds, collection lengths). Their fields are parsed for whatever wants to reason about the
// unknown, but the item itself is kept whole and written back as it came, so that nothing a
// newer terraform adds is lost on the way through.

fn parse_refinements(payload: &[u8]) -> Result<Refinements, CodecError> {
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
