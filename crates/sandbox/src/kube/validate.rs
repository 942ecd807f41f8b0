//! What the API server validates: its name, label and key rules (k8s.io/apimachinery/pkg/util/validation),
//! reimplemented, and the checks of each kind's objects that build on them (a representative subset).

use base64::Engine as _;
use serde_json::{Value, json};

use super::kinds::{self, Kind};
use super::meta::meta_str;
use super::status::{ApiError, FieldError};

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
    alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. \
    'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' \
    or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
    '[-._a-zA-Z0-9]+')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or \
    '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
    '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
    characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
    'MyValue',  or 'my_value',  or '12345', regex used for validation is \
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

pub(crate) fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|p| !p.is_empty() && is_dns1123_label_chars(p))
}

fn is_dns1123_label_chars(p: &str) -> bool {
    p.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !p.starts_with('-')
        && !p.ends_with('-')
}

/// Object names: namespaces are RFC 1123 labels, everything else here is a subdomain.
pub(crate) fn object_name(name: &str, label_only: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if label_only {
        if !is_dns1123_label(name) {
            let msg = if name.len() > 63 {
                "must be no more than 63 characters".to_string()
            } else {
                DNS1123_LABEL_MSG.to_string()
            };
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    } else if name.len() > 253 {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 253 characters",
        ));
    } else if !is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            DNS1123_SUBDOMAIN_MSG,
        ));
    }
    errs
}

/// A name that can be one segment of a URL path (k8s.io/apimachinery pkg/api/validation/path
/// IsValidPathSegmentName): not `.` or `..`, no `/` or `%`.
fn path_segment_name(name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
    }
    if name == "." || name == ".." {
        return vec![FieldError::invalid(
            "metadata.name",
            name,
            format!("may not be '{name}'"),
        )];
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            return vec![FieldError::invalid(
                "metadata.name",
                name,
                format!("may not contain '{bad}'"),
            )];
        }
    }
    Vec::new()
}

pub(crate) fn config_key(field: &str, key: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push(FieldError::invalid(
            field,
            key,
            "must be no more than 253 characters",
        ));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        errs.push(FieldError::invalid(field, key, CONFIG_KEY_MSG));
    }
    if key == "." || key == ".." {
        errs.push(FieldError::invalid(
            field,
            key,
            format!("must not be '{key}'"),
        ));
    } else if key.starts_with("..") {
        errs.push(FieldError::invalid(field, key, "must not start with '..'"));
    }
    errs
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// Label and annotation keys: `[prefix/]name`, prefix a DNS subdomain, name a qualified name part.
pub(crate) fn qualified_key(field: &str, key: &str) -> Vec<FieldError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        errs.push(FieldError::invalid(
            field,
            key,
            format!("prefix part {DNS1123_SUBDOMAIN_MSG}"),
        ));
    }
    if name.contains('/') || !is_qualified_name_part(name) {
        let msg = if name.len() > 63 {
            "name part must be no more than 63 characters".to_string()
        } else {
            QUALIFIED_NAME_MSG.to_string()
        };
        errs.push(FieldError::invalid(field, key, msg));
    }
    errs
}

pub(crate) fn label_value(field: &str, v: &str) -> Vec<FieldError> {
    if v.is_empty() || is_qualified_name_part(v) {
        Vec::new()
    } else if v.len() > 63 {
        vec![FieldError::invalid(
            field,
            v,
            "must be no more than 63 characters",
        )]
    } else {
        vec![FieldError::invalid(field, v, LABEL_VALUE_MSG)]
    }
}

const MAX_OBJECT_DATA: usize = 1024 * 1024;

/// Secret stringData is write-only sugar for data; data values must be base64.
pub(super) fn fold_string_data(obj: &mut Value) -> Result<(), ApiError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(Value::Object(data)) = obj.get("data") {
        for (k, v) in data {
            let s = v.as_str().ok_or_else(|| ApiError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: data[{k}] must be a string")))?;
            b64.decode(s).map_err(|e| {
                ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a \
                    Secret: illegal base64 data in data[{k}]: {e}"
                ))
            })?;
        }
    }
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        let data = obj
            .as_object_mut()
            .expect("object")
            .entry("data")
            .or_insert_with(|| json!({}));
        for (k, v) in sd {
            let s = v.as_str().unwrap_or_default();
            data[k] = json!(b64.encode(s));
        }
    }
    if obj.get("type").is_none() {
        obj["type"] = json!("Opaque");
    }
    Ok(())
}

