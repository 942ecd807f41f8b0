//! Patch formats (RFC 7386 merge patch, RFC 6902 JSON patch) and the field ownership that server-side apply
//! keeps in `metadata.managedFields`.
//!
//! Ownership is tracked per leaf: a map is descended, anything else (scalars and lists) is one atomic field.
//! The real server also descends associative lists by their keys; none of the fields a fractional-GPU setup
//! touches needs that, so lists stay atomic here.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A field path; segments are map keys.
pub(crate) type FieldPath = Vec<String>;

/// RFC 7386: null deletes, maps merge, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Strategic merge patch reduced to a merge patch: `$patch: delete` removes a map, other directives
/// (`$setElementOrder/..`, `$retainKeys`, `$deleteFromPrimitiveList/..`, `$patch: replace|merge`) are dropped.
/// kubectl's client-side apply sends such directives; without list keys, lists are replaced whole.
pub(crate) fn strategic_to_merge(patch: &Value) -> Value {
    match patch {
        Value::Object(m) => {
            if m.get("$patch").and_then(Value::as_str) == Some("delete") {
                return Value::Null;
            }
            let out: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strategic_to_merge(v)))
                .collect();
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|v| v.get("$patch").is_none())
                .map(strategic_to_merge)
                .collect(),
        ),
        other => other.clone(),
    }
}

#[derive(Debug)]
pub(crate) enum JsonPatchError {
    /// The body is not a list of operations.
    Malformed(String),
    /// An operation cannot apply (missing path, failed test).
    Failed(String),
}

fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

fn pointer_tokens(path: &str) -> Result<Vec<String>, JsonPatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    if !path.starts_with('/') {
        return Err(JsonPatchError::Malformed(format!(
            "invalid JSON pointer {path:?}"
        )));
    }
    Ok(path[1..].split('/').map(unescape).collect())
}

fn parent_and_key<'a>(
    doc: &'a mut Value,
    toks: &[String],
) -> Result<(&'a mut Value, String), JsonPatchError> {
    let (last, parents) = toks
        .split_last()
        .ok_or_else(|| JsonPatchError::Failed("cannot operate on the root".into()))?;
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| {
            JsonPatchError::Failed(format!("doc is missing path: /{}", toks.join("/")))
        })?;
    }
    Ok((cur, last.clone()))
}

fn get<'a>(doc: &'a Value, toks: &[String]) -> Option<&'a Value> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add(doc: &mut Value, toks: &[String], val: Value) -> Result<(), JsonPatchError> {
    if toks.is_empty() {
        *doc = val;
        return Ok(());
    }
    let (parent, key) = parent_and_key(doc, toks)?;
    match parent {
        Value::Object(m) => {
            m.insert(key, val);
            Ok(())
        }
        Value::Array(a) => {
            let idx = if key == "-" {
                a.len()
            } else {
                key.parse::<usize>()
                    .map_err(|_| JsonPatchError::Failed(format!("invalid array index {key:?}")))?
            };
            if idx > a.len() {
                return Err(JsonPatchError::Failed(format!(
                    "array index {idx} out of bounds"
                )));
            }
            a.insert(idx, val);
            Ok(())
        }
        _ => Err(JsonPatchError::Failed(format!(
            "doc is missing path: /{}",
            toks.join("/")
        ))),
    }
}

fn remove(doc: &mut Value, toks: &[String]) -> Result<Value, JsonPatchError> {
    let missing = || JsonPatchError::Failed(format!("doc is missing path: /{}", toks.join("/")));
    let (parent, key) = parent_and_key(doc, toks)?;
    match parent {
        Value::Object(m) => m.remove(&key).ok_or_else(missing),
        Value::Array(a) => {
            let idx = key.parse::<usize>().map_err(|_| missing())?;
            if idx >= a.len() {
                return Err(missing());
            }
            Ok(a.remove(idx))
        }
        _ => Err(missing()),
    }
}

