//! The msgpack encoding of values (cty's wire format, docs/plugin-protocol/object-wire-format.md
//! upstream), driven by the schema's type in both directions.
//!
//! Encoding uses the `rmp` primitives. Decoding walks the bytes with its own bounds-checked
//! cursor over `rmp::Marker`: every length is checked against what remains before anything is
//! allocated, and nesting is bounded, so no byte string can make it panic or exhaust memory.

use std::collections::BTreeMap;

use rmp::Marker;

use super::types::Type;
use super::value::{Number, Refinements, Value};

/// Extension type terraform uses for an unknown value that carries refinements.
const EXT_REFINED_UNKNOWN: i8 = 12;
/// Deeper nesting than this is refused (terraform's own values are far shallower).
const MAX_DEPTH: usize = 100;

#[derive(Debug, Clone, PartialEq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CodecError {}

fn err<T>(msg: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError(msg.into()))
}

// ---------------------------------------------------------------------------------------------
// Encoding

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

// ---------------------------------------------------------------------------------------------
// Decoding

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

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(v: &Value, t: &Type) -> Value {
        let bytes = encode(v, t).unwrap();
        decode(&bytes, t).unwrap()
    }

    #[test]
    fn every_kind_round_trips() {
        let t = Type::object([
            ("b", Type::Bool),
            ("n", Type::Number),
            ("f", Type::Number),
            ("big", Type::Number),
            ("s", Type::String),
            ("l", Type::list(Type::String)),
            ("set", Type::set(Type::Number)),
            ("m", Type::map(Type::Bool)),
            ("t", Type::Tuple(vec![Type::String, Type::Number])),
            ("o", Type::object([("x", Type::String)])),
            ("d", Type::Dynamic),
            ("dn", Type::Dynamic),
            ("nul", Type::String),
            ("unk", Type::list(Type::String)),
        ]);
        let v = Value::object([
            ("b", Value::Bool(true)),
            ("n", Value::int(-70000)),
            ("f", Value::Number(Number::Float(0.25))),
            (
                "big",
                Value::Number(Number::Big("3.14159265358979323846264338327950288".into())),
            ),
            ("s", Value::string("héllo")),
            (
                "l",
                Value::List(vec!["a".into(), Value::UNKNOWN, Value::Null]),
            ),
            ("set", Value::Set(vec![Value::int(1), Value::int(2)])),
            (
                "m",
                Value::Map([("k".to_string(), Value::Bool(false))].into()),
            ),
            (
                "t",
                Value::Tuple(vec!["x".into(), Value::int(u32::MAX as i64 + 1)]),
            ),
            ("o", Value::object([("x", Value::string("y"))])),
            (
                "d",
                Value::Dynamic(
                    Box::new(Type::list(Type::Number)),
                    Box::new(Value::List(vec![Value::int(7)])),
                ),
            ),
            ("dn", Value::Null),
            ("nul", Value::Null),
            ("unk", Value::UNKNOWN),
        ]);
        assert_eq!(round_trip(&v, &t), v);
    }

    #[test]
    fn wire_bytes_match_terraform() {
        assert_eq!(
            encode(&Value::UNKNOWN, &Type::String).unwrap(),
            [0xd4, 0, 0]
        );
        assert_eq!(encode(&Value::Null, &Type::String).unwrap(), [0xc0]);
        // Integral numbers as ints; objects as maps with attributes in name order.
        let t = Type::object([("b", Type::Number), ("a", Type::Bool)]);
        let v = Value::object([
            ("a", Value::Bool(true)),
            ("b", Value::Number(Number::Float(2.0))),
        ]);
        assert_eq!(
            encode(&v, &t).unwrap(),
            [0x82, 0xa1, b'a', 0xc3, 0xa1, b'b', 0x02]
        );
        // Numbers beyond f64 precision travel as strings.
        let big = Value::Number(Number::Big("12345678901234567890123".into()));
        assert_eq!(encode(&big, &Type::Number).unwrap()[0], 0xb7);
    }

    #[test]
    fn refined_unknowns_are_kept_verbatim() {
        // Terraform's refinement: not null (1: true) and a string prefix (2: "sg-").
        let payload = [0x82, 0x01, 0xc3, 0x02, 0xa3, b's', b'g', b'-'];
        let mut bytes = vec![0xc7, payload.len() as u8, 12];
        bytes.extend_from_slice(&payload);
        let v = decode(&bytes, &Type::String).unwrap();
        let Value::Unknown(Some(r)) = &v else {
            panic!("expected a refined unknown, got {v:?}")
        };
        assert!(r.not_null);
        assert_eq!(r.string_prefix.as_deref(), Some("sg-"));
        assert_eq!(encode(&v, &Type::String).unwrap(), bytes);

        // Number bounds and collection lengths.
        let payload = [
            0x84, 0x03, 0x92, 0x01, 0xc3, 0x04, 0x92, 0x0a, 0xc2, 0x05, 0x02, 0x06, 0x09,
        ];
        let mut bytes = vec![0xc7, payload.len() as u8, 12];
        bytes.extend_from_slice(&payload);
        let Value::Unknown(Some(r)) = decode(&bytes, &Type::Number).unwrap() else {
            panic!()
        };
        assert_eq!(r.number_lower, Some((Number::Int(1), true)));
        assert_eq!(r.number_upper, Some((Number::Int(10), false)));
        assert_eq!((r.length_min, r.length_max), (Some(2), Some(9)));
    }

    #[test]
    fn big_numbers_decode_from_every_form() {
        assert_eq!(
            decode(
                &[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                &Type::Number
            )
            .unwrap(),
            Value::Number(Number::Big("18446744073709551615".into()))
        );
        assert_eq!(
            decode(&[0xd0, 0x80], &Type::Number).unwrap(),
            Value::int(-128)
        );
        let mut f = vec![0xcb];
        f.extend_from_slice(&1.5f64.to_bits().to_be_bytes());
        assert_eq!(
            decode(&f, &Type::Number).unwrap(),
            Value::Number(Number::Float(1.5))
        );
        assert!(decode(&[0xa3, b'a', b'b', b'c'], &Type::Number).is_err());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let t = Type::object([("a", Type::list(Type::map(Type::Dynamic)))]);
        for bad in [
            &[][..],
            &[0xc1],
            &[0xdd, 0xff, 0xff, 0xff, 0xff],
            &[0x81, 0xa1, b'z', 0x01],
            &[0x80, 0x00],
        ] {
            assert!(decode(bad, &t).is_err(), "{bad:?}");
        }
        let mut rng = fastrand::Rng::with_seed(7);
        let types = [
            t.clone(),
            Type::Dynamic,
            Type::Tuple(vec![Type::String, Type::Number]),
            Type::set(Type::Bool),
        ];
        for i in 0..5000 {
            let len = rng.usize(0..64);
            let bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            let _ = decode(&bytes, &types[i % types.len()]);
        }
    }
}
