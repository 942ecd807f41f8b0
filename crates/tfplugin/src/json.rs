//! Decoding of terraform's JSON value encoding (the `raw_state` of UpgradeResourceState and
//! `DynamicValue.json`), driven by the type.
//!
//! The parser is our own small one rather than serde_json because state numbers are
//! arbitrary-precision: serde_json keeps their text only under its `arbitrary_precision`
//! feature, which is global to the build and changes number handling for every other crate
//! that uses serde_json. Nesting depth and input are bounded; no input can make it panic.

use std::collections::BTreeMap;

use super::msgpack::CodecError;
use super::types::Type;
use super::value::{Number, Value};

const MAX_DEPTH: usize = 100;

/// A JSON document with number literals kept as text.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

/// A JSON document (a stored state, a DynamicValue's JSON form) read as a value of `ty`.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    let mut p = Parser { b: bytes, i: 0 };
    let doc = p.document()?;
    to_value(&doc, ty, 0)
}

fn err<T>(msg: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError(msg.into()))
}

fn to_value(j: &Json, ty: &Type, depth: usize) -> Result<Value, CodecError> {
    if depth > MAX_DEPTH {
        return err("value nesting is too deep");
    }
    if *j == Json::Null {
        return Ok(Value::Null);
    }
    match (ty, j) {
        // cty's JSON form of a dynamic value: {"value": ..., "type": ...}.
        (Type::Dynamic, Json::Obj(fields)) => {
            let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            let (Some(t), Some(v)) = (field("type"), field("value")) else {
                return err("a dynamic value needs \"type\" and \"value\"");
            };
            let inner_ty = Type::from_json_bytes(render(t).as_bytes()).map_err(CodecError)?;
            let inner = to_value(v, &inner_ty, depth + 1)?;
            Ok(Value::Dynamic(Box::new(inner_ty), Box::new(inner)))
        }
        (Type::Bool, Json::Bool(b)) => Ok(Value::Bool(*b)),
        (Type::Number, Json::Num(n)) => Ok(Value::Number(
            Number::parse(n).ok_or_else(|| CodecError(format!("bad number {n}")))?,
        )),
        // Terraform's JSON may carry numbers as strings.
        (Type::Number, Json::Str(s)) => Number::parse(s)
            .map(Value::Number)
            .ok_or_else(|| CodecError(format!("{s:?} is not a number"))),
        (Type::String, Json::Str(s)) => Ok(Value::String(s.clone())),
        // Primitive conversions cty applies when reading state written by older schemas.
        (Type::String, Json::Num(n)) => Ok(Value::String(n.clone())),
        (Type::String, Json::Bool(b)) => Ok(Value::String(b.to_string())),
        (Type::List(et), Json::Arr(items)) => Ok(Value::List(items_of(items, et, depth)?)),
        (Type::Set(et), Json::Arr(items)) => Ok(Value::Set(items_of(items, et, depth)?)),
        (Type::Tuple(types), Json::Arr(items)) => {
            if items.len() != types.len() {
                return err("tuple length does not match its type");
            }
            let v = items
                .iter()
                .zip(types)
                .map(|(j, t)| to_value(j, t, depth + 1))
                .collect::<Result<_, _>>()?;
            Ok(Value::Tuple(v))
        }
        (Type::Map(et), Json::Obj(fields)) => {
            let mut m = BTreeMap::new();
            for (k, v) in fields {
                m.insert(k.clone(), to_value(v, et, depth + 1)?);
            }
            Ok(Value::Map(m))
        }
        (Type::Object(attrs), Json::Obj(fields)) => {
            let mut m: BTreeMap<String, Value> =
                attrs.keys().map(|k| (k.clone(), Value::Null)).collect();
            for (k, v) in fields {
                let Some(t) = attrs.get(k) else {
                    return err(format!("unsupported attribute {k:?}"));
                };
                m.insert(k.clone(), to_value(v, t, depth + 1)?);
            }
            Ok(Value::Object(m))
        }
        (t, j) => err(format!("JSON {} does not conform to type {t}", render(j))),
    }
}

fn items_of(items: &[Json], et: &Type, depth: usize) -> Result<Vec<Value>, CodecError> {
    items.iter().map(|j| to_value(j, et, depth + 1)).collect()
}