/// RFC 6902, all six operations.
pub(crate) fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    let ops = patch.as_array().ok_or_else(|| {
        JsonPatchError::Malformed("a JSON patch must be a list of operations".into())
    })?;
    for op in ops {
        let kind = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| JsonPatchError::Malformed("operation has no \"op\"".into()))?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| JsonPatchError::Malformed("operation has no \"path\"".into()))?;
        let toks = pointer_tokens(path)?;
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                JsonPatchError::Malformed(format!("operation {kind} has no \"value\""))
            })
        };
        let from = || -> Result<Vec<String>, JsonPatchError> {
            pointer_tokens(op.get("from").and_then(Value::as_str).ok_or_else(|| {
                JsonPatchError::Malformed(format!("operation {kind} has no \"from\""))
            })?)
        };
        match kind {
            "add" => add(doc, &toks, value()?)?,
            "remove" => {
                remove(doc, &toks)?;
            }
            "replace" => {
                remove(doc, &toks)?;
                add(doc, &toks, value()?)?;
            }
            "move" => {
                let v = remove(doc, &from()?)?;
                add(doc, &toks, v)?;
            }
            "copy" => {
                let v = get(doc, &from()?)
                    .cloned()
                    .ok_or_else(|| JsonPatchError::Failed("copy from a missing path".into()))?;
                add(doc, &toks, v)?;
            }
            "test" => {
                if get(doc, &toks) != Some(&value()?) {
                    return Err(JsonPatchError::Failed(format!(
                        "testing value {path} failed"
                    )));
                }
            }
            other => {
                return Err(JsonPatchError::Malformed(format!(
                    "unexpected operation {other:?}"
                )));
            }
        }
    }
    Ok(())
}

/// The fields of an object that ownership is tracked for: everything but identity, bookkeeping and status.
pub(crate) fn leaf_paths(obj: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            match k.as_str() {
                "apiVersion" | "kind" | "status" => {}
                "metadata" => {
                    for sub in ["labels", "annotations"] {
                        if let Some(Value::Object(lm)) = v.get(sub) {
                            for lk in lm.keys() {
                                out.insert(vec!["metadata".into(), sub.into(), lk.clone()]);
                            }
                        }
                    }
                }
                _ => collect(v, &mut vec![k.clone()], &mut out),
            }
        }
    }
    out
}

fn collect(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                prefix.push(k.clone());
                collect(c, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

pub(crate) fn get_path<'a>(obj: &'a Value, p: &FieldPath) -> Option<&'a Value> {
    let mut cur = obj;
    for k in p {
        cur = cur.as_object()?.get(k)?;
    }
    Some(cur)
}

/// Sets the field a dotted path (`.spec.replicas`) names, making the objects on the way.
pub(crate) fn set_dotted(obj: &mut Value, dotted: &str, v: Value) {
    let path: FieldPath = dotted
        .trim_start_matches('.')
        .split('.')
        .map(str::to_string)
        .collect();
    set_path(obj, &path, v);
}

