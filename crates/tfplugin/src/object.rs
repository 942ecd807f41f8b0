//! Typed models of Terraform objects. A resource or data source declares one struct per object
//! with [`object!`](crate::object!): the field names are the attribute names, written once, and
//! the macro writes the two conversions, so handlers work with Rust types instead of looking
//! attributes up by string.
//!
//! Decoding gives the model, or a [`DecodeError`] with the path of the attribute that did not fit
//! (list indexes and map keys included: `eks[0].subnet_ids[2]`), what the model expected there
//! and what the value held. What each field type takes:
//! - `String`, `bool`, `i64`, `u32`, `u64`, lists (`Vec`), maps (`BTreeMap`) and models: a known,
//!   non-null value of that shape; a number must be whole and fit the integer type.
//! - `Option<T>`: null is `None`. For optional arguments whose absence means something (no
//!   labels, no override).
//! - [`Known<T>`]: null and unknown are both `None`. For optional + computed arguments, where an
//!   unknown value in a plan means "the provider decides", as an absent one does.
//! - [`MaybeUnknown<T>`]: unknown is [`MaybeUnknown::Unknown`], anything else reads as `T`; written
//!   back as it came. For what a plan derives or leaves to the apply, and arguments that may
//!   depend on other resources.
//! - [`SingleBlock<T>`]: a block of at most one (a list of zero or one objects; null is none).
//! - [`Value`]: anything, carried through untouched.
//!
//! An attribute the value lacks reads as null. The failures come in two kinds, kept apart
//! because a handler answers them differently:
//! - *Unknown* ([`DecodeError::is_unknown`]): a value the model needs is not known yet. Normal in
//!   a plan, since a handler cannot act on half a configuration: it derives nothing, quietly, and
//!   the plan leaves what it would derive unknown. Anywhere else (apply, state) a provider bug.
//! - *Mismatch*: null where a value is required, or another type or shape. Terraform checked the
//!   configuration, plan or state against the schema already, so either the model disagrees with
//!   its schema (a provider bug) or another provider version wrote the state. Always an error
//!   diagnostic on the attribute ([`DecodeError::diagnostic`], [`DecodeError::state_diagnostic`]),
//!   never a silent skip. A mismatch wins over an unknown elsewhere in the same value, so an
//!   unknown in a plan cannot hide one.
//!
//! [`Decoded`] turns a result into the model or those diagnostics in one call.
//!
//! Encoding writes every field, so a model's value has the shape its schema gives terraform.

use std::collections::BTreeMap;
use std::fmt;

use crate::diag::{AttrPath, Diagnostic, Diagnostics, Step};
use crate::value::{Number, Refinements, Value};

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

/// What a value held where it did not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Not known yet: normal in a plan.
    Unknown,
    /// Null where the model needs a value.
    Null,
    /// A value of another type or shape, described without its content when that is text
    /// (which may be a secret), e.g. "a string", "the number 2.5", "a list of 2".
    Other(String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Unknown => f.write_str("unknown"),
            Found::Null => f.write_str("null"),
            Found::Other(d) => f.write_str(d),
        }
    }
}

/// Why a value does not read as a model: where (the attribute path from the decoded value),
/// what the model expected there, and what was found.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    path: AttrPath,
    expected: &'static str,
    found: Found,
}

impl DecodeError {
    /// `v` read as something it is not: null, unknown, or another shape, at the value itself
    /// (the callers that hold it add their steps with [`DecodeError::under`]).
    pub fn new(expected: &'static str, v: &Value) -> DecodeError {
        let found = if !v.is_known() {
            Found::Unknown
        } else if v.is_null() {
            Found::Null
        } else {
            Found::Other(describe(v))
        };
        DecodeError {
            path: AttrPath::root(),
            expected,
            found,
        }
    }

    /// This error as the value that holds the one decoded sees it: `step` leads to it.
    pub fn under(mut self, step: Step) -> DecodeError {
        self.path.0.insert(0, step);
        self
    }

