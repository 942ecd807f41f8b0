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
//!
//! Here, the facade and the macro; `convert` holds the two traits and [`Parts`], `error` the
//! decoding errors, `plain` and `unknowns` the field types.

mod convert;
mod error;
mod plain;
mod unknowns;

pub use convert::{FromValue, Parts, ToValue, merge};
pub use error::{DecodeError, Decoded, Found};
pub use unknowns::{Known, MaybeUnknown, SingleBlock};

/// Declares a typed model of a Terraform object: the struct, `FromValue` (every field read from
/// the attribute of its name, a failure naming the attribute's path) and `ToValue` (every
/// attribute written), `attribute_names` and [`Shaped`](crate::shape::Shaped), for a test that
/// holds the model to its schema ([`shape::check`](crate::shape::check)). Fields after `flatten`
/// are models of their own read from the same object: attribute groups several objects share (sharing blocks).
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
    use std::collections::BTreeMap;

    use super::*;
    use crate::diag::{AttrPath, Diagnostics};
    use crate::value::Value;

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