/// Renders a parsed document back to JSON text (used for the type part of dynamic values and
/// error messages).
fn render(j: &Json) -> String {
    match j {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Num(n) => n.clone(),
        Json::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        Json::Arr(items) => format!(
            "[{}]",
            items.iter().map(render).collect::<Vec<_>>().join(",")
        ),
        Json::Obj(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{}:{}", serde_json::Value::String(k.clone()), render(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn document(&mut self) -> Result<Json, CodecError> {
        let v = self.value(0)?;
        self.ws();
        if self.i != self.b.len() {
            return err("trailing characters after the JSON value");
        }
        Ok(v)
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, lit: &[u8]) -> Result<(), CodecError> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            err(format!("invalid JSON at byte {}", self.i))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, CodecError> {
        if depth > MAX_DEPTH {
            return err("JSON nesting is too deep");
        }
        self.ws();
        match self.peek() {
            None => err("unexpected end of JSON"),
            Some(b'n') => self.expect(b"null").map(|()| Json::Null),
            Some(b't') => self.expect(b"true").map(|()| Json::Bool(true)),
            Some(b'f') => self.expect(b"false").map(|()| Json::Bool(false)),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return err(format!("expected , or ] at byte {}", self.i)),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return err(format!("expected an object key at byte {}", self.i));
                    }
                    let k = self.string()?;
                    self.ws();
                    self.expect(b":")?;
                    let v = self.value(depth + 1)?;
                    fields.push((k, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return err(format!("expected , or }} at byte {}", self.i)),
                    }
                }
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                let text = std::str::from_utf8(&self.b[start..self.i]).unwrap_or_default();
                match Number::parse(text) {
                    Some(_) => Ok(Json::Num(text.to_string())),
                    None => err(format!("invalid number {text:?}")),
                }
            }
            Some(_) => err(format!("invalid JSON at byte {}", self.i)),
        }
    }

    fn string(&mut self) -> Result<String, CodecError> {
        // Find the closing quote, honouring escapes, then let serde_json unescape the literal.
        let start = self.i;
        self.i += 1;
        loop {
            match self.peek() {
                None => return err("unterminated string"),
                Some(b'\\') => self.i += 2,
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(_) => self.i += 1,
            }
        }
        let lit = self
            .b
            .get(start..self.i)
            .ok_or_else(|| CodecError("unterminated string".into()))?;
        serde_json::from_slice::<String>(lit)
            .map_err(|e| CodecError(format!("invalid string: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_json_decodes_by_type() {
        let t = Type::object([
            ("id", Type::String),
            ("count", Type::Number),
            ("huge", Type::Number),
            ("labels", Type::map(Type::String)),
            (
                "rules",
                Type::list(Type::object([
                    ("key", Type::String),
                    ("effect", Type::String),
                ])),
            ),
            ("dyn", Type::Dynamic),
            ("gone", Type::Bool),
        ]);
        let json = br#"{"id":"a\"b","count":3,"huge":123456789012345678901234567890.5,
            "labels":{"team":"ml"},"rules":[{"key":"k","effect":"Allow"}],
            "dyn":{"value":["x"],"type":["list","string"]}}"#;
        let v = decode(json, &t).unwrap();
        assert_eq!(v.get("id").as_str(), Some("a\"b"));
        assert_eq!(v.get("count").as_i64(), Some(3));
        assert_eq!(
            v.get("huge").as_number().unwrap().to_decimal(),
            "123456789012345678901234567890.5"
        );
        assert_eq!(
            v.get("rules").elements()[0].get("effect").as_str(),
            Some("Allow")
        );
        assert_eq!(v.get("dyn").elements(), &[Value::string("x")]);
        assert!(v.get("gone").is_null());
    }

    #[test]
    fn garbage_is_an_error() {
        let t = Type::object([("a", Type::String)]);
        for bad in [
            "",
            "{",
            "{\"a\":}",
            "{\"b\":\"x\"}",
            "[1,",
            "\"\\",
            "{\"a\":\"x\"} x",
            "01x",
        ] {
            assert!(decode(bad.as_bytes(), &t).is_err(), "{bad}");
        }
        let deep = "[".repeat(100_000);
        assert!(decode(deep.as_bytes(), &Type::Dynamic).is_err());
    }
}
