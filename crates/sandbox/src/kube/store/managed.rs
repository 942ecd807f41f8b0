//! managedFields: who owns which field of an object, recorded per manager and operation as the API
//! server records it, and the conflict a server-side apply meets when it would change a field that
//! another manager owns.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::kube::meta::meta_mut;
use crate::kube::patch::{self, FieldPath};
use crate::kube::status::ApiError;

#[derive(Debug, Clone)]
pub(super) struct Managed {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) fields: BTreeSet<FieldPath>,
    pub(super) time: String,
    /// The subresource it wrote through (`status`), a manager of its own.
    pub(super) subresource: Option<String>,
}

pub(super) fn managed_entries(obj: &Value) -> Vec<Managed> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Managed {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    fields: e
                        .get("fieldsV1")
                        .map(patch::from_fields_v1)
                        .unwrap_or_default(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn set_managed(obj: &mut Value, owners: &[Managed], api_version: &str) {
    // Stored in the API server's order (sortEncodedManagedFields in k8s.io/apimachinery
    // pkg/util/managedfields/internal/managedfields.go): operation, then time, then manager.
    let mut owners: Vec<&Managed> = owners.iter().collect();
    owners.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager).cmp(&(&b.operation, &b.time, &b.manager))
    });
    let list: Vec<Value> = owners
        .iter()
        .map(|e| {
            let mut entry = json!({"manager": e.manager, "operation": e.operation, "apiVersion": api_version, "time": e.time,
                "fieldsType": "FieldsV1", "fieldsV1": patch::to_fields_v1(&e.fields)});
            if let Some(sub) = &e.subresource {
                entry["subresource"] = json!(sub);
            }
            entry
        })
        .collect();
    let m = meta_mut(obj);
    if list.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

impl Managed {
    /// How the API server names a manager in a conflict (printManager in
    /// k8s.io/apimachinery pkg/util/managedfields/internal/conflict.go): the quoted name, and
    /// for an update manager also the API version. The manager identifier it prints from carries
    /// no time (BuildManagerIdentifier clears it), so kube-apiserver v1.34 prints none.
    pub(super) fn describe(&self, api_version: &str) -> String {
        if self.operation == "Update" {
            format!("{:?} using {api_version}", self.manager)
        } else {
            format!("{:?}", self.manager)
        }
    }
}

pub(super) fn apply_conflict(conflicts: &BTreeMap<String, Vec<FieldPath>>) -> ApiError {
    let total: usize = conflicts.values().map(Vec::len).sum();
    let mut causes = Vec::new();
    let mut parts = Vec::new();
    for (m, paths) in conflicts {
        for p in paths {
            causes.push(json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": patch::dotted(p)}));
        }
        if total == 1 {
            parts.push(format!("conflict with {m}: {}", patch::dotted(&paths[0])));
        } else {
            let list: Vec<String> = paths
                .iter()
                .map(|p| format!("- {}", patch::dotted(p)))
                .collect();
            parts.push(format!("conflicts with {m}:\n{}", list.join("\n")));
        }
    }
    let plural = if total == 1 { "conflict" } else { "conflicts" };
    ApiError::new(
        409,
        "Conflict",
        format!("Apply failed with {total} {plural}: {}", parts.join("\n")),
    )
    .with_details(json!({"causes": causes}))
}

pub(super) fn strip_meta_status(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    o
}

pub(super) fn without_volatile(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        if let Some(Value::Array(a)) = m.get_mut("managedFields") {
            for e in a.iter_mut() {
                e.as_object_mut().map(|e| e.remove("time"));
            }
        }
    }
    o
}
