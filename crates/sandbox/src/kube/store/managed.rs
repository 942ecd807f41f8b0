//! managedFields: who owns which field of an object, recorded per manager and operation as the API
//! server records it (`record`, on every write), and the conflict a server-side apply meets when it
//! would change a field that another manager owns.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::WriteCtx;
use crate::kube::kinds::{self, Kind};
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

/// Records who owns what after a write of `new` (over `old`, if any) at `now`: an apply owns
/// exactly its configuration; an update owns what it changed.
pub(super) fn record(kind: Kind, old: Option<&Value>, new: &mut Value, ctx: &WriteCtx, now: &str) {
    let mut owners = match old {
        Some(_) if ctx.apply.is_some() => managed_entries(new),
        Some(o) => managed_entries(o),
        None => Vec::new(),
    };
    let data_maps = kind == kinds::CONFIGMAPS || kind == kinds::SECRETS;
    let maps_now = patch::map_paths(new, kind.custom, data_maps);
    let mut present = patch::leaf_paths(new);
    present.extend(maps_now.iter().cloned());

    match &ctx.apply {
        Some(paths) => {
            owners.retain(|e| !(e.manager == ctx.manager && e.operation == "Apply"));
            owners.push(Managed {
                manager: ctx.manager.to_string(),
                operation: "Apply".into(),
                fields: paths.clone(),
                time: now.to_string(),
                subresource: None,
            });
        }
        None => {
            // An update owns what it changed, and the maps it created (structured-merge-diff
            // counts an added map among the added paths, as "." in FieldsV1).
            let changed = match old {
                Some(o) => {
                    let before = patch::map_paths(o, kind.custom, data_maps);
                    let mut c = patch::changed_paths(o, new);
                    c.extend(maps_now.difference(&before).cloned());
                    c
                }
                None => present.clone(),
            };
            record_update(&mut owners, ctx, changed, now);
        }
    }
    // A map's own node is there too while any of its members is: FieldsV1 writes a map
    // node whose members a manager lost as `f:mig: {}` (see `patch::to_fields_v1`).
    let nodes: BTreeSet<FieldPath> = present
        .iter()
        .flat_map(|p| (1..p.len()).map(|n| p[..n].to_vec()))
        .filter(|k| k.last().is_some_and(|s| s != patch::SELF))
        .collect();
    for e in owners.iter_mut() {
        // An apply owns its configuration as given; a map node alone is an update
        // manager's remainder.
        let update = e.operation == "Update";
        e.fields
            .retain(|p| present.contains(p) || (update && nodes.contains(p)));
    }

    owners.retain(|e| !e.fields.is_empty());
    set_managed(new, &owners, &kind.api_version());
}

/// An update's manager takes the fields it `changed` from every other manager.
fn record_update(
    owners: &mut Vec<Managed>,
    ctx: &WriteCtx,
    changed: BTreeSet<FieldPath>,
    now: &str,
) {
    // An update manager is its name, operation and subresource.
    let is_me = |e: &Managed| {
        e.manager == ctx.manager
            && e.operation == "Update"
            && e.subresource.as_deref() == ctx.subresource
    };
    for e in owners.iter_mut().filter(|e| !is_me(e)) {
        e.fields.retain(|p| !changed.contains(p));
    }
    match owners.iter_mut().find(|e| is_me(e)) {
        Some(e) => {
            e.fields.extend(changed.iter().cloned());
            if !changed.is_empty() {
                e.time = now.to_string();
            }
        }
        None if !changed.is_empty() => owners.push(Managed {
            manager: ctx.manager.to_string(),
            operation: "Update".into(),
            fields: changed,
            time: now.to_string(),
            subresource: ctx.subresource.map(str::to_string),
        }),
        None => {}
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
