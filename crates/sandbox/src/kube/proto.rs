//! kubectl sends typed creates (`kubectl create configmap|secret|namespace`) as Kubernetes protobuf
//! (`application/vnd.kubernetes.protobuf`): the magic `k8s\0`, then a runtime.Unknown message whose `raw` field
//! holds the object. This decodes the few kinds kubectl creates that way into the JSON the store works on,
//! from the field numbers in k8s.io/api's generated.proto.

use base64::Engine as _;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or("truncated varint")?;
        *i += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

/// All (field number, value) pairs of one message.
fn fields(b: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let tag = varint(b, &mut i)?;
        let (num, wt) = (tag >> 3, tag & 7);
        let f = match wt {
            0 => Field::Varint(varint(b, &mut i)?),
            1 => {
                i += 8;
                Field::Other
            }
            2 => {
                let n = varint(b, &mut i)? as usize;
                let end = i
                    .checked_add(n)
                    .filter(|e| *e <= b.len())
                    .ok_or("truncated field")?;
                let s = &b[i..end];
                i = end;
                Field::Bytes(s)
            }
            5 => {
                i += 4;
                Field::Other
            }
            _ => return Err(format!("unsupported wire type {wt}")),
        };
        if i > b.len() {
            return Err("truncated message".into());
        }
        out.push((num, f));
    }
    Ok(out)
}

fn string(f: Field) -> Result<String, String> {
    match f {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|e| e.to_string()),
        _ => Err("expected a string".into()),
    }
}

