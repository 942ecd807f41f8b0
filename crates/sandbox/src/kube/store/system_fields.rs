//! The fields the API server sets on every write rather than taking them from the client (uid,
//! creationTimestamp, generation, the status a write of the main resource may not change), and
//! what the controllers that answer within moments set on a Namespace or a CRD.

use serde_json::{Value, json};

use super::managed::strip_meta_status;
use crate::kube::kinds::{self, Kind};
use crate::kube::meta::{meta_mut, meta_str};
use crate::kube::util;

/// Sets the system fields of `new` at `now`: kept from `old` when there is one (with the status or
/// the rest of the object as the subresource written keeps them), fresh for a create.
pub(super) fn stamp(
    kind: Kind,
    old: Option<&Value>,
    new: &mut Value,
    subresource: Option<&str>,
    now: &str,
) {
    {
        let m = meta_mut(new);
        for f in ["selfLink", "deletionTimestamp"] {
            m.remove(f);
        }
    }
    match old {
        Some(o) => stamp_update(kind, o, new, subresource, now),
        None => {
            let m = meta_mut(new);
            m.insert("uid".into(), json!(util::uuid4()));
            m.insert("creationTimestamp".into(), json!(now));
            if kind.generation {
                m.insert("generation".into(), json!(1));
            }
            if kind == kinds::NAMESPACES {
                new["spec"] = json!({"finalizers": ["kubernetes"]});
                new["status"] = json!({"phase": "Active"});
            }
            if kind == kinds::PODS {
                // The pod registry's PrepareForCreate (pkg/registry/core/pod/strategy.go): a
                // new pod's status is Pending with its QoS class, whatever the client sent.
                new["status"] = json!({"phase": "Pending", "qosClass": qos_class(new)});
            }
        }
    }
}

fn stamp_update(kind: Kind, o: &Value, new: &mut Value, subresource: Option<&str>, now: &str) {
    let keep = |f: &str| o.get("metadata").and_then(|m| m.get(f)).cloned();
    let (uid, created, generation) = (keep("uid"), keep("creationTimestamp"), keep("generation"));
    if subresource == Some("status") {
        // A write to the status subresource changes the status and nothing else
        // (the registries' PrepareForUpdate of their status strategies keep the
        // old spec and metadata).
        let status = new.get("status").cloned();
        let rv = meta_str(new, "resourceVersion").map(str::to_string);
        *new = o.clone();
        match status {
            Some(st) => new["status"] = st,
            None => {
                new.as_object_mut().map(|m| m.remove("status"));
            }
        }
        if let Some(rv) = rv {
            meta_mut(new).insert("resourceVersion".into(), json!(rv));
        }
    } else if kind.status_subresource() {
        match o.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                new.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    let spec_changed = strip_meta_status(o) != strip_meta_status(new);
    let m = meta_mut(new);
    m.insert("uid".into(), uid.unwrap_or_else(|| json!(util::uuid4())));
    m.insert(
        "creationTimestamp".into(),
        created.unwrap_or_else(|| json!(now)),
    );
    if kind.generation {
        let g = generation.and_then(|g| g.as_i64()).unwrap_or(1);
        m.insert(
            "generation".into(),
            json!(if spec_changed { g + 1 } else { g }),
        );
    }
}

/// A pod's QoS class (pkg/apis/core/helper/qos `ComputePodQOS`): `BestEffort` when no container
/// asks for CPU or memory, `Guaranteed` when every container has both limits and requests equal
/// to them (requests default from limits before this), `Burstable` otherwise.
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .collect();
    let get = |c: &Value, f: &str, r: &str| c.pointer(&format!("/resources/{f}/{r}")).cloned();
    let any = containers.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|f| ["cpu", "memory"].iter().any(|r| get(c, f, r).is_some()))
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = get(c, "limits", r);
            limit.is_some() && get(c, "requests", r) == limit
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// What controllers and registries add to a Namespace or a CRD as it is written: a CRD's
/// conditions once it is established, a namespace's own name as a label.
pub(super) fn settle(kind: Kind, name: &str, new: &mut Value, now: &str) {
    if kind == kinds::CRDS && new.pointer("/status/conditions").is_none() {
        establish_crd(new, now);
    }
    if kind == kinds::NAMESPACES {
        let labels = meta_mut(new).entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
}

/// The naming and establishing controllers of apiextensions-apiserver accept the names and mark a
/// new CRD Established within moments (pkg/controller/status/naming_controller.go,
/// pkg/controller/establish/establishing_controller.go): `kubectl wait --for
/// condition=established` waits for this.
fn establish_crd(new: &mut Value, now: &str) {
    let versions: Vec<Value> = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == json!(true))
        .map(|v| v["name"].clone())
        .collect();
    let cond = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    new["status"] = json!({
        "acceptedNames": new.pointer("/spec/names").cloned().unwrap_or(json!({})),
        "storedVersions": versions,
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    });
}