    /// The path of the attribute that did not fit, from the value decoded.
    pub fn path(&self) -> &AttrPath {
        &self.path
    }

    /// What the model expected there.
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// What the value held there.
    pub fn found(&self) -> &Found {
        &self.found
    }

    /// Only not known yet: what a plan expects of a configuration, and no mismatch.
    pub fn is_unknown(&self) -> bool {
        self.found == Found::Unknown
    }

    /// The attribute as a detail names it; None for the decoded value itself.
    fn attribute(&self) -> Option<String> {
        (!self.path.0.is_empty()).then(|| format!("`{}`", self.path))
    }

    fn located(&self, d: Diagnostic) -> Diagnostic {
        if self.path.0.is_empty() {
            d
        } else {
            d.at(self.path.clone())
        }
    }

    /// The error diagnostic for a configuration or plan, which terraform checked against the
    /// schema: whatever does not fit is the provider's bug, so the detail says to report it.
    pub fn diagnostic(&self) -> Diagnostic {
        let detail = match self.found {
            Found::Unknown => format!(
                "{} is still unknown where the provider needs {} known. Terraform knows every \
                    value of the configuration at apply, so this is a bug in the provider's plan; \
                    please report it with this message.",
                self.attribute().unwrap_or_else(|| "The object".to_string()),
                self.expected
            ),
            _ => format!(
                "{} should be {}, but is {}. Terraform checked this value against the provider's \
                    schema, so the schema and the provider's model of it disagree: this is a bug \
                    in the provider; please report it with this message.",
                self.attribute().unwrap_or_else(|| "The object".to_string()),
                self.expected,
                self.found
            ),
        };
        self.located(Diagnostic::error("Unexpected value", detail))
    }

    /// The error diagnostic for a stored state, which another provider version may have
    /// written: the detail gives the fixes, the last being `reimport` (e.g. "re-import the pool
    /// (`terraform import` with its cloud ID)").
    pub fn state_diagnostic(&self, reimport: &str) -> Diagnostic {
        let detail = format!(
            "The state's {} should be {}, but is {}: another version of the provider wrote this \
                state, or it was edited by hand. Run `terraform apply -refresh-only` with the \
                provider version that wrote it, or {reimport}.",
            self.attribute().unwrap_or_else(|| "object".to_string()),
            self.expected,
            self.found
        );
        self.located(Diagnostic::error("Unreadable state", detail))
    }

    /// Of two errors in one value, the one to report: the first mismatch, else the first
    /// unknown.
    fn worse(self, other: DecodeError) -> DecodeError {
        if self.is_unknown() && !other.is_unknown() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.0.is_empty() {
            "value".to_string()
        } else {
            self.path.to_string()
        };
        write!(f, "{at}: expected {}, found {}", self.expected, self.found)
    }
}

impl std::error::Error for DecodeError {}

/// For a configuration or plan; see [`DecodeError::diagnostic`].
impl From<DecodeError> for Diagnostic {
    fn from(e: DecodeError) -> Diagnostic {
        e.diagnostic()
    }
}

/// A value's type and shape for a diagnostic; the text of a string is left out, as it may be
/// a secret.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Unknown(_) => "unknown".to_string(),
        Value::Bool(b) => format!("the bool {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_string(),
        Value::List(v) => format!("a list of {}", v.len()),
        Value::Set(v) => format!("a set of {}", v.len()),
        Value::Tuple(v) => format!("a tuple of {}", v.len()),
        Value::Map(_) => "a map".to_string(),
        Value::Object(_) => "an object".to_string(),
        Value::Dynamic(_, inner) => describe(inner),
    }
}

