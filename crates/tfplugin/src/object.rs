//! Typed models of Terraform objects. A resource or data source declares one struct per object
//! with [`object!`](crate::object!): the field names are the attribute names, written once, and
//! the macro writes the two conversions, so handlers work with Rust types instead of looking
//! attributes up by string.
//!
//! Decoding takes what a value says about each field's type:
//! - `String`, `bool`, `u32`, `u64`, `i64`, maps and lists: a known, non-null value; anything else
//!   (null, unknown) makes the whole object undecodable (`None`), since a handler cannot act on
//!   half a configuration. A plan then leaves what it would derive unknown.
//! - `Option<T>`: null is `None`; unknown still makes the object undecodable. For optional
//!   arguments whose absence means something (no labels, no override).
//! - [`Known<T>`]: null and unknown are both `None`. For optional + computed arguments, where an
//!   unknown value in a plan means "the provider decides", as an absent one does.
//! - [`SingleBlock<T>`]: a block of at most one (a list of zero or one objects).
//!
//! Encoding writes every field, so a model's value has the shape its schema gives terraform.

use std::collections::BTreeMap;

use crate::value::{Number, Value};

/// A type read from a value; `None` when the value is null or unknown where the type needs a
/// known one, or has another shape.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Option<Self>;
}

/// A type written as a value.
pub trait ToValue {
    fn to_value(&self) -> Value;
}

/// An optional + computed argument: the value when known, `None` when null or unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known<T>(pub Option<T>);

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
    fn from_value(v: &Value) -> Option<Self> {
        Some(v.clone())
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
    fn from_value(v: &Value) -> Option<Self> {
        v.as_str().map(str::to_string)
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

impl FromValue for bool {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_bool()
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_i64()
    }
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::int(*self)
    }
}

impl FromValue for u32 {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_i64().and_then(|i| u32::try_from(i).ok())
    }
}

impl ToValue for u32 {
    fn to_value(&self) -> Value {
        Value::int((*self).into())
    }
}

impl FromValue for u64 {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_i64().and_then(|i| u64::try_from(i).ok())
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
    fn from_value(v: &Value) -> Option<Self> {
        if !v.is_known() {
            return None;
        }
        if v.is_null() {
            return Some(None);
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
    fn from_value(v: &Value) -> Option<Self> {
        if v.is_null_or_unknown() {
            return Some(Known(None));
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
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                items.iter().map(T::from_value).collect()
            }
            Value::Dynamic(_, inner) => Self::from_value(inner),
            _ => None,
        }
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn to_value(&self) -> Value {
        Value::List(self.iter().map(T::to_value).collect())
    }
}

impl<T: FromValue> FromValue for BTreeMap<String, T> {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Map(m) => m
                .iter()
                .map(|(k, x)| T::from_value(x).map(|t| (k.clone(), t)))
                .collect(),
            Value::Dynamic(_, inner) => Self::from_value(inner),
            _ => None,
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
    fn from_value(v: &Value) -> Option<Self> {
        if !v.is_known() {
            return None;
        }
        match v.elements() {
            [] => Some(SingleBlock(None)),
            [one] => T::from_value(one).map(|t| SingleBlock(Some(t))),
            _ => None,
        }
    }
}

impl<T: ToValue> ToValue for SingleBlock<T> {
    fn to_value(&self) -> Value {
        Value::List(self.0.iter().map(T::to_value).collect())
    }
}

/// Declares a typed model of a Terraform object: the struct, `FromValue` (every field read from
/// the attribute of its name) and `ToValue` (every attribute written), and `attribute_names`,
/// for a test that holds the model to its schema. Fields after `flatten` are models of their
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
            fn from_value(v: &$crate::Value) -> Option<Self> {
                Some($name {
                    $( $field: $crate::object::FromValue::from_value(v.get(stringify!($field)))?, )*
                    $($( $xfield: $crate::object::FromValue::from_value(v)?, )*)?
                })
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
        assert!(Outer::from_value(&unknown_name).is_none());
        let unknown_size = value(Value::string("n"), Value::UNKNOWN, Value::List(vec![]));
        let o = Outer::from_value(&unknown_size).expect("a computed argument may be unknown");
        assert_eq!(*o.sized.size, None);
        assert_eq!(*o.inner, None);
        let unknown_block = value(Value::string("n"), Value::Null, Value::UNKNOWN);
        assert!(Outer::from_value(&unknown_block).is_none());
        let mut unknown_label = unknown_size.clone();
        if let Value::Object(m) = &mut unknown_label {
            m.insert(
                "labels".into(),
                Value::Map([("k".into(), Value::UNKNOWN)].into()),
            );
        }
        assert!(Outer::from_value(&unknown_label).is_none());
    }
}