/// A map entry (key = 1, value = 2); `binary` values become base64 as in JSON.
fn map_entry(f: Field, binary: bool) -> Result<(String, Value), String> {
    let Field::Bytes(b) = f else {
        return Err("expected a map entry".into());
    };
    let mut k = String::new();
    let mut v = json!("");
    for (n, x) in fields(b)? {
        match (n, x) {
            (1, x) => k = string(x)?,
            (2, Field::Bytes(raw)) if binary => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(raw))
            }
            (2, x) => v = json!(string(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    field: &str,
    f: Field,
    binary: bool,
) -> Result<(), String> {
    let (k, v) = map_entry(f, binary)?;
    obj.entry(field)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("not a map")?
        .insert(k, v);
    Ok(())
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match n {
            1 => _ = m.insert("name".into(), json!(string(f)?)),
            2 => _ = m.insert("generateName".into(), json!(string(f)?)),
            3 => _ = m.insert("namespace".into(), json!(string(f)?)),
            6 => _ = m.insert("resourceVersion".into(), json!(string(f)?)),
            11 => insert_entry(&mut m, "labels", f, false)?,
            12 => insert_entry(&mut m, "annotations", f, false)?,
            14 => m
                .entry("finalizers")
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .ok_or("finalizers")?
                .push(json!(string(f)?)),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// How one field of a message is read (the protobuf types of k8s.io/api's generated.proto).
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Int,
    /// A `map<string, string>`, its values base64 (`bytes`) or text.
    Map {
        binary: bool,
    },
    Msg(&'static [F]),
    RepeatedStr,
    RepeatedMsg(&'static [F]),
    ObjectMeta,
    /// meta/v1 `Time` (`seconds`, `nanos`), written as RFC 3339 in whole seconds.
    Time,
    /// meta/v1 `MicroTime`, written as RFC 3339 with microseconds.
    MicroTime,
}

/// A message's field: number, JSON name, type.
type F = (u64, &'static str, Ty);

// The field numbers of k8s.io/api's generated.proto (v1.34) for the kinds kubectl sends typed.
const LOCAL_REF: &[F] = &[(1, "name", Ty::Str)];
const OBJECT_REF: &[F] = &[
    (1, "kind", Ty::Str),
    (2, "namespace", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "fieldPath", Ty::Str),
];
/// core/v1 `Event`, as client-go's event recorder sends it (cluster-autoscaler's events).
const EVENT: &[F] = &[
    (2, "involvedObject", Ty::Msg(OBJECT_REF)),
    (3, "reason", Ty::Str),
    (4, "message", Ty::Str),
    (
        5,
        "source",
        Ty::Msg(&[(1, "component", Ty::Str), (2, "host", Ty::Str)]),
    ),
    (6, "firstTimestamp", Ty::Time),
    (7, "lastTimestamp", Ty::Time),
    (8, "count", Ty::Int),
    (9, "type", Ty::Str),
    (10, "eventTime", Ty::MicroTime),
    (
        11,
        "series",
        Ty::Msg(&[
            (1, "count", Ty::Int),
            (2, "lastObservedTime", Ty::MicroTime),
        ]),
    ),
    (12, "action", Ty::Str),
    (13, "related", Ty::Msg(OBJECT_REF)),
    (14, "reportingComponent", Ty::Str),
    (15, "reportingInstance", Ty::Str),
];
const SERVICE_ACCOUNT: &[F] = &[
    (2, "secrets", Ty::RepeatedMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Ty::RepeatedMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Ty::Bool),
];
const CONFIG_MAP: &[F] = &[
    (2, "data", Ty::Map { binary: false }),
    (3, "binaryData", Ty::Map { binary: true }),
    (4, "immutable", Ty::Bool),
];
const SECRET: &[F] = &[
    (2, "data", Ty::Map { binary: true }),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::Map { binary: false }),
    (5, "immutable", Ty::Bool),
];
const POLICY_RULE: &[F] = &[
    (1, "verbs", Ty::RepeatedStr),
    (2, "apiGroups", Ty::RepeatedStr),
    (3, "resources", Ty::RepeatedStr),
    (4, "resourceNames", Ty::RepeatedStr),
    (5, "nonResourceURLs", Ty::RepeatedStr),
];
const SELECTOR_REQ: &[F] = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::RepeatedStr),
];
const LABEL_SELECTOR: &[F] = &[
    (1, "matchLabels", Ty::Map { binary: false }),
    (2, "matchExpressions", Ty::RepeatedMsg(SELECTOR_REQ)),
];
const ROLE: &[F] = &[
    (2, "rules", Ty::RepeatedMsg(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        Ty::Msg(&[(1, "clusterRoleSelectors", Ty::RepeatedMsg(LABEL_SELECTOR))]),
    ),
];
const SUBJECT: &[F] = &[
    (1, "kind", Ty::Str),
    (2, "apiGroup", Ty::Str),
    (3, "name", Ty::Str),
    (4, "namespace", Ty::Str),
];
const ROLE_REF: &[F] = &[
    (1, "apiGroup", Ty::Str),
    (2, "kind", Ty::Str),
    (3, "name", Ty::Str),
];
const BINDING: &[F] = &[
    (2, "subjects", Ty::RepeatedMsg(SUBJECT)),
    (3, "roleRef", Ty::Msg(ROLE_REF)),
];
const RESOURCE_ATTRS: &[F] = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];
const NON_RESOURCE_ATTRS: &[F] = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];
const ACCESS_SPEC: &[F] = &[
    (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRS)),
    (3, "user", Ty::Str),
    (4, "groups", Ty::RepeatedStr),
    (6, "uid", Ty::Str),
];
const BOUND_OBJECT: &[F] = &[
    (1, "kind", Ty::Str),
    (2, "apiVersion", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
];
const TOKEN_REQUEST_SPEC: &[F] = &[
    (1, "audiences", Ty::RepeatedStr),
    (3, "boundObjectRef", Ty::Msg(BOUND_OBJECT)),
    (4, "expirationSeconds", Ty::Int),
];

/// The top-level fields after `metadata` (field 1) of each kind decoded here, by API group and
/// kind (kinds of one name in two groups differ: events.k8s.io's Event is not core's).
fn kind_fields(group: &str, kind: &str) -> Option<&'static [F]> {
    Some(match kind {
        "Event" if group.is_empty() => EVENT,
        "Namespace" => &[],
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => BINDING,
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            &[(2, "spec", Ty::Msg(ACCESS_SPEC))]
        }
        "SelfSubjectRulesReview" => &[(2, "spec", Ty::Msg(&[(1, "namespace", Ty::Str)]))],
        "SelfSubjectReview" => &[],
        "TokenReview" => &[(
            2,
            "spec",
            Ty::Msg(&[(1, "token", Ty::Str), (2, "audiences", Ty::RepeatedStr)]),
        )],
        "TokenRequest" => &[(2, "spec", Ty::Msg(TOKEN_REQUEST_SPEC))],
        _ => return None,
    })
}

/// Whether [`decode`] reads protobuf bodies of `kind`; for any other the API answers 415.
/// kubectl sends its typed creates (`kubectl create role|rolebinding|serviceaccount|token|...`)
/// and `kubectl auth` reviews as protobuf and does not fall back to JSON, so every kind it sends
/// so in this project's tests is here.
pub(crate) fn decodes(group: &str, kind: &str) -> bool {
    kind_fields(group, kind).is_some()
}

/// A meta/v1 `Time` or `MicroTime` message as the JSON form writes it.
fn time(b: &[u8], micro: bool) -> Result<Value, String> {
    let (mut secs, mut nanos) = (0u64, 0u64);
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => secs = v,
            (2, Field::Varint(v)) => nanos = v,
            _ => {}
        }
    }
    let whole = crate::dates::rfc3339_secs(secs);
    Ok(json!(if micro {
        format!("{}.{:06}Z", whole.trim_end_matches('Z'), nanos / 1000)
    } else {
        whole
    }))
}