/// What a handler does with a decoding result: the model, or `None` with the diagnostics the
/// rules of the module call for.
pub trait Decoded<T> {
    /// For a value that must fit whole (a plan at apply, a data source's configuration at
    /// read): `None` with an error diagnostic for any failure, an unknown included.
    fn or_report(self, diags: &mut Diagnostics) -> Option<T>;
    /// For a value read at plan time (a configuration in validation, a plan): `None` quietly
    /// while part of it is unknown, with an error diagnostic for a mismatch.
    fn or_report_mismatch(self, diags: &mut Diagnostics) -> Option<T>;
    /// For a stored state: `None` with [`DecodeError::state_diagnostic`].
    fn or_report_state(self, diags: &mut Diagnostics, reimport: &str) -> Option<T>;
}

impl<T> Decoded<T> for Result<T, DecodeError> {
    fn or_report(self, diags: &mut Diagnostics) -> Option<T> {
        self.map_err(|e| diags.push(e.diagnostic())).ok()
    }

    fn or_report_mismatch(self, diags: &mut Diagnostics) -> Option<T> {
        self.map_err(|e| {
            if !e.is_unknown() {
                diags.push(e.diagnostic());
            }
        })
        .ok()
    }

    fn or_report_state(self, diags: &mut Diagnostics, reimport: &str) -> Option<T> {
        self.map_err(|e| diags.push(e.state_diagnostic(reimport)))
            .ok()
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

/// Declares a typed model of a Terraform object: the struct, `FromValue` (every field read from
/// the attribute of its name, a failure naming the attribute's path) and `ToValue` (every
/// attribute written), `attribute_names` and [`Shaped`](crate::shape::Shaped), for a test that
/// holds the model to its schema ([`shape::check`](crate::shape::check)). Fields after `flatten` are models of their
/// own read from the same object: attribute groups several objects share (sharing blocks).
///
/// ```
/// tfplugin::object! {
///     /// The `autoscaling` block.
///     pub struct Autoscaling {
///         pub min_nodes: u32,
///         pub max_nodes: u32,
///     }
/// }
/// ```
#[macro_export]
macro_rules! object {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
        $( flatten {
            $( $(#[$xmeta:meta])* $xvis:vis $xfield:ident : $xty:ty ),* $(,)?
        } )?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
            $($( $(#[$xmeta])* $xvis $xfield: $xty, )*)?
        }

        impl $name {
            /// The attribute names sorted, as the schema must declare them (compare with
            /// [`Block::names`](crate::Block::names)).
            #[allow(dead_code)]
            pub fn attribute_names() -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut n: Vec<&'static str> = vec![$(stringify!($field)),*];
                $($( n.extend(<$xty>::attribute_names()); )*)?
                n.sort_unstable();
                n
            }
        }

        impl $crate::object::FromValue for $name {
            const EXPECTED: &'static str = "an object";
            fn from_value(v: &$crate::Value) -> Result<Self, $crate::object::DecodeError> {
                // Every field is read before the first failure is reported, so that a
                // mismatch is not hidden by an unknown before it.
                #[allow(unused_mut)]
                let mut parts = $crate::object::Parts::of_object(v)?;
                let read = (
                    $( parts.field::<$ty>(v, stringify!($field)), )*
                    $($( parts.read::<$xty>(v, None), )*)?
                );
                parts.done()?;
                #[allow(unreachable_patterns)]
                match read {
                    ( $( Some($field), )* $($( Some($xfield), )*)? ) => Ok($name {
                        $( $field, )*
                        $($( $xfield, )*)?
                    }),
                    // Not reached: a part that did not read left its error in `parts`.
                    _ => Err($crate::object::DecodeError::new("an object", v)),
                }
            }
        }

        impl $crate::shape::Shaped for $name {
            fn shape() -> $crate::shape::Shape {
                $crate::shape::object(
                    vec![$( (stringify!($field), <$ty as $crate::shape::Shaped>::shape()) ),*],
                    vec![$($( <$xty as $crate::shape::Shaped>::shape() ),*)?],
                )
            }
        }

        impl $crate::object::ToValue for $name {
            fn to_value(&self) -> $crate::Value {
                #[allow(unused_mut)]
                let mut attrs: std::collections::BTreeMap<String, $crate::Value> =
                    std::collections::BTreeMap::new();
                $( attrs.insert(
                    stringify!($field).to_string(),
                    $crate::object::ToValue::to_value(&self.$field),
                ); )*
                $($( if let $crate::Value::Object(m) = $crate::object::ToValue::to_value(&self.$xfield) {
                    attrs.extend(m);
                } )*)?
                $crate::Value::Object(attrs)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::object! {
        struct Inner {
            a: u32,
        }
    }

    crate::object! {
        struct Sized {
            size: Known<u32>,
        }
    }

    crate::object! {
        struct Outer {
            name: String,
            note: Option<String>,
            labels: Option<BTreeMap<String, String>>,
            inner: SingleBlock<Inner>,
            items: Vec<Inner>,
        }
        flatten {
            sized: Sized,
        }
    }

    fn value(name: Value, size: Value, inner: Value) -> Value {
        Value::object([
            ("name", name),
            ("note", Value::Null),
            ("size", size),
            (
                "labels",
                Value::Map([("k".into(), Value::string("v"))].into()),
            ),
            ("inner", inner),
            (
                "items",
                Value::List(vec![Value::object([("a", Value::int(2))])]),
            ),
        ])
    }

    #[test]
    fn models_round_trip_and_name_their_attributes() {
        let v = value(
            Value::string("n"),
            Value::int(3),
            Value::List(vec![Value::object([("a", Value::int(1))])]),
        );
        let o = Outer::from_value(&v).expect("decodes");
        assert_eq!(o.name, "n");
        assert_eq!(o.note, None);
        assert_eq!(*o.sized.size, Some(3));
        assert_eq!(o.inner.as_ref().map(|i| i.a), Some(1));
        assert_eq!(o.items[0].a, 2);
        assert_eq!(o.to_value(), v);
        assert_eq!(
            Outer::attribute_names(),
            ["inner", "items", "labels", "name", "note", "size"]
        );
    }

    #[test]
    fn unknown_fails_a_required_field_but_not_a_known_one() {
        let unknown_name = value(Value::UNKNOWN, Value::int(3), Value::List(vec![]));
        let e = Outer::from_value(&unknown_name).unwrap_err();
        assert!(e.is_unknown());
        assert_eq!(e.path().to_string(), "name");
        let unknown_size = value(Value::string("n"), Value::UNKNOWN, Value::List(vec![]));
        let o = Outer::from_value(&unknown_size).expect("a computed argument may be unknown");
        assert_eq!(*o.sized.size, None);
        assert_eq!(*o.inner, None);
        let unknown_block = value(Value::string("n"), Value::Null, Value::UNKNOWN);
        let e = Outer::from_value(&unknown_block).unwrap_err();
        assert!(e.is_unknown());
        assert_eq!(e.path().to_string(), "inner");
        let unknown_label = with(&unknown_size, "labels", map([("k", Value::UNKNOWN)]));
        let e = Outer::from_value(&unknown_label).unwrap_err();
        assert!(e.is_unknown());
        assert_eq!(e.path().to_string(), "labels[\"k\"]");
    }

    fn with(v: &Value, k: &str, new: Value) -> Value {
        let mut v = v.clone();
        if let Value::Object(m) = &mut v {
            m.insert(k.into(), new);
        }
        v
    }

    fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    fn good() -> Value {
        value(
            Value::string("n"),
            Value::int(3),
            Value::List(vec![Value::object([("a", Value::int(1))])]),
        )
    }

    /// The path, what was expected and what was found of decoding `v` as an `Outer`.
    fn failure(v: &Value) -> (String, &'static str, Found) {
        failure_of::<Outer>(v)
    }

    #[test]
    fn a_mismatch_names_its_attribute_through_blocks_lists_and_maps() {
        let items = |a: Value| {
            Value::List(vec![
                Value::object([("a", Value::int(2))]),
                Value::object([("a", a)]),
            ])
        };
        assert_eq!(
            failure(&with(&good(), "items", items(Value::Null))),
            (
                "items[1].a".into(),
                "a whole number from 0 to 4294967295",
                Found::Null
            )
        );
        assert_eq!(
            failure(&with(&good(), "items", items(Value::int(-1)))),
            (
                "items[1].a".into(),
                "a whole number from 0 to 4294967295",
                Found::Other("the number -1".into())
            )
        );
        assert_eq!(
            failure(&with(&good(), "labels", map([("team", Value::Bool(true))]))),
            (
                "labels[\"team\"]".into(),
                "a string",
                Found::Other("the bool true".into())
            )
        );
        let block = |a: Value| Value::List(vec![Value::object([("a", a)])]);
        assert_eq!(
            failure(&with(&good(), "inner", block(Value::string("secret")))),
            (
                "inner[0].a".into(),
                "a whole number from 0 to 4294967295",
                Found::Other("a string".into())
            ),
            "a string's text stays out of the message"
        );
        assert_eq!(
            failure(&with(
                &good(),
                "inner",
                Value::List(vec![
                    Value::object([("a", Value::int(1))]),
                    Value::object([("a", Value::int(2))])
                ])
            )),
            (
                "inner".into(),
                "a block of at most one",
                Found::Other("a list of 2".into())
            )
        );
        // A flattened model reads the same object: its attributes have no step of their own.
        assert_eq!(
            failure(&with(
                &good(),
                "size",
                Value::Number(crate::value::Number::Float(2.5))
            )),
            (
                "size".into(),
                "a whole number from 0 to 4294967295",
                Found::Other("the number 2.5".into())
            )
        );
        // Option takes null, not another type; a required field takes neither.
        assert_eq!(
            failure(&with(&good(), "note", Value::int(1))),
            (
                "note".into(),
                "a string",
                Found::Other("the number 1".into())
            )
        );
        assert_eq!(
            failure(&with(&good(), "name", Value::Null)),
            ("name".into(), "a string", Found::Null)
        );
        assert_eq!(
            failure(&with(&good(), "items", Value::Null)),
            ("items".into(), "a list", Found::Null)
        );
        assert_eq!(
            failure(&Value::Null),
            (String::new(), "an object", Found::Null)
        );
        assert!(Outer::from_value(&Value::UNKNOWN).unwrap_err().is_unknown());
    }

    #[test]
    fn a_mismatch_wins_over_an_unknown_before_it() {
        let both = with(
            &with(&good(), "name", Value::UNKNOWN),
            "items",
            Value::List(vec![Value::object([("a", Value::Null)])]),
        );
        assert_eq!(
            failure(&both),
            (
                "items[0].a".into(),
                "a whole number from 0 to 4294967295",
                Found::Null
            )
        );
        let list = with(
            &good(),
            "items",
            Value::List(vec![
                Value::object([("a", Value::UNKNOWN)]),
                Value::object([("a", Value::string("x"))]),
            ]),
        );
        assert_eq!(failure(&list).0, "items[1].a");
        let labels = with(
            &good(),
            "labels",
            map([("a", Value::UNKNOWN), ("b", Value::int(1))]),
        );
        assert_eq!(failure(&labels).0, "labels[\"b\"]");
    }

    crate::object! {
        struct Later {
            at: MaybeUnknown<Option<String>>,
        }
    }

    #[test]
    fn maybe_unknown_keeps_what_it_read() {
        let refined = Value::Unknown(Some(Box::new(crate::value::Refinements {
            not_null: true,
            ..Default::default()
        })));
        for v in [Value::Null, Value::string("t"), Value::UNKNOWN, refined] {
            let o = Value::object([("at", v)]);
            assert_eq!(Later::from_value(&o).unwrap().to_value(), o);
        }
        let l = Later::from_value(&Value::object([("at", Value::UNKNOWN)])).unwrap();
        assert!(!l.at.is_known());
        assert_eq!(l.at, MaybeUnknown::UNKNOWN);
        assert_eq!(
            failure_of::<Later>(&Value::object([("at", Value::int(1))])),
            ("at".into(), "a string", Found::Other("the number 1".into()))
        );
    }

    fn failure_of<T: FromValue + std::fmt::Debug>(v: &Value) -> (String, &'static str, Found) {
        let e = T::from_value(v).unwrap_err();
        (e.path().to_string(), e.expected(), e.found().clone())
    }

    crate::object! {
        struct Eks {
            subnet_ids: Vec<String>,
        }
    }

    crate::object! {
        struct Pool {
            eks: SingleBlock<Eks>,
        }
    }

    #[test]
    fn errors_become_diagnostics_on_the_attribute() {
        let pool = Value::object([(
            "eks",
            Value::List(vec![Value::object([(
                "subnet_ids",
                Value::List(vec!["a".into(), "b".into(), Value::Null]),
            )])]),
        )]);
        let e = Pool::from_value(&pool).unwrap_err();
        let path = AttrPath::attr("eks")
            .with_index(0)
            .with_attr("subnet_ids")
            .with_index(2);
        assert_eq!(e.path(), &path);
        assert_eq!(
            e.to_string(),
            "eks[0].subnet_ids[2]: expected a string, found null"
        );
        let d = e.diagnostic();
        assert_eq!(d.severity, crate::Severity::Error);
        assert_eq!(d.summary, "Unexpected value");
        assert_eq!(d.path, Some(path.clone()));
        assert!(
            d.detail
                .starts_with("`eks[0].subnet_ids[2]` should be a string, but is null."),
            "{}",
            d.detail
        );
        assert!(d.detail.contains("bug in the provider"), "{}", d.detail);
        let d = e.state_diagnostic("re-import it");
        assert_eq!(d.summary, "Unreadable state");
        assert_eq!(d.path, Some(path));
        assert!(
            d.detail
                .starts_with("The state's `eks[0].subnet_ids[2]` should be a string, but is null:"),
            "{}",
            d.detail
        );
        assert!(
            d.detail.contains("`terraform apply -refresh-only`")
                && d.detail.ends_with(", or re-import it."),
            "{}",
            d.detail
        );
        let whole = Pool::from_value(&Value::Null).unwrap_err().diagnostic();
        assert_eq!(whole.path, None);
        assert!(
            whole
                .detail
                .starts_with("The object should be an object, but is null.")
        );
    }

    #[test]
    fn results_report_by_where_the_value_came_from() {
        let unknown = Value::object([("subnet_ids", Value::UNKNOWN)]);
        let null = Value::object([("subnet_ids", Value::Null)]);
        let mut diags = Diagnostics::new();
        assert_eq!(
            Eks::from_value(&unknown).or_report_mismatch(&mut diags),
            None
        );
        assert!(diags.is_empty(), "an unknown is normal at plan time");
        assert_eq!(Eks::from_value(&null).or_report_mismatch(&mut diags), None);
        assert_eq!(diags.0.len(), 1);
        assert_eq!(Eks::from_value(&unknown).or_report(&mut diags), None);
        assert_eq!(diags.0.len(), 2, "an unknown where none may be is reported");
        assert!(
            diags.0[1].detail.contains("still unknown"),
            "{}",
            diags.0[1].detail
        );
        assert_eq!(
            Eks::from_value(&null).or_report_state(&mut diags, "re-import it"),
            None
        );
        assert_eq!(diags.0[2].summary, "Unreadable state");
        let ok = Value::object([("subnet_ids", Value::List(vec![]))]);
        assert!(Eks::from_value(&ok).or_report(&mut diags).is_some());
        assert_eq!(diags.0.len(), 3);
    }
}