pub(crate) fn set_path(obj: &mut Value, p: &FieldPath, v: Value) {
    let mut cur = obj;
    for k in &p[..p.len() - 1] {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .expect("object")
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    cur.as_object_mut()
        .expect("object")
        .insert(p[p.len() - 1].clone(), v);
}

/// Removes a field and the maps it leaves empty (never the top level).
pub(crate) fn remove_path(obj: &mut Value, p: &FieldPath) {
    fn rec(cur: &mut Value, p: &[String]) -> bool {
        let Some(m) = cur.as_object_mut() else {
            return false;
        };
        if p.len() == 1 {
            m.remove(&p[0]);
        } else if let Some(child) = m.get_mut(&p[0])
            && rec(child, &p[1..])
        {
            m.remove(&p[0]);
        }
        m.is_empty()
    }
    if let Some(m) = obj.as_object_mut() {
        if p.len() == 1 {
            m.remove(&p[0]);
        } else if let Some(child) = m.get_mut(&p[0])
            && rec(child, &p[1..])
            && p[0] != "metadata"
        {
            m.remove(&p[0]);
        }
    }
}

/// Leaves whose value differs between two versions (added, changed or removed).
pub(crate) fn changed_paths(old: &Value, new: &Value) -> BTreeSet<FieldPath> {
    let a = leaf_paths(old);
    let b = leaf_paths(new);
    a.union(&b)
        .filter(|p| get_path(old, p) != get_path(new, p))
        .cloned()
        .collect()
}

/// The segment that stands for a map itself (FieldsV1's `"."`): an update that creates a map owns
/// the map as well as its keys.
pub(crate) const SELF: &str = ".";

/// The `"."` paths of the maps in `obj` whose ownership is tracked as a whole: every non-empty
/// object of a custom resource outside metadata and status (a CRD schema's objects are maps to
/// structured-merge-diff), labels and annotations, and the data maps of ConfigMaps and Secrets.
/// A built-in struct (a DaemonSet's `spec`) always exists in the typed old object, so an update
/// never creates it and never owns it as a whole.
pub(crate) fn map_paths(obj: &Value, custom: bool, data_maps: bool) -> BTreeSet<FieldPath> {
    fn rec(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        if let Value::Object(m) = v
            && !m.is_empty()
        {
            let mut me = prefix.clone();
            me.push(SELF.into());
            out.insert(me);
            for (k, c) in m {
                prefix.push(k.clone());
                rec(c, prefix, out);
                prefix.pop();
            }
        }
    }
    let mut out = BTreeSet::new();
    let Some(m) = obj.as_object() else {
        return out;
    };
    // Labels and annotations are maps wherever they are: the object's and a pod template's.
    for (at, base) in [
        ("/metadata", &["metadata"][..]),
        (
            "/spec/template/metadata",
            &["spec", "template", "metadata"][..],
        ),
    ] {
        for sub in ["labels", "annotations"] {
            if obj
                .pointer(&format!("{at}/{sub}"))
                .and_then(Value::as_object)
                .is_some_and(|l| !l.is_empty())
            {
                let mut p: FieldPath = base.iter().map(|s| s.to_string()).collect();
                p.extend([sub.to_string(), SELF.to_string()]);
                out.insert(p);
            }
        }
    }
    for (k, v) in m {
        let tracked = match k.as_str() {
            "apiVersion" | "kind" | "metadata" | "status" => false,
            "data" | "binaryData" => custom || data_maps,
            _ => custom,
        };
        if tracked {
            rec(v, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

/// FieldsV1 rendering: `{"f:spec": {"f:replicas": {}}}`, a map itself as `"."`.
pub(crate) fn to_fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    // structured-merge-diff has one element for a map's node: FieldsV1 writes it as `"."` among
    // the map's members, or as the bare key `f:mig: {}` when the set holds none of them (seen on
    // kube-apiserver v1.34 after a forced apply took a manager's last member). The sandbox keeps
    // both spellings, P and P/".", and writes them the same way.
    let canonical: BTreeSet<FieldPath> = paths
        .iter()
        .map(|p| {
            let node = match p.split_last() {
                Some((last, parent)) if last == SELF => parent.to_vec(),
                _ => p.clone(),
            };
            let mut with_self = node.clone();
            with_self.push(SELF.into());
            let has_members = paths
                .iter()
                .any(|q| q.len() > node.len() && q.starts_with(&node) && *q != with_self);
            if has_members { with_self } else { node }
        })
        .collect();
    let mut root = Value::Object(Map::new());
    for p in &canonical {
        let mut cur = &mut root;
        for k in p {
            let key = if k == SELF {
                SELF.to_string()
            } else {
                format!("f:{k}")
            };
            cur = cur
                .as_object_mut()
                .expect("object")
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    root
}

pub(crate) fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn rec(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    let Some(name) = k.strip_prefix("f:").or((k == SELF).then_some(SELF)) else {
                        continue;
                    };
                    prefix.push(name.to_string());
                    rec(c, prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    rec(v, &mut Vec::new(), &mut out);
    out
}

pub(crate) fn dotted(p: &FieldPath) -> String {
    p.iter().map(|k| format!(".{k}")).collect()
}

/// The patch types a PATCH request may name in its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    Strategic,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[test]
    fn strategic_directives() {
        let p = json!({"spec": {"$setElementOrder/containers": [{"name": "a"}], "template": {"$patch": "delete"}, "x": [{"$patch": "delete", "name": "b"}, 1]}});
        assert_eq!(
            strategic_to_merge(&p),
            json!({"spec": {"template": null, "x": [1]}})
        );
    }

    #[test]
    fn json_patch_ops() {
        let mut t = json!({"a": [1, 2], "b": {"c": 1}});
        json_patch(&mut t, &json!([{"op": "add", "path": "/a/-", "value": 3}, {"op": "replace", "path": "/b/c", "value": 2},
            {"op": "copy", "from": "/b", "path": "/d"}, {"op": "move", "from": "/d/c", "path": "/e"}, {"op": "test", "path": "/e", "value": 2},
            {"op": "remove", "path": "/a/0"}])).unwrap();
        assert_eq!(t, json!({"a": [2, 3], "b": {"c": 2}, "d": {}, "e": 2}));
        assert!(matches!(
            json_patch(&mut t, &json!([{"op": "test", "path": "/e", "value": 9}])),
            Err(JsonPatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&mut t, &json!([{"op": "remove", "path": "/zz"}])),
            Err(JsonPatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&mut t, &json!({"op": "add"})),
            Err(JsonPatchError::Malformed(_))
        ));
    }

    #[test]
    fn fields_roundtrip() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v", "l": "w"}});
        let paths = leaf_paths(&obj);
        assert_eq!(paths.len(), 3);
        let f = to_fields_v1(&paths);
        assert_eq!(
            f,
            json!({"f:data": {"f:k": {}, "f:l": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert_eq!(from_fields_v1(&f), paths);
    }
}
