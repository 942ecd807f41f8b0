//! Structural schemas of custom resources, as the apiextensions-apiserver applies them to every
//! write (k8s.io/apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go, .../defaulting/
//! algorithm.go, pkg/registry/customresource/validator.go): unknown fields are pruned (with a
//! `Warning: 299` header per field, or refused under `fieldValidation=Strict`, KEP-2885), defaults
//! are filled in, and types, enums and required fields are validated. Server-side apply converts
//! the applied configuration to a typed value first (structured-merge-diff), which refuses an
//! unknown field or a wrong type with a 500 whatever the field validation.
//!
//! The schema is read from the CRD the cluster stores, so a CRD applied with its full schema is
//! honoured. The one the sandbox seeds ([`clusterpolicy_schema`]) is a subset of NVIDIA's
//! (deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml at gpu-operator v25.10.1):
//! every property of the root, `spec`, `spec.devicePlugin`, `spec.mig`, `spec.migManager` and
//! `status` with their types, enums, required lists and defaults; the other components keep
//! their unknown fields (`x-kubernetes-preserve-unknown-fields`) but get their defaults.

use serde_json::{Map, Value, json};

use super::status::FieldError;

/// An object whose properties the sandbox does not list: kept as sent.
fn open() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn open_with(props: Value) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": props})
}

fn string() -> Value {
    json!({"type": "string"})
}

fn string_default(d: &str) -> Value {
    json!({"type": "string", "default": d})
}

/// The properties of a component with image, args, env and resources (devicePlugin, migManager).
fn component(extra: Value) -> Value {
    let mut props = json!({
        "args": {"type": "array", "items": {"type": "string"}},
        "enabled": {"type": "boolean"},
        "env": {"type": "array", "items": open()},
        "image": string(),
        "imagePullPolicy": string(),
        "imagePullSecrets": {"type": "array", "items": {"type": "string"}},
        "repository": string(),
        "resources": open(),
        "version": string(),
    });
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "object", "properties": props})
}

