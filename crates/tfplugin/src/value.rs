//! Values as terraform exchanges them: null, unknown (optionally refined), or known, with the
//! structure of their type. Like cty, a value does not carry its type except in a dynamic slot;
//! codecs take the type from the schema.

use std::collections::BTreeMap;
use std::fmt;

use super::types::Type;

/// A number without loss: integers and floats as such, anything else as its decimal text
/// (terraform numbers are arbitrary-precision).
#[derive(Clone, Debug)]
pub enum Number {
    /// A whole number that fits an i64.
    Int(i64),
    /// A number an f64 holds exactly, as its decimal text reads.
    Float(f64),
    /// A decimal literal that fits neither an i64 nor exactly an f64, kept verbatim.
    Big(String),
}

impl Number {
    /// The number as an i64 when it is whole and fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(*i),
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
            Number::Float(_) => None,
            Number::Big(s) => s.parse().ok(),
        }
    }

    /// Parses a decimal literal (as found in JSON or a msgpack string), choosing the most exact form.
    pub fn parse(text: &str) -> Option<Number> {
        if !is_decimal_literal(text) {
            return None;
        }
        if let Ok(i) = text.parse::<i64>() {
            return Some(Number::Int(i));
        }
        // Keep the float form only when printing it back gives the same text: otherwise
        // precision would be lost on the way back to terraform.
        if let Ok(f) = text.parse::<f64>()
            && f.is_finite()
            && format!("{f}") == text
        {
            return Some(Number::Float(f));
        }
        Some(Number::Big(text.to_string()))
    }

    /// The canonical decimal text, used for comparisons and display.
    pub(crate) fn to_decimal(&self) -> String {
        match self {
            Number::Int(i) => i.to_string(),
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => (*f as i64).to_string(),
            Number::Float(f) => format!("{f}"),
            Number::Big(s) => s.clone(),
        }
    }
}

fn is_decimal_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a == b,
            (Number::Float(a), Number::Float(b)) => a == b,
            _ => self.to_decimal() == other.to_decimal(),
        }
    }
}

impl From<i64> for Number {
    fn from(i: i64) -> Number {
        Number::Int(i)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_decimal())
    }
}

/// What terraform knows about an unknown value (cty refinements). The encoded item is kept as
/// it arrived so the value is re-emitted byte for byte; the parsed fields serve validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Refinements {
    /// The msgpack extension's payload as terraform sent it.
    pub raw: Vec<u8>,
    /// The value will not be null.
    pub not_null: bool,
    /// A string value will start with this.
    pub string_prefix: Option<String>,
    /// A number will be at least this (`true`: inclusive).
    pub number_lower: Option<(Number, bool)>,
    /// A number will be at most this (`true`: inclusive).
    pub number_upper: Option<(Number, bool)>,
    /// A collection will have at least this many elements.
    pub length_min: Option<u64>,
    /// A collection will have at most this many elements.
    pub length_max: Option<u64>,
}

/// A terraform value (cty's), shaped by a type the value does not carry.
#[derive(Clone, Debug)]
pub enum Value {
    /// Absent: what an attribute nobody set holds.
    Null,
    /// Not known until apply, with what terraform knows of it when it says.
    Unknown(Option<Box<Refinements>>),
    /// A bool.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(String),
    /// The elements of a list, in order.
    List(Vec<Value>),
    /// Elements in arrival order; equality ignores order.
    Set(Vec<Value>),
    /// The entries of a map.
    Map(BTreeMap<String, Value>),
    /// The attributes of an object.
    Object(BTreeMap<String, Value>),
    /// The elements of a tuple, in order.
    Tuple(Vec<Value>),
    /// A value in a dynamically typed slot, with the concrete type it was given.
    Dynamic(Box<Type>, Box<Value>),
}