fn push(obj: &mut Map<String, Value>, name: &str, v: Value) -> Result<(), String> {
    obj.entry(name)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or("a repeated field that is not a list")?
        .push(v);
    Ok(())
}

/// One message into its JSON object, by its fields' table.
fn message(b: &[u8], table: &[F]) -> Result<Map<String, Value>, String> {
    let mut obj = Map::new();
    for (n, f) in fields(b)? {
        let Some((_, name, ty)) = table.iter().find(|(num, _, _)| *num == n) else {
            continue;
        };
        match (*ty, f) {
            (Ty::Str, f) => _ = obj.insert(name.to_string(), json!(string(f)?)),
            (Ty::Bool, Field::Varint(v)) => _ = obj.insert(name.to_string(), json!(v != 0)),
            (Ty::Int, Field::Varint(v)) => _ = obj.insert(name.to_string(), json!(v as i64)),
            (Ty::Map { binary }, f) => insert_entry(&mut obj, name, f, binary)?,
            (Ty::Msg(t), Field::Bytes(m)) => {
                _ = obj.insert(name.to_string(), Value::Object(message(m, t)?))
            }
            (Ty::RepeatedStr, f) => push(&mut obj, name, json!(string(f)?))?,
            (Ty::RepeatedMsg(t), Field::Bytes(m)) => {
                push(&mut obj, name, Value::Object(message(m, t)?))?
            }
            (Ty::ObjectMeta, Field::Bytes(m)) => _ = obj.insert(name.to_string(), object_meta(m)?),
            (Ty::Time, Field::Bytes(m)) => _ = obj.insert(name.to_string(), time(m, false)?),
            (Ty::MicroTime, Field::Bytes(m)) => _ = obj.insert(name.to_string(), time(m, true)?),
            _ => return Err(format!("field {name} ({n}) has an unexpected wire type")),
        }
    }
    Ok(obj)
}

/// Decodes a protobuf body (see [`decodes`] for the kinds) into its JSON form.
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing the k8s protobuf magic")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    match tn {
                        1 => api_version = string(tf)?,
                        2 => kind = string(tf)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let Some(table) = kind_fields(group, &kind) else {
        return Err(format!(
            "protobuf bodies of kind {kind:?} are not supported by the sandbox; send JSON"
        ));
    };
    let mut all: Vec<F> = vec![(1, "metadata", Ty::ObjectMeta)];
    all.extend_from_slice(table);
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    obj.extend(message(raw, &all)?);
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(n: u64, wt: u64) -> Vec<u8> {
        vec![((n << 3) | wt) as u8]
    }

    fn bytes(n: u64, b: &[u8]) -> Vec<u8> {
        let mut v = tag(n, 2);
        v.push(b.len() as u8);
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = [bytes(1, b"cm"), bytes(3, b"gpu-operator")].concat();
        let entry = [bytes(1, b"k"), bytes(2, b"v: 1")].concat();
        let raw = [bytes(1, &meta), bytes(2, &entry)].concat();
        let tm = [bytes(1, b"v1"), bytes(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), bytes(1, &tm), bytes(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "gpu-operator"}, "data": {"k": "v: 1"}})
        );
        assert!(decode(b"nope").is_err());
    }

    #[test]
    fn decodes_an_event_with_its_times() {
        let time = |secs: u8, nanos: Option<u8>| {
            let mut t = vec![8, secs];
            if let Some(n) = nanos {
                t.extend([16, n]);
            }
            t
        };
        let meta = [bytes(1, b"e1"), bytes(3, b"default")].concat();
        let reference = [bytes(1, b"Pod"), bytes(3, b"p"), bytes(7, b"spec")].concat();
        let raw = [
            bytes(1, &meta),
            bytes(2, &reference),
            bytes(3, b"TriggeredScaleUp"),
            bytes(6, &time(90, None)),
            [tag(8, 0), vec![3]].concat(),
            bytes(10, &time(90, Some(120))),
        ]
        .concat();
        let tm = [bytes(1, b"v1"), bytes(2, b"Event")].concat();
        let body = [b"k8s\0".to_vec(), bytes(1, &tm), bytes(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v["involvedObject"],
            json!({"kind": "Pod", "name": "p", "fieldPath": "spec"})
        );
        assert_eq!(v["firstTimestamp"], "1970-01-01T00:01:30Z");
        assert_eq!(v["eventTime"], "1970-01-01T00:01:30.000000Z");
        assert_eq!(v["count"], 3);
        // events.k8s.io's Event has other fields: not read as core's.
        let tm = [bytes(1, b"events.k8s.io/v1"), bytes(2, b"Event")].concat();
        let body = [b"k8s\0".to_vec(), bytes(1, &tm), bytes(2, &raw)].concat();
        assert!(decode(&body).is_err());
    }
}