/// What the real API validates for these kinds (a representative subset).
pub(super) fn validate_object(
    kind: Kind,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let mut errs = if [
        kinds::ROLES,
        kinds::CLUSTERROLES,
        kinds::ROLEBINDINGS,
        kinds::CLUSTERROLEBINDINGS,
    ]
    .contains(&kind)
    {
        // RBAC objects are named by path segment only (pkg/apis/rbac/validation:
        // ValidateRBACName is path.ValidatePathSegmentName), so `system:discovery` is a name.
        path_segment_name(&name)
    } else {
        object_name(&name, kind == kinds::NAMESPACES)
    };
    errs.extend(labels_and_annotations(kind, obj)?);
    if kind == kinds::CONFIGMAPS || kind == kinds::SECRETS {
        errs.extend(data_and_immutability(kind, obj, old)?);
    }
    if kind == kinds::DAEMONSETS {
        errs.extend(daemonset_selector(obj, old));
    }
    if kind == kinds::NODES {
        errs.extend(node_taints(obj.pointer("/spec/taints")));
    }
    if kind == kinds::PODS {
        errs.extend(pod_containers(obj.pointer("/spec/containers")));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        let kind_name = if kind.group.is_empty() {
            kind.kind.to_string()
        } else {
            format!("{}.{}", kind.kind, kind.group)
        };
        Err(ApiError::invalid(&kind_name, &name, &errs))
    }
}

/// The keys of labels and annotations, and the values of labels; a value that is not a string
/// fails the decoding of the body.
fn labels_and_annotations(kind: Kind, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
    let mut errs = Vec::new();
    for (field, values) in [("metadata.labels", true), ("metadata.annotations", false)] {
        let ptr = if values {
            "/metadata/labels"
        } else {
            "/metadata/annotations"
        };
        match obj.pointer(ptr) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    errs.extend(qualified_key(field, k));
                    match v.as_str() {
                        Some(s) if values => errs.extend(label_value(&format!("{field}[{k}]"), s)),
                        Some(_) => {}
                        None => {
                            return Err(ApiError::bad_request(format!(
                                "{} in version \"{}\" cannot be handled as a {}: {field}[{k}] must \
                                    be a string",
                                kind.kind, kind.version, kind.kind
                            )));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "{field} must be a map of strings"
                )));
            }
        }
    }
    Ok(errs)
}

/// A ConfigMap's or a Secret's data: valid keys, string values, no key in both maps of a
/// ConfigMap, the size limit, and what `immutable` (and a Secret's type) freezes.
fn data_and_immutability(
    kind: Kind,
    obj: &Value,
    old: Option<&Value>,
) -> Result<Vec<FieldError>, ApiError> {
    let mut errs = Vec::new();
    let data_keys =
        |field: &str, errs: &mut Vec<FieldError>| -> Result<usize, ApiError> {
            let mut size = 0;
            match obj.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) => {
                    for (k, v) in m {
                        errs.extend(config_key(&format!("{field}[{k}]"), k));
                        let s = v.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "{} in version \"v1\" cannot be handled as a {}: {field}[{k}] must be \
                            a string", kind.kind, kind.kind))
                    })?;
                        size += k.len() + s.len();
                    }
                }
                Some(_) => {
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"v1\" cannot be handled as a {}: {field} must be a map",
                        kind.kind, kind.kind
                    )));
                }
            }
            Ok(size)
        };
    let mut size = data_keys("data", &mut errs)?;
    if kind == kinds::CONFIGMAPS {
        size += data_keys("binaryData", &mut errs)?;
        if let (Some(Value::Object(d)), Some(Value::Object(b))) =
            (obj.get("data"), obj.get("binaryData"))
        {
            for k in d.keys().filter(|k| b.contains_key(*k)) {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    k,
                    "duplicate of key present in binaryData",
                ));
            }
        }
    }
    if size > MAX_OBJECT_DATA {
        errs.push(FieldError::too_long("data", MAX_OBJECT_DATA));
    }
    if let Some(o) = old {
        if o.get("immutable") == Some(&json!(true)) {
            for f in ["data", "binaryData"] {
                if o.get(f) != obj.get(f) {
                    errs.push(FieldError::forbidden(
                        f,
                        "field is immutable when `immutable` is set",
                    ));
                }
            }
            if obj.get("immutable") != Some(&json!(true)) {
                errs.push(FieldError::forbidden(
                    "immutable",
                    "field is immutable when `immutable` is set",
                ));
            }
        }
        if kind == kinds::SECRETS && o.get("type") != obj.get("type") {
            errs.push(FieldError::invalid(
                "type",
                obj.get("type").and_then(Value::as_str).unwrap_or_default(),
                "field is immutable",
            ));
        }
    }
    Ok(errs)
}

