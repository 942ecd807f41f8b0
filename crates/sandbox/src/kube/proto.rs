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

/// Decodes a protobuf body of a ConfigMap, Secret or Namespace into its JSON form.
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
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(b)) => _ = obj.insert("metadata".into(), object_meta(b)?),
            ("ConfigMap", 2, f) => insert_entry(&mut obj, "data", f, false)?,
            ("ConfigMap", 3, f) => insert_entry(&mut obj, "binaryData", f, true)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                _ = obj.insert("immutable".into(), json!(v != 0))
            }
            ("Secret", 2, f) => insert_entry(&mut obj, "data", f, true)?,
            ("Secret", 3, f) => _ = obj.insert("type".into(), json!(string(f)?)),
            ("Secret", 4, f) => insert_entry(&mut obj, "stringData", f, false)?,
            ("ConfigMap" | "Secret" | "Namespace", _, _) => {}
            (other, _, _) => {
                return Err(format!(
                    "protobuf bodies of kind {other:?} are not supported by the sandbox; send JSON"
                ));
            }
        }
    }
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
}
