//! Strategic merge patch of built-in kinds, as the API server applies it (k8s.io/apimachinery
//! pkg/util/strategicpatch patch.go: `mergeMap`, `mergeSlice`, `mergeSliceWithSpecialElements`,
//! and the directives `$patch` (`replace`, `delete`, `merge`), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`). A list whose field has the
//! `merge` patch strategy merges element by element, matched by its merge key; any other list is
//! replaced whole. The strategies and keys are the API types' `patchStrategy` / `patchMergeKey`
//! tags (published as `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` in the
//! OpenAPI documents); [`MERGE_KEYS`] lists those of the fields clients patch, by field name.
//! helm 3 upgrades built-in objects this way (a three-way strategic merge patch whose lists hold
//! only the changed elements), and kubectl's client-side apply does.

use serde_json::{Map, Value};

/// List fields with the `merge` strategy, by field name, and their merge key (core/v1 and apps/v1
/// types.go). Fields of one name share a key across types, except `ports`: a container's merge by
/// `containerPort`, a service's by `port` (told apart by the elements).
const MERGE_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("env", "name"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("imagePullSecrets", "name"),
    ("hostAliases", "ip"),
    ("conditions", "type"),
    ("ownerReferences", "uid"),
    ("resourceClaims", "name"),
    ("topologySpreadConstraints", "topologyKey"),
];

/// Lists of scalars with the `merge` strategy: a patch adds to them (metav1.ObjectMeta
/// `finalizers`).
const MERGED_SCALARS: &[&str] = &["finalizers"];

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

/// The merge key of a list field, given its elements; None: the list is replaced whole.
fn merge_key(field: &str, elements: &[&Value]) -> Option<&'static str> {
    if field == "ports" {
        let container = elements.iter().any(|e| e.get("containerPort").is_some());
        return Some(if container { "containerPort" } else { "port" });
    }
    MERGE_KEYS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, k)| *k)
}

/// Applies a strategic merge patch to an object.
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    merge_map(target, patch);
}

/// A value as the patch gives it, without directives (a new element, a replaced list).
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn merge_map(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    match directive(patch) {
        Some("replace") => {
            *target = clean(patch);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return;
    };
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        t.retain(|k, _| keep.iter().any(|x| x == k) || p.contains_key(k));
    }
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(gone)) = (t.get_mut(field), v.as_array()) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                t.remove(k);
            }
            _ if directive(v) == Some("delete") => {
                t.remove(k);
            }
            Value::Object(_) => merge_map(t.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let slot = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                merge_list(k, slot, items);
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    for (k, order) in p {
        if let (Some(field), Some(order)) = (k.strip_prefix("$setElementOrder/"), order.as_array())
            && let Some(list) = t.get_mut(field)
        {
            set_order(field, list, order);
        }
    }
}

fn merge_list(field: &str, target: &mut Value, items: &[Value]) {
    if items.iter().any(|i| directive(i) == Some("replace")) {
        let kept = items.iter().filter(|i| directive(i).is_none()).map(clean);
        *target = Value::Array(kept.collect());
        return;
    }
    let mut current = target.as_array().cloned().unwrap_or_default();
    let objects: Vec<&Value> = items.iter().filter(|i| i.is_object()).collect();
    match merge_key(field, &objects) {
        Some(key) if !objects.is_empty() => {
            for item in items {
                let id = item.get(key);
                if directive(item) == Some("delete") {
                    current.retain(|c| c.get(key) != id);
                    continue;
                }
                match current.iter_mut().find(|c| c.get(key) == id) {
                    Some(existing) => merge_map(existing, item),
                    None => current.push(clean(item)),
                }
            }
            *target = Value::Array(current);
        }
        _ if MERGED_SCALARS.contains(&field) => {
            for item in items {
                if !current.contains(item) {
                    current.push(item.clone());
                }
            }
            *target = Value::Array(current);
        }
        _ => *target = Value::Array(items.iter().map(clean).collect()),
    }
}

/// `$setElementOrder/<field>`: the list's elements in the order given (by merge key, or the
/// scalars themselves); elements the order does not name keep their place after those it does.
fn set_order(field: &str, list: &mut Value, order: &[Value]) {
    let Value::Array(items) = list else {
        return;
    };
    let objects: Vec<&Value> = order.iter().filter(|o| o.is_object()).collect();
    let key = merge_key(field, &objects);
    let rank = |v: &Value| {
        let id = match key {
            Some(k) if v.is_object() => v.get(k).cloned().unwrap_or(Value::Null),
            _ => v.clone(),
        };
        order
            .iter()
            .position(|o| match key {
                Some(k) if o.is_object() => o.get(k) == Some(&id),
                _ => *o == id,
            })
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(|v| rank(v));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What helm 3 sends to change a daemonset's env value and volume (a three-way patch: only
    /// the changed elements, with their merge keys and the order of the whole list).
    #[test]
    fn elements_merge_by_their_key_and_the_rest_stay() {
        let mut ds = json!({"spec": {"template": {"spec": {
            "containers": [
                {"name": "sidecar", "image": "i", "env": [
                    {"name": "A", "value": "1"}, {"name": "DEFAULT_CONFIG", "value": "old"}],
                 "volumeMounts": [{"name": "cfg", "mountPath": "/available-configs"}]},
                {"name": "ctr", "image": "i"}],
            "volumes": [{"name": "cfg", "configMap": {"name": "old-cm"}}, {"name": "x", "emptyDir": {}}],
            "tolerations": [{"key": "a"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "ctr"}],
            "containers": [{"name": "sidecar",
                "$setElementOrder/env": [{"name": "A"}, {"name": "DEFAULT_CONFIG"}],
                "env": [{"name": "DEFAULT_CONFIG", "value": "new"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "new-cm"}}, {"name": "x", "$patch": "delete"}],
            "tolerations": [{"key": "b"}]}}}});
        apply(&mut ds, &patch);
        let spec = &ds["spec"]["template"]["spec"];
        assert_eq!(spec["containers"][0]["image"], "i");
        assert_eq!(
            spec["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "DEFAULT_CONFIG", "value": "new"}])
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"][0]["mountPath"],
            "/available-configs"
        );
        assert_eq!(spec["containers"][1]["name"], "ctr");
        assert_eq!(
            spec["volumes"],
            json!([{"name": "cfg", "configMap": {"name": "new-cm"}}])
        );
        // No merge strategy: replaced.
        assert_eq!(spec["tolerations"], json!([{"key": "b"}]));
    }

    #[test]
    fn directives_replace_delete_retain_and_primitive_lists() {
        let mut o = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        apply(
            &mut o,
            &json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"],
                    "labels": {"$patch": "replace", "z": "3"}},
                "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        );
        assert_eq!(o["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(o["metadata"]["labels"], json!({"z": "3"}));
        assert_eq!(o["spec"]["strategy"], json!({"type": "Recreate"}));
        apply(
            &mut o,
            &json!({"spec": {"$patch": "delete"}, "metadata": {"labels": null}}),
        );
        assert_eq!(o, json!({"metadata": {"finalizers": ["b", "c"]}}));
    }
}
