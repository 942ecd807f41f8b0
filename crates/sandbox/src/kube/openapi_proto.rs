//! `/openapi/v2` in protobuf, the only encoding client-go's discovery asks that document in
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`; the answer's type is
//! `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`), decoded as gnostic's
//! `openapi_v2.Document`. kubectl falls back to it to validate what its v3 lookup does not
//! cover, e.g. a `kind: List` given to `kubectl create -f`, so without it such a create fails
//! with "failed to download openapi".
//!
//! Written by hand (a few varints and length-delimited fields) rather than with a protobuf
//! crate: the sandbox encodes one message family one way, from JSON, and the field numbers are
//! gnostic-models' `openapiv2/OpenAPIv2.proto` (`Document`, `Info`, `Definitions`,
//! `NamedSchema`, `Schema`, `Properties`, `TypeItem`, `ItemsItem`, `AdditionalPropertiesItem`,
//! `NamedAny`, `Any`). Only what kubectl reads is written: the document's swagger version and
//! info, and every definition with its schema; paths are left out (every served group version
//! is in OpenAPI v3, where kubectl looks up operations).

use serde_json::Value;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u64, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn bool_field(out: &mut Vec<u8>, field: u64, b: bool) {
    if b {
        tag(out, field, 0);
        varint(out, 1);
    }
}

fn int(out: &mut Vec<u8>, field: u64, v: i64) {
    tag(out, field, 0);
    varint(out, v as u64);
}

fn double(out: &mut Vec<u8>, field: u64, v: f64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `Any`: a value as YAML text (JSON is YAML), gnostic's form for defaults, enums, examples and
/// vendor extensions.
fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 2, &v.to_string());
    out
}

/// `NamedAny`: name = 1, value = 2.
fn named_any(name: &str, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, name);
    bytes(&mut out, 2, &any(v));
    out
}

/// `NamedSchema`: name = 1, value = 2.
fn named_schema(name: &str, s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, name);
    bytes(&mut out, 2, &schema(s));
    out
}

/// A JSON schema as gnostic's `Schema` message: its own constraints, then what it is made of.
fn schema(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = s.as_object() else {
        return out;
    };
    constraints(&mut out, m);
    structure(&mut out, m);
    out
}

/// The schema's own facts: its reference, texts, default and numeric and boolean constraints
/// (fields 1 to 18, with `discriminator` and `readOnly`).
fn constraints(out: &mut Vec<u8>, m: &serde_json::Map<String, Value>) {
    let text = |k: &str| m.get(k).and_then(Value::as_str);
    if let Some(r) = text("$ref") {
        string(out, 1, r);
    }
    for (k, f) in [
        ("format", 2),
        ("title", 3),
        ("description", 4),
        ("pattern", 13),
        ("discriminator", 26),
    ] {
        if let Some(v) = text(k) {
            string(out, f, v);
        }
    }
    if let Some(d) = m.get("default") {
        bytes(out, 5, &any(d));
    }
    for (k, f) in [("multipleOf", 6), ("maximum", 7), ("minimum", 9)] {
        if let Some(v) = m.get(k).and_then(Value::as_f64) {
            double(out, f, v);
        }
    }
    for (k, f) in [
        ("exclusiveMaximum", 8),
        ("exclusiveMinimum", 10),
        ("uniqueItems", 16),
        ("readOnly", 27),
    ] {
        bool_field(out, f, m.get(k).and_then(Value::as_bool).unwrap_or(false));
    }
    for (k, f) in [
        ("maxLength", 11),
        ("minLength", 12),
        ("maxItems", 14),
        ("minItems", 15),
        ("maxProperties", 17),
        ("minProperties", 18),
    ] {
        if let Some(v) = m.get(k).and_then(Value::as_i64) {
            int(out, f, v);
        }
    }
}

/// What the schema is made of: required properties, enum values, additional properties, type,
/// items, allOf, properties, example and vendor extensions (fields 19 to 31).
fn structure(out: &mut Vec<u8>, m: &serde_json::Map<String, Value>) {
    let text = |k: &str| m.get(k).and_then(Value::as_str);
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_str() {
            string(out, 19, r);
        }
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes(out, 20, &any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            tag(&mut item, 2, 0);
            varint(&mut item, u64::from(*b));
            bytes(out, 21, &item);
        }
        Some(a @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes(&mut item, 1, &schema(a));
            bytes(out, 21, &item);
        }
        _ => {}
    }
    if let Some(t) = text("type") {
        let mut item = Vec::new();
        string(&mut item, 1, t);
        bytes(out, 22, &item);
    }
    if let Some(items) = m.get("items") {
        let mut item = Vec::new();
        match items {
            Value::Array(a) => a.iter().for_each(|s| bytes(&mut item, 1, &schema(s))),
            s => bytes(&mut item, 1, &schema(s)),
        }
        bytes(out, 23, &item);
    }
    for s in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes(out, 24, &schema(s));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut p = Vec::new();
        for (name, s) in props {
            bytes(&mut p, 1, &named_schema(name, s));
        }
        bytes(out, 25, &p);
    }
    if let Some(e) = m.get("example") {
        bytes(out, 30, &any(e));
    }
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        bytes(out, 31, &named_any(k, v));
    }
}

/// The v2 document (JSON) as gnostic's `Document`.
pub(super) fn document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, doc["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Vec::new();
    string(
        &mut info,
        1,
        doc["info"]["title"].as_str().unwrap_or("Kubernetes"),
    );
    string(
        &mut info,
        2,
        doc["info"]["version"].as_str().unwrap_or_default(),
    );
    bytes(&mut out, 2, &info);
    let mut defs = Vec::new();
    for (name, s) in doc["definitions"].as_object().into_iter().flatten() {
        bytes(&mut defs, 1, &named_schema(name, s));
    }
    bytes(&mut out, 9, &defs);
    out
}

/// The content type of the protobuf v2 document, as kube-apiserver labels it (the `@` of the
/// type asked for is not a valid media type character).
pub(super) const CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
