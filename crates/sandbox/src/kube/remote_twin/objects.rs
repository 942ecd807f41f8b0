//! What the remote twin reads from the lists it gets: the items of a list, a Ready condition, the
//! node a DaemonSet's pod is meant for, the pods that hold each node's GPUs, and string maps.

use std::collections::BTreeMap;

use serde_json::Value;

/// node -> the pods bound there that hold GPUs (`store::demand::gpu_holder_node`).
pub(super) fn gpu_users(pods: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in items(pods) {
        let Some(node) = crate::kube::store::demand::gpu_holder_node(p) else {
            continue;
        };
        let s = |ptr: &str| p.pointer(ptr).and_then(Value::as_str).unwrap_or_default();
        out.entry(node.to_string()).or_default().push(format!(
            "{}/{}",
            s("/metadata/namespace"),
            s("/metadata/name")
        ));
    }
    out
}

pub(super) fn items(list: &Value) -> &[Value] {
    list.get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A pod's or a node's Ready condition is True.
pub(super) fn ready(obj: &Value) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The node a DaemonSet's pod is meant for: the one name its required node affinity matches by
/// `metadata.name`, as the daemonset controller writes it.
pub(super) fn daemon_pod_node(pod: &Value) -> Option<String> {
    let owned = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| {
            o.iter().any(|o| {
                o.get("kind").and_then(Value::as_str) == Some("DaemonSet")
                    && o.get("controller").and_then(Value::as_bool) == Some(true)
            })
        });
    if !owned {
        return None;
    }
    let terms = pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )?;
    terms.as_array()?.iter().find_map(|t| {
        t.get("matchFields")?.as_array()?.iter().find_map(|f| {
            let by_name = f.get("key").and_then(Value::as_str) == Some("metadata.name")
                && f.get("operator").and_then(Value::as_str) == Some("In");
            let values = f.get("values")?.as_array()?;
            (by_name && values.len() == 1)
                .then(|| values[0].as_str().map(str::to_string))
                .flatten()
        })
    })
}

pub(super) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_daemon_pod_is_meant_for_the_node_its_affinity_names() {
        let pod = |kind: &str| {
            json!({"metadata": {"ownerReferences": [{"kind": kind, "controller": true}]},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                        "values": ["gpu-0"]}]}]}}}}})
        };
        assert_eq!(daemon_pod_node(&pod("DaemonSet")).as_deref(), Some("gpu-0"));
        assert_eq!(daemon_pod_node(&pod("ReplicaSet")), None);
        assert_eq!(daemon_pod_node(&json!({})), None);
    }
}