/// The ClusterPolicy schema the sandbox seeds (see the module comment for what it covers).
pub(crate) fn clusterpolicy_schema() -> Value {
    let upgrade = json!({
        "autoUpgrade": {"type": "boolean", "default": false},
        "maxParallelUpgrades": {"type": "integer", "default": 1},
        "maxUnavailable": {"x-kubernetes-int-or-string": true, "default": "25%"},
        "waitForCompletion": open_with(json!({"timeoutSeconds": {"type": "integer", "default": 0}})),
        "podDeletion": open_with(json!({"force": {"type": "boolean", "default": false},
            "timeoutSeconds": {"type": "integer", "default": 300}, "deleteEmptyDir": {"type": "boolean", "default": false}})),
        "drain": open_with(json!({"enable": {"type": "boolean", "default": false}, "force": {"type": "boolean", "default": false},
            "timeoutSeconds": {"type": "integer", "default": 300}, "deleteEmptyDir": {"type": "boolean", "default": false}})),
    });
    let spec = json!({
        "type": "object",
        "required": ["daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator", "toolkit"],
        "properties": {
            "ccManager": open(),
            "cdi": open_with(json!({"default": {"type": "boolean", "default": false}, "enabled": {"type": "boolean", "default": true}})),
            "daemonsets": open_with(json!({"updateStrategy": {"type": "string", "default": "RollingUpdate", "enum": ["RollingUpdate", "OnDelete"]}})),
            "dcgm": open(),
            "dcgmExporter": open(),
            "devicePlugin": component(json!({
                "config": {"type": "object", "properties": {"default": string(), "name": string()}},
                "mps": {"type": "object", "properties": {"root": string_default("/run/nvidia/mps")}},
            })),
            "driver": open_with(json!({"kernelModuleType": string_default("auto"), "upgradePolicy": open_with(upgrade)})),
            "gdrcopy": open(),
            "gds": open(),
            "gfd": open(),
            "hostPaths": open(),
            "kataManager": open_with(json!({"config": open_with(json!({"artifactsDir": string_default(
                "/opt/nvidia-gpu-operator/artifacts/runtimeclasses")}))})),
            "mig": {"type": "object", "properties": {"strategy": {"type": "string", "enum": ["none", "single", "mixed"]}}},
            "migManager": component(json!({
                "config": {"type": "object", "properties": {
                    "default": {"type": "string", "default": "all-disabled", "enum": ["all-disabled", ""]},
                    "name": string_default("default-mig-parted-config")}},
                "gpuClientsConfig": {"type": "object", "properties": {"name": string()}},
            })),
            "nodeStatusExporter": open(),
            "operator": open_with(json!({"defaultRuntime": {"type": "string", "default": "docker", "enum": ["docker", "crio", "containerd"]},
                "runtimeClass": string_default("nvidia")})).as_object().map(|o| {
                    let mut o = o.clone();
                    o.insert("required".into(), json!(["defaultRuntime"]));
                    Value::Object(o)
                }).unwrap_or_default(),
            "psa": open(),
            "psp": open(),
            "sandboxDevicePlugin": open(),
            "sandboxWorkloads": open_with(json!({"defaultWorkload": {"type": "string", "default": "container"}})),
            "toolkit": open_with(json!({"installDir": string_default("/usr/local/nvidia")})),
            "validator": open(),
            "vfioManager": open(),
            "vgpuDeviceManager": open_with(json!({"config": open_with(json!({"default": string_default("default")}))})),
            "vgpuManager": open(),
        },
    });
    json!({
        "type": "object",
        "properties": {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": {"type": "object", "required": ["state"], "properties": {
                "conditions": {"type": "array", "items": open()},
                "namespace": string(),
                "state": {"type": "string", "enum": ["ignored", "ready", "notReady"]},
            }},
        },
    })
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn props(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// Removes the fields the schema does not declare and returns their dotted paths
/// (`spec.mig.bogus`). metadata, apiVersion and kind at the root are the API server's own.
pub(crate) fn prune(obj: &mut Value, schema: &Value) -> Vec<String> {
    fn walk(v: &mut Value, s: &Value, path: &str, root: bool, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                let declared = props(s);
                let additional = s.get("additionalProperties").filter(|a| a.is_object());
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if root && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match declared.and_then(|d| d.get(&k)).or(additional) {
                        Some(cs) => {
                            if let Some(c) = m.get_mut(&k) {
                                walk(c, cs, &p, false, out);
                            }
                        }
                        None if preserves(s) => {}
                        None => {
                            m.remove(&k);
                            out.push(p);
                        }
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = s.get("items") {
                    for (i, c) in a.iter_mut().enumerate() {
                        walk(c, items, &format!("{path}[{i}]"), false, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(obj, schema, "", true, &mut out);
    out
}

/// Fills in defaults where the parent object exists and the field is absent, or null without
/// `nullable` (defaulting/algorithm.go); with `prune_nulls`, nulls of non-nullable fields
/// without a default are removed, as PruneNonNullableNullsWithoutDefaults does when a request
/// body is decoded.
pub(crate) fn default(obj: &mut Value, schema: &Value, prune_nulls: bool) {
    match obj {
        Value::Object(m) => {
            if let Some(declared) = props(schema) {
                for (k, cs) in declared {
                    let nullable = cs.get("nullable") == Some(&Value::Bool(true));
                    match (m.get(k), cs.get("default")) {
                        (None, Some(d)) => {
                            m.insert(k.clone(), d.clone());
                        }
                        (Some(Value::Null), Some(d)) if !nullable => {
                            m.insert(k.clone(), d.clone());
                        }
                        (Some(Value::Null), None) if !nullable && prune_nulls => {
                            m.remove(k);
                        }
                        _ => {}
                    }
                    if let Some(c) = m.get_mut(k) {
                        default(c, cs, prune_nulls);
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for c in a.iter_mut() {
                    default(c, items, prune_nulls);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name the OpenAPI validator reports for a value.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        w => type_name(v) == w,
    }
}

/// Types, enums and required fields (k8s.io/kube-openapi pkg/validation/validate, as
/// customresource/validator.go reports them). `metadata` is validated as ObjectMeta elsewhere.
pub(crate) fn validate(obj: &Value, schema: &Value) -> Vec<FieldError> {
    fn walk(v: &Value, s: &Value, path: &str, out: &mut Vec<FieldError>) {
        if v.is_null() && s.get("nullable") == Some(&Value::Bool(true)) {
            return;
        }
        if let Some(t) = s.get("type").and_then(Value::as_str)
            && !type_ok(t, v)
        {
            out.push(FieldError::type_invalid(path, type_name(v), t));
            return;
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array)
            && !e.contains(v)
        {
            let supported: Vec<String> = e.iter().map(Value::to_string).collect();
            out.push(FieldError {
                field: path.to_string(),
                reason: "FieldValueNotSupported",
                value: None,
                detail: format!(
                    "Unsupported value: {v}: supported values: {}",
                    supported.join(", ")
                ),
            });
        }
        match v {
            Value::Object(m) => {
                for r in s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if !m.contains_key(r) {
                        out.push(FieldError::required(join(path, r), ""));
                    }
                }
                if let Some(declared) = props(s) {
                    for (k, c) in m {
                        if path.is_empty() && k == "metadata" {
                            continue;
                        }
                        if let Some(cs) = declared.get(k) {
                            walk(c, cs, &join(path, k), out);
                        }
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = s.get("items") {
                    for (i, c) in a.iter().enumerate() {
                        walk(c, items, &format!("{path}[{i}]"), out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(obj, schema, "", &mut out);
    out
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Go's `%#v` of a decoded JSON scalar, as structured-merge-diff prints a value it cannot use.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "interface {}(nil)".into(),
        other => other.to_string(),
    }
}

/// What structured-merge-diff refuses when it converts an applied configuration to a typed value
/// (typed/validate.go, `field not declared in schema` and `expected string, got ...`), as
/// `.spec.bogus: ...`; several as its ValidationErrors print them (`errors:` and one indented line
/// each; the real server's order follows Go's map order, the sandbox's the keys'). None when the
/// configuration fits.
pub(crate) fn typed_error(applied: &Value, schema: &Value) -> Option<String> {
    fn walk(v: &Value, s: &Value, path: &str, root: bool, out: &mut Vec<String>) {
        if v.is_null() {
            return;
        }
        let t = s.get("type").and_then(Value::as_str);
        let scalar = |want: &str| {
            format!(
                "{path}: expected {want}, got &value.valueUnstructured{{Value:{}}}",
                go_value(v)
            )
        };
        match (t, v) {
            (Some("string"), Value::String(_))
            | (Some("boolean"), Value::Bool(_))
            | (Some("integer" | "number"), Value::Number(_)) => {}
            (Some("string"), _) => out.push(scalar("string")),
            (Some("boolean"), _) => out.push(scalar("boolean")),
            (Some("integer" | "number"), _) => out.push(scalar("numeric (int or float)")),
            (Some("object") | None, Value::Object(m)) => {
                for (k, c) in m {
                    if root && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
                        continue;
                    }
                    let p = format!("{path}.{k}");
                    let cs = props(s)
                        .and_then(|d| d.get(k))
                        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()));
                    match cs {
                        Some(cs) => walk(c, cs, &p, false, out),
                        None if preserves(s) => {}
                        None => out.push(format!("{p}: field not declared in schema")),
                    }
                }
            }
            (Some("array"), Value::Array(a)) => {
                if let Some(items) = s.get("items") {
                    for (i, c) in a.iter().enumerate() {
                        walk(c, items, &format!("{path}[{i}]"), false, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(applied, schema, "", true, &mut out);
    match out.len() {
        0 => None,
        1 => out.pop(),
        _ => Some(format!("errors:\n  {}", out.join("\n  "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prunes_defaults_and_validates() {
        let s = clusterpolicy_schema();
        let mut o = json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "x"},
            "spec": {"bogus": 1, "mig": {"strategy": "mixed", "x": true}, "driver": {"kept": 1},
                "migManager": {"config": {"name": null}}}});
        assert_eq!(prune(&mut o, &s), ["spec.bogus", "spec.mig.x"]);
        default(&mut o, &s, true);
        assert_eq!(
            o["spec"]["driver"],
            json!({"kept": 1, "kernelModuleType": "auto"})
        );
        assert_eq!(
            o["spec"]["migManager"]["config"],
            json!({"name": "default-mig-parted-config", "default": "all-disabled"})
        );
        let errs: Vec<String> = validate(&o, &s).iter().map(ToString::to_string).collect();
        assert_eq!(errs.len(), 8, "{errs:?}");
        assert_eq!(errs[0], "spec.daemonsets: Required value");
        let bad = json!({"spec": {"devicePlugin": {"config": {"name": 5}}}});
        assert_eq!(
            typed_error(&bad, &s).as_deref(),
            Some(
                ".spec.devicePlugin.config.name: expected string, got &value.valueUnstructured{Value:5}"
            )
        );
    }
}