/// A DaemonSet's selector: present, matching its template's labels, and unchanged by an update.
fn daemonset_selector(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sel = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object);
    match sel {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => {
            let tl = obj
                .pointer("/spec/template/metadata/labels")
                .and_then(Value::as_object);
            let ok = tl.is_some_and(|tl| sel.iter().all(|(k, v)| tl.get(k) == Some(v)));
            if !ok {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    &format!("{:?}", tl.map(|m| m.len())),
                    "`selector` does not match template `labels`",
                ));
            }
            if let Some(o) = old
                && o.pointer("/spec/selector") != obj.pointer("/spec/selector")
            {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    "",
                    "field is immutable",
                ));
            }
        }
    }
    errs
}

/// A Pod's containers, as far as the API server's checks matter to a pod nothing runs
/// (validateContainers in kubernetes/pkg/apis/core/validation/validation.go): at least one, each
/// with a name and an image.
fn pod_containers(containers: Option<&Value>) -> Vec<FieldError> {
    let list = containers
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty());
    let Some(list) = list else {
        return vec![FieldError::required("spec.containers", "")];
    };
    let mut errs = Vec::new();
    for (i, c) in list.iter().enumerate() {
        for f in ["name", "image"] {
            if c.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(
                    format!("spec.containers[{i}].{f}"),
                    "",
                ));
            }
        }
    }
    errs
}

/// A Node's `spec.taints` as the API server validates them (validateNodeTaints in
/// kubernetes/pkg/apis/core/validation/validation.go): each key a qualified name, each value a label
/// value, an effect of the three, and no two taints with the same key and effect, whatever their
/// values. A kubelet whose node repeats one cannot register it.
fn node_taints(taints: Option<&Value>) -> Vec<FieldError> {
    const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
    let mut errs = Vec::new();
    let Some(list) = taints.and_then(Value::as_array) else {
        return errs;
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let field = format!("spec.taints[{i}]");
        let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
        let (key, value, effect) = (s("key"), s("value"), s("effect"));
        errs.extend(qualified_key(&format!("{field}.key"), key));
        errs.extend(label_value(&format!("{field}.value"), value));
        if effect.is_empty() {
            errs.push(FieldError::required(format!("{field}.effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                format!("{field}.effect"),
                effect,
                &EFFECTS,
            ));
        }
        if seen.contains(&(key, effect)) {
            // The API server prints the duplicate with Go's %#v of its internal core.Taint.
            errs.push(FieldError::duplicate(
                field,
                format!(
                    "core.Taint{{Key:{key:?}, Value:{value:?}, Effect:{effect:?}, TimeAdded:<nil>}}"
                ),
                "taints must be unique by key and effect pair",
            ));
            continue;
        }
        seen.push((key, effect));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        assert!(is_dns1123_subdomain("cluster-policy"));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("Bad"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(is_dns1123_label("gpu-operator"));
        assert!(!is_dns1123_label("a.b"));
        assert!(config_key("data", "time-sliced-10").is_empty());
        assert!(config_key("data", "A_b.c").is_empty());
        assert!(!config_key("data", "a/b").is_empty());
        assert!(!config_key("data", "..x").is_empty());
        assert!(!config_key("data", &"k".repeat(254)).is_empty());
        assert!(qualified_key("l", "nvidia.com/device-plugin.config").is_empty());
        assert!(!qualified_key("l", "Nvidia.com/x").is_empty());
        assert!(!qualified_key("l", "a/b/c").is_empty());
        assert!(label_value("v", "").is_empty());
        let taint = |k: &str, v: &str, e: &str| json!({"key": k, "value": v, "effect": e});
        let gpu = |v: &str, e: &str| taint("nvidia.com/gpu", v, e);
        // The same key with another effect is a different taint.
        assert!(
            node_taints(Some(&json!([
                gpu("present", "NoSchedule"),
                gpu("present", "NoExecute")
            ])))
            .is_empty()
        );
        let dup = node_taints(Some(&json!([
            gpu("Present", "NoSchedule"),
            gpu("present", "NoSchedule")
        ])));
        assert_eq!(dup.len(), 1);
        assert_eq!(
            dup[0].to_string(),
            "spec.taints[1]: Duplicate value: core.Taint{Key:\"nvidia.com/gpu\", Value:\"present\", Effect:\"NoSchedule\", TimeAdded:<nil>}: taints must be unique by key and effect pair"
        );
        assert_eq!(
            node_taints(Some(&json!([taint("k", "v", "Sometimes")])))[0].field,
            "spec.taints[0].effect"
        );
        assert!(!label_value("v", "-x").is_empty());
    }
}