impl Value {
    /// Unknown, nothing more said: what a plan gives an attribute the apply decides.
    pub const UNKNOWN: Value = Value::Unknown(None);

    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
    /// A whole number.
    pub fn int(i: i64) -> Value {
        Value::Number(Number::Int(i))
    }
    /// An object of the named attributes.
    pub fn object<I: IntoIterator<Item = (S, Value)>, S: Into<String>>(attrs: I) -> Value {
        Value::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    /// A string or null when absent.
    pub fn opt_string(s: Option<impl Into<String>>) -> Value {
        s.map(|s| Value::String(s.into())).unwrap_or(Value::Null)
    }

    /// Null (also in a dynamic slot).
    pub fn is_null(&self) -> bool {
        match self {
            Value::Null => true,
            Value::Dynamic(_, v) => v.is_null(),
            _ => false,
        }
    }

    /// Known at the top level (its elements may still be unknown).
    pub fn is_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::Dynamic(_, v) => v.is_known(),
            _ => true,
        }
    }

    /// Known all the way down.
    pub fn is_fully_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => v.iter().all(Value::is_fully_known),
            Value::Map(m) | Value::Object(m) => m.values().all(Value::is_fully_known),
            Value::Dynamic(_, v) => v.is_fully_known(),
            _ => true,
        }
    }

    /// This value with every unknown inside it null: what state may hold of a plan (terraform
    /// refuses unknowns in state).
    pub fn unknowns_as_null(&self) -> Value {
        match self {
            Value::Unknown(_) => Value::Null,
            Value::List(v) => Value::List(v.iter().map(Value::unknowns_as_null).collect()),
            Value::Set(v) => Value::Set(v.iter().map(Value::unknowns_as_null).collect()),
            Value::Tuple(v) => Value::Tuple(v.iter().map(Value::unknowns_as_null).collect()),
            Value::Map(m) => Value::Map(
                m.iter()
                    .map(|(k, x)| (k.clone(), x.unknowns_as_null()))
                    .collect(),
            ),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), x.unknowns_as_null()))
                    .collect(),
            ),
            Value::Dynamic(t, v) => Value::Dynamic(t.clone(), Box::new(v.unknowns_as_null())),
            other => other.clone(),
        }
    }

    /// Null or unknown: a value validators and plan modifiers must leave alone.
    pub(crate) fn is_null_or_unknown(&self) -> bool {
        self.is_null() || !self.is_known()
    }

    /// An attribute of a known object; `Null` for anything else, so lookups chain.
    pub fn get(&self, name: &str) -> &Value {
        match self {
            Value::Object(m) => m.get(name).unwrap_or(&Value::Null),
            Value::Dynamic(_, v) => v.get(name),
            _ => &Value::Null,
        }
    }

    /// An attribute of a known object, to change in place; None for anything else.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        match self {
            Value::Object(m) => m.get_mut(name),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Dynamic(_, v) => v.as_str(),
            _ => None,
        }
    }
    /// A bool's value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Dynamic(_, v) => v.as_bool(),
            _ => None,
        }
    }
    /// A number's value.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            Value::Dynamic(_, v) => v.as_number(),
            _ => None,
        }
    }
    /// A number's value as an i64 when it is whole and fits.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }
    /// The elements of a list, set or tuple.
    pub fn elements(&self) -> &[Value] {
        match self {
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => v,
            Value::Dynamic(_, v) => v.elements(),
            _ => &[],
        }
    }
    /// The entries of a map or object.
    pub fn entries(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) | Value::Object(m) => Some(m),
            Value::Dynamic(_, v) => v.entries(),
            _ => None,
        }
    }

    /// A null value shaped for `ty`'s absence: objects become objects of nulls so that nested
    /// attributes can be filled one by one.
    pub fn null_object(ty: &Type) -> Value {
        match ty {
            Type::Object(attrs) => {
                Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect())
            }
            _ => Value::Null,
        }
    }
}

/// Null: what an attribute nobody set holds.
impl Default for Value {
    fn default() -> Value {
        Value::Null
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Unknown(a), Value::Unknown(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::List(a), Value::List(b)) | (Value::Tuple(a), Value::Tuple(b)) => a == b,
            (Value::Set(a), Value::Set(b)) => {
                a.len() == b.len()
                    && a.iter().all(|x| b.contains(x))
                    && b.iter().all(|x| a.contains(x))
            }
            (Value::Map(a), Value::Map(b)) | (Value::Object(a), Value::Object(b)) => a == b,
            (Value::Dynamic(ta, a), Value::Dynamic(tb, b)) => ta == tb && a == b,
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::int(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_precision() {
        assert_eq!(Number::parse("42"), Some(Number::Int(42)));
        assert_eq!(Number::parse("0.5"), Some(Number::Float(0.5)));
        let big = "123456789012345678901234567890.000000000000000000001";
        assert!(matches!(Number::parse(big), Some(Number::Big(ref s)) if s == big));
        assert!(matches!(
            Number::parse("18446744073709551616"),
            Some(Number::Big(_))
        ));
        for bad in ["", "-", "1.", ".5", "1e", "0x10", "1 ", "NaN", "inf"] {
            assert_eq!(Number::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Number::Int(3), Number::Float(3.0));
        assert_eq!(Number::Float(2.0).as_i64(), Some(2));
        assert_eq!(Number::Float(2.5).as_i64(), None);
    }

    #[test]
    fn sets_compare_without_order() {
        let a = Value::Set(vec!["x".into(), "y".into()]);
        let b = Value::Set(vec!["y".into(), "x".into()]);
        assert_eq!(a, b);
        assert_ne!(a, Value::List(vec!["x".into(), "y".into()]));
    }

    #[test]
    fn knownness() {
        let v = Value::object([("a", Value::UNKNOWN), ("b", Value::Null)]);
        assert!(v.is_known());
        assert!(!v.is_fully_known());
        assert!(v.get("b").is_null());
        assert!(v.get("missing").is_null());
    }
}
