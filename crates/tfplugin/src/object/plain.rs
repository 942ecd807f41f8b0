//! The plain field types: strings, bools, integers, `Option` (null is `None`), lists and maps.

use std::collections::BTreeMap;

use super::convert::{FromValue, Parts, ToValue};
use super::error::DecodeError;
use crate::diag::Step;
use crate::value::{Number, Value};

impl FromValue for String {
    const EXPECTED: &'static str = "a string";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| DecodeError::new(Self::EXPECTED, v))
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

impl FromValue for bool {
    const EXPECTED: &'static str = "a bool";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        v.as_bool()
            .ok_or_else(|| DecodeError::new(Self::EXPECTED, v))
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl FromValue for i64 {
    const EXPECTED: &'static str = "a whole number";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        v.as_i64()
            .ok_or_else(|| DecodeError::new(Self::EXPECTED, v))
    }
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::int(*self)
    }
}

impl FromValue for u32 {
    const EXPECTED: &'static str = "a whole number from 0 to 4294967295";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        v.as_i64()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| DecodeError::new(Self::EXPECTED, v))
    }
}

impl ToValue for u32 {
    fn to_value(&self) -> Value {
        Value::int((*self).into())
    }
}

impl FromValue for u64 {
    const EXPECTED: &'static str = "a whole number from 0";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        v.as_i64()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| DecodeError::new(Self::EXPECTED, v))
    }
}

impl ToValue for u64 {
    fn to_value(&self) -> Value {
        // Terraform numbers are arbitrary precision; past i64 the decimal text keeps it exact.
        i64::try_from(*self)
            .map(Value::int)
            .unwrap_or_else(|_| Value::Number(Number::Big(self.to_string())))
    }
}

impl<T: FromValue> FromValue for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        if !v.is_known() {
            return Err(DecodeError::new(Self::EXPECTED, v));
        }
        if v.is_null() {
            return Ok(None);
        }
        T::from_value(v).map(Some)
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map(T::to_value).unwrap_or(Value::Null)
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    const EXPECTED: &'static str = "a list";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        match v {
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                let mut parts = Parts::default();
                let mut out = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    out.extend(parts.read(x, Some(Step::Index(i as i64))));
                }
                parts.done().map(|()| out)
            }
            Value::Dynamic(_, inner) => Self::from_value(inner),
            _ => Err(DecodeError::new(Self::EXPECTED, v)),
        }
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn to_value(&self) -> Value {
        Value::List(self.iter().map(T::to_value).collect())
    }
}

impl<T: FromValue> FromValue for BTreeMap<String, T> {
    const EXPECTED: &'static str = "a map";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        match v {
            Value::Map(m) => {
                let mut parts = Parts::default();
                let mut out = BTreeMap::new();
                for (k, x) in m {
                    if let Some(t) = parts.read(x, Some(Step::Key(k.clone()))) {
                        out.insert(k.clone(), t);
                    }
                }
                parts.done().map(|()| out)
            }
            Value::Dynamic(_, inner) => Self::from_value(inner),
            _ => Err(DecodeError::new(Self::EXPECTED, v)),
        }
    }
}

impl<T: ToValue> ToValue for BTreeMap<String, T> {
    fn to_value(&self) -> Value {
        Value::Map(
            self.iter()
                .map(|(k, t)| (k.clone(), t.to_value()))
                .collect(),
        )
    }
}
