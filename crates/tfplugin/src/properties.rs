//! Bounded property tests of the decoders that read untrusted bytes: terraform's msgpack and JSON
//! values. They run in every `cargo test`; the cargo-fuzz targets under fuzz/ explore the same
//! functions without a bound.
//!
//! Properties: a value of any type survives encode -> decode unchanged; any bytes, and any
//! mutation of a valid document, give a value or an error and never a panic; nesting far beyond
//! any real document is refused rather than overflowing the stack.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::{Number, Type, Value, json, msgpack};

fn leaf_type() -> impl Strategy<Value = Type> {
    prop_oneof![
        Just(Type::Bool),
        Just(Type::Number),
        Just(Type::String),
        Just(Type::Dynamic)
    ]
}

fn any_type() -> impl Strategy<Value = Type> {
    leaf_type().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            // Set elements are kept primitive so that distinct generated values stay distinct.
            prop_oneof![Just(Type::Number), Just(Type::String)].prop_map(Type::set),
            inner.clone().prop_map(Type::map),
            prop::collection::btree_map("[a-z_]{1,8}", inner.clone(), 0..4).prop_map(Type::Object),
            prop::collection::vec(inner, 0..4).prop_map(Type::Tuple),
        ]
    })
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::Int),
        // Integral floats travel as ints and come back as Int, equal by value; keep them finite.
        (-1.0e12f64..1.0e12).prop_map(Number::Float),
        "[1-9][0-9]{20,40}".prop_map(Number::Big),
    ]
}

/// A value of type `t`: known, null or unknown at every level.
fn value_of(t: Type) -> BoxedStrategy<Value> {
    let known: BoxedStrategy<Value> = match t {
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::Number => number().prop_map(Value::Number).boxed(),
        Type::String => "\\PC{0,12}".prop_map(Value::String).boxed(),
        Type::Dynamic => prop_oneof![Just(Type::Bool), Just(Type::Number), Just(Type::String)]
            .prop_flat_map(|inner| {
                value_of(inner.clone())
                    .prop_filter("a dynamic slot holds a known value", |v| {
                        !matches!(v, Value::Null | Value::Unknown(_))
                    })
                    .prop_map(move |v| Value::Dynamic(Box::new(inner.clone()), Box::new(v)))
            })
            .boxed(),
        Type::List(e) => prop::collection::vec(value_of(*e), 0..4)
            .prop_map(Value::List)
            .boxed(),
        Type::Set(e) => prop::collection::vec(value_of(*e), 0..4)
            .prop_map(|mut v| {
                v.retain(|x| !matches!(x, Value::Null | Value::Unknown(_)));
                let mut unique: Vec<Value> = Vec::new();
                for x in v {
                    if !unique.contains(&x) {
                        unique.push(x);
                    }
                }
                Value::Set(unique)
            })
            .boxed(),
        Type::Map(e) => prop::collection::btree_map("\\PC{0,6}", value_of(*e), 0..4)
            .prop_map(Value::Map)
            .boxed(),
        Type::Object(attrs) => {
            let names: Vec<String> = attrs.keys().cloned().collect();
            let values: Vec<BoxedStrategy<Value>> = attrs.into_values().map(value_of).collect();
            values
                .prop_map(move |vs| {
                    Value::Object(names.iter().cloned().zip(vs).collect::<BTreeMap<_, _>>())
                })
                .boxed()
        }
        Type::Tuple(elems) => elems
            .into_iter()
            .map(value_of)
            .collect::<Vec<_>>()
            .prop_map(Value::Tuple)
            .boxed(),
    };
    prop_oneof![8 => known, 1 => Just(Value::Null), 1 => Just(Value::UNKNOWN)].boxed()
}

fn typed_value() -> impl Strategy<Value = (Type, Value)> {
    any_type().prop_flat_map(|t| value_of(t.clone()).prop_map(move |v| (t.clone(), v)))
}

/// A valid encoding with a few bytes flipped, cut or repeated.
fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(pos, kind, byte) in edits {
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = pos % bytes.len();
        match kind % 4 {
            0 => bytes[at] = byte,
            1 => bytes.truncate(at),
            2 => bytes.insert(at, byte),
            _ => {
                let tail = bytes[at..].to_vec();
                bytes.extend_from_slice(&tail);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn msgpack_round_trips_every_type((t, v) in typed_value()) {
        let bytes = msgpack::encode(&v, &t).expect("a value of its own type encodes");
        let back = msgpack::decode(&bytes, &t).expect("our own encoding decodes");
        prop_assert_eq!(back, v);
    }

    #[test]
    fn msgpack_survives_mutated_encodings(
        (t, v) in typed_value(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..4),
    ) {
        let bytes = mutate(msgpack::encode(&v, &t).unwrap(), &edits);
        let _ = msgpack::decode(&bytes, &t);
        let _ = msgpack::decode(&bytes, &Type::Dynamic);
    }

    #[test]
    fn json_survives_arbitrary_and_mutated_documents(
        t in any_type(),
        doc in "[\\[\\]{}\":,0-9a-z.eE+\\- \\\\]{0,64}",
        raw in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let _ = json::decode(doc.as_bytes(), &t);
        let _ = json::decode(&raw, &t);
        let _ = json::decode(doc.as_bytes(), &Type::Dynamic);
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // 100,000 nested arrays: far beyond any terraform value, a classic parser-crashing input.
    let depth = 100_000;
    let deep_json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    json::decode(deep_json.as_bytes(), &Type::Dynamic).expect_err("refused");

    // msgpack: a dynamic value is [type as JSON, value]; a type nested 100,000 lists deep.
    let deep_type = format!(
        "{}\"string\"{}",
        "[\"list\",".repeat(depth),
        "]".repeat(depth)
    );
    let mut deep_msgpack = vec![0x92, 0xc6];
    deep_msgpack.extend_from_slice(&(deep_type.len() as u32).to_be_bytes());
    deep_msgpack.extend_from_slice(deep_type.as_bytes());
    deep_msgpack.extend(std::iter::repeat_n(0x91u8, depth));
    msgpack::decode(&deep_msgpack, &Type::Dynamic).expect_err("refused");
}
