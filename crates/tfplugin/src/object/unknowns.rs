//! The field types that say what an unknown or an absence reads as: [`Known`] (unknown is
//! `None`), [`MaybeUnknown`] (unknown kept as it came) and [`SingleBlock`] (a block of at most one).

use super::convert::{FromValue, ToValue};
use super::error::DecodeError;
use crate::diag::Step;
use crate::value::{Refinements, Value};

/// An optional + computed argument: the value when known, `None` when null or unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known<T>(pub Option<T>);

/// A value a plan may not know yet, kept as it is: unlike [`Known`], an unknown is written back
/// unknown, with what terraform knows of it.
#[derive(Clone, Debug, PartialEq)]
pub enum MaybeUnknown<T> {
    /// Known; `T = Option<_>` where null is allowed.
    Known(T),
    /// Unknown, with the refinements terraform gave (none for one the provider plans).
    Unknown(Option<Box<Refinements>>),
}

impl<T> MaybeUnknown<T> {
    /// Unknown, nothing more said: what a plan gives an attribute the apply decides.
    pub const UNKNOWN: MaybeUnknown<T> = MaybeUnknown::Unknown(None);

    /// Whether the value is known.
    pub fn is_known(&self) -> bool {
        matches!(self, MaybeUnknown::Known(_))
    }

    /// The value when known.
    pub fn known(&self) -> Option<&T> {
        match self {
            MaybeUnknown::Known(t) => Some(t),
            MaybeUnknown::Unknown(_) => None,
        }
    }
}

/// Known and empty (null for an `Option`), as an attribute nobody set.
impl<T: Default> Default for MaybeUnknown<T> {
    fn default() -> Self {
        MaybeUnknown::Known(T::default())
    }
}

impl<T: FromValue> FromValue for MaybeUnknown<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        match v {
            Value::Unknown(r) => Ok(MaybeUnknown::Unknown(r.clone())),
            _ if !v.is_known() => Ok(MaybeUnknown::UNKNOWN),
            _ => T::from_value(v).map(MaybeUnknown::Known),
        }
    }
}

impl<T: ToValue> ToValue for MaybeUnknown<T> {
    fn to_value(&self) -> Value {
        match self {
            MaybeUnknown::Known(t) => t.to_value(),
            MaybeUnknown::Unknown(r) => Value::Unknown(r.clone()),
        }
    }
}

/// A block of at most one: `None` when absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SingleBlock<T>(pub Option<T>);

// By hand: derived, these would ask `T: Default` of an empty value.
impl<T> Default for Known<T> {
    fn default() -> Self {
        Known(None)
    }
}

impl<T> Default for SingleBlock<T> {
    fn default() -> Self {
        SingleBlock(None)
    }
}

impl<T> std::ops::Deref for Known<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> std::ops::Deref for SingleBlock<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> From<Option<T>> for Known<T> {
    fn from(v: Option<T>) -> Known<T> {
        Known(v)
    }
}

impl<T> From<Option<T>> for SingleBlock<T> {
    fn from(v: Option<T>) -> SingleBlock<T> {
        SingleBlock(v)
    }
}

impl<T: FromValue> FromValue for Known<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        if v.is_null_or_unknown() {
            return Ok(Known(None));
        }
        T::from_value(v).map(|t| Known(Some(t)))
    }
}

impl<T: ToValue> ToValue for Known<T> {
    fn to_value(&self) -> Value {
        self.0.to_value()
    }
}

impl<T: FromValue> FromValue for SingleBlock<T> {
    const EXPECTED: &'static str = "a block of at most one";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        if !v.is_known() {
            return Err(DecodeError::new(Self::EXPECTED, v));
        }
        if v.is_null() {
            return Ok(SingleBlock(None));
        }
        match v {
            Value::Dynamic(_, inner) => Self::from_value(inner),
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                match items.as_slice() {
                    [] => Ok(SingleBlock(None)),
                    [one] => T::from_value(one)
                        .map(|t| SingleBlock(Some(t)))
                        .map_err(|e| e.under(Step::Index(0))),
                    _ => Err(DecodeError::new(Self::EXPECTED, v)),
                }
            }
            _ => Err(DecodeError::new(Self::EXPECTED, v)),
        }
    }
}

impl<T: ToValue> ToValue for SingleBlock<T> {
    fn to_value(&self) -> Value {
        Value::List(self.0.iter().map(T::to_value).collect())
    }
}
