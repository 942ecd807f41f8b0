//! The two conversions every model has ([`FromValue`], [`ToValue`]), the reader of a value's
//! parts that models and collections decode with ([`Parts`]), and a [`Value`] carried as it is.

use super::error::DecodeError;
use crate::diag::Step;
use crate::value::Value;

/// A type read from a value.
pub trait FromValue: Sized {
    /// What a value must be to read as this type, as a diagnostic says it ("a string").
    const EXPECTED: &'static str = "a value";

    /// The typed value, or why `v` does not fit (see the module's rules).
    fn from_value(v: &Value) -> Result<Self, DecodeError>;
}

/// A type written as a value.
pub trait ToValue {
    /// The value terraform receives, shaped as the schema declares it.
    fn to_value(&self) -> Value;
}

/// An attribute the model carries through untouched (e.g. the `timeouts` block from a plan into
/// state).
impl FromValue for Value {
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        Ok(v.clone())
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

/// Writes a model's attributes into `target` (an object value), leaving its other attributes
/// as they are: how a plan or a state gets the attributes one model owns.
pub fn merge(target: &mut Value, model: &impl ToValue) {
    if let (Value::Object(t), Value::Object(m)) = (target, model.to_value()) {
        t.extend(m);
    }
}

/// Reads the parts of one value (an object's fields, a collection's elements), each part to the
/// end even after an unknown, so that a mismatch after it is still the one reported. For
/// [`object!`](crate::object!) and the collections; a hand-written model may use it too.
#[derive(Default)]
pub struct Parts {
    error: Option<DecodeError>,
}

impl Parts {
    /// The parts of an object model's value, or why it is not one.
    pub fn of_object(v: &Value) -> Result<Parts, DecodeError> {
        match v.entries() {
            Some(_) if v.is_known() => Ok(Parts::default()),
            _ => Err(DecodeError::new("an object", v)),
        }
    }

    /// One part, reached from the whole by `step` (none for a flattened model, which reads the
    /// same object); `None` when it does not read, or once a mismatch is found (the rest no
    /// longer matters).
    pub fn read<T: FromValue>(&mut self, v: &Value, step: Option<Step>) -> Option<T> {
        if self.error.as_ref().is_some_and(|e| !e.is_unknown()) {
            return None;
        }
        match T::from_value(v) {
            Ok(t) => Some(t),
            Err(e) => {
                let e = match step {
                    Some(s) => e.under(s),
                    None => e,
                };
                self.error = Some(match self.error.take() {
                    Some(first) => first.worse(e),
                    None => e,
                });
                None
            }
        }
    }

    /// A field of an object model, by its attribute name.
    pub fn field<T: FromValue>(&mut self, v: &Value, name: &str) -> Option<T> {
        self.read(v.get(name), Some(Step::Attr(name.to_string())))
    }

    /// The error to report when a part did not read; `Ok` when every part read.
    pub fn done(self) -> Result<(), DecodeError> {
        self.error.map_or(Ok(()), Err)
    }
}
