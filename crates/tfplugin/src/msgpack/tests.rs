use super::{decode, encode};
use crate::types::Type;
use crate::value::{Number, Value};

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
    // Terraform's refinement: not null (1: true) and a string prefix (2: "id-").
    let payload = [0x82, 0x01, 0xc3, 0x02, 0xa3, b'i', b'd', b'-'];
    let mut bytes = vec![0xc7, payload.len() as u8, 12];
    bytes.extend_from_slice(&payload);
    let v = decode(&bytes, &Type::String).unwrap();
    let Value::Unknown(Some(r)) = &v else {
        panic!("expected a refined unknown, got {v:?}")
    };
    assert!(r.not_null);
    assert_eq!(r.string_prefix.as_deref(), Some("id-"));
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
