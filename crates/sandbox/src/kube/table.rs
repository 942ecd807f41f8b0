//! Server-side printing: kubectl asks for `as=Table` and shows the columns the server chooses, as the real
//! API server's printers define them for these kinds (age computed at request time).

use super::kinds::{self, Kind};
use crate::dates::{now_ms, parse_rfc3339_secs as epoch};
use serde_json::{Value, json};

/// Whether the client asked for a Table (kubectl get does; kube-rs never does).
pub(crate) fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn col(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

fn s<'a>(o: &'a Value, ptr: &str) -> &'a str {
    o.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn n(o: &Value, ptr: &str) -> i64 {
    o.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// kubectl's HumanDuration.
pub(crate) fn human(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return if secs % 60 == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{}s", secs % 60)
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return if minutes % 60 == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{}m", minutes % 60)
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return if hours % 24 == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, hours % 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    let (years, days) = (hours / 24 / 365, (hours / 24) % 365);
    if hours < 24 * 365 * 8 && days != 0 {
        format!("{years}y{days}d")
    } else {
        format!("{years}y")
    }
}

fn age(o: &Value) -> String {
    let now = (now_ms() / 1000) as i64;
    epoch(s(o, "/metadata/creationTimestamp"))
        .map(|t| human(now - t))
        .unwrap_or_else(|| "<unknown>".into())
}

fn count(o: &Value, field: &str) -> i64 {
    o.get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

fn node_row(o: &Value) -> Vec<Value> {
    let ready = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| {
            if c["status"] == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .unwrap_or("Unknown");
    let status = if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    };
    let roles: Vec<String> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let addr = |t: &str| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == t))
            .and_then(|x| x["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age(o)),
        json!(s(o, "/status/nodeInfo/kubeletVersion")),
        json!(addr("InternalIP")),
        json!(addr("ExternalIP")),
        json!(s(o, "/status/nodeInfo/osImage")),
        json!(s(o, "/status/nodeInfo/kernelVersion")),
        json!(s(o, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

/// Renders one object as the cells of its row.
type RowFn = fn(&Value) -> Vec<Value>;

/// A Table of the given objects, with each row carrying the object's metadata (kubectl's default).
pub(crate) fn table(kind: Kind, items: &[Value], resource_version: &str) -> Value {
    let (columns, row): (Vec<Value>, RowFn) = match kind {
        k if k == kinds::NODES => (
            vec![
                col("Name", "string", 0),
                col("Status", "string", 0),
                col("Roles", "string", 0),
                col("Age", "string", 0),
                col("Version", "string", 0),
                col("Internal-IP", "string", 1),
                col("External-IP", "string", 1),
                col("OS-Image", "string", 1),
                col("Kernel-Version", "string", 1),
                col("Container-Runtime", "string", 1),
            ],
            node_row,
        ),
        k if k == kinds::CONFIGMAPS => (
            vec![
                col("Name", "string", 0),
                col("Data", "integer", 0),
                col("Age", "string", 0),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(count(o, "data") + count(o, "binaryData")),
                    json!(age(o)),
                ]
            },
        ),
        k if k == kinds::SECRETS => (
            vec![
                col("Name", "string", 0),
                col("Type", "string", 0),
                col("Data", "integer", 0),
                col("Age", "string", 0),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/type")),
                    json!(count(o, "data")),
                    json!(age(o)),
                ]
            },
        ),
        k if k == kinds::NAMESPACES => (
            vec![
                col("Name", "string", 0),
                col("Status", "string", 0),
                col("Age", "string", 0),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/status/phase")),
                    json!(age(o)),
                ]
            },
        ),
        k if k == kinds::DAEMONSETS => (
            vec![
                col("Name", "string", 0),
                col("Desired", "integer", 0),
                col("Current", "integer", 0),
                col("Ready", "integer", 0),
                col("Up-to-date", "integer", 0),
                col("Available", "integer", 0),
                col("Node Selector", "string", 0),
                col("Age", "string", 0),
            ],
            |o| {
                let sel: Vec<String> = o
                    .pointer("/spec/template/spec/nodeSelector")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(n(o, "/status/desiredNumberScheduled")),
                    json!(n(o, "/status/currentNumberScheduled")),
                    json!(n(o, "/status/numberReady")),
                    json!(n(o, "/status/updatedNumberScheduled")),
                    json!(n(o, "/status/numberAvailable")),
                    json!(if sel.is_empty() {
                        "<none>".to_string()
                    } else {
                        sel.join(",")
                    }),
                    json!(age(o)),
                ]
            },
        ),
        // The ClusterPolicy CRD's printer columns; custom resources print date columns as ages.
        k if k == kinds::CLUSTERPOLICIES => (
            vec![
                col("Name", "string", 0),
                col("Status", "string", 0),
                col("Age", "date", 0),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/status/state")),
                    json!(age(o)),
                ]
            },
        ),
        k if k == kinds::CRDS => (
            vec![col("Name", "string", 0), col("Created At", "date", 0)],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/metadata/creationTimestamp")),
                ]
            },
        ),
        _ => (
            vec![col("Name", "string", 0), col("Age", "string", 0)],
            |o| vec![json!(s(o, "/metadata/name")), json!(age(o))],
        ),
    };
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut meta = o.get("metadata").cloned().unwrap_or(json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.remove("managedFields");
            }
            json!({"cells": row(o), "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version}, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_epochs() {
        assert_eq!(epoch("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(epoch("2026-11-30T08:12:21Z"), Some(1_796_026_341));
        assert_eq!(human(5), "5s");
        assert_eq!(human(150), "2m30s");
        assert_eq!(human(3600 * 5 + 60 * 7), "5h7m");
        assert_eq!(human(86_400 * 3), "3d");
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
