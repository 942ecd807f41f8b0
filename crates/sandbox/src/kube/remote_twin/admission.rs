//! The kubelet's admission of a pod on a node the remote twin runs, by the same rules as the
//! store's (`twin::admit`): on a GPU node it knows, by the devices left and its plugin's rules;
//! elsewhere the pod runs. And the devices of pods that are gone or ended, given back.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::objects::items;
use crate::kube::store::demand::integer;
use crate::kube::twin::{self, NodeTwin};

/// The status the kubelet writes for `pod`, bound to `bound` (`node` as listed; `t` its twin,
/// None for a node without GPUs the twin knows).
pub(super) fn admit(
    t: Option<&mut NodeTwin>,
    bound: &str,
    node: Option<&Value>,
    pod: &Value,
) -> Value {
    let now = crate::dates::now_rfc3339_secs();
    let cond = |c: &str| json!({"type": c, "status": "True", "lastTransitionTime": now});
    let running = json!({"phase": "Running", "startTime": now,
        "conditions": [cond("PodScheduled"), cond("Initialized"),
            cond("ContainersReady"), cond("Ready")]});
    let Some(t) = t else {
        return running;
    };
    let room: BTreeMap<String, u64> = node
        .and_then(|n| n.pointer("/status/allocatable"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .filter_map(|(k, v)| Some((k.clone(), integer(v)?)))
        .collect();
    let held: Vec<&twin::ContainerDevices> = t.held.values().flat_map(|h| &h.containers).collect();
    match twin::admit(bound, t, &room, pod, &held) {
        twin::Admission::Admit(containers) => {
            let s = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
            let held = twin::HeldPod {
                namespace: s("/metadata/namespace").to_string(),
                name: s("/metadata/name").to_string(),
                containers,
            };
            t.held.insert(s("/metadata/uid").to_string(), held);
            running
        }
        twin::Admission::Reject(reason, message) => {
            json!({"phase": "Failed", "reason": reason, "message": message, "startTime": now})
        }
    }
}

/// Forgets the devices of the pods not in `pods` (a list) or ended.
pub(super) fn give_back(nodes: &mut BTreeMap<String, NodeTwin>, pods: &Value) {
    let live: Vec<&str> = items(pods)
        .iter()
        .filter(|p| {
            !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| p.pointer("/metadata/uid").and_then(Value::as_str))
        .collect();
    for t in nodes.values_mut() {
        t.held.retain(|uid, _| live.contains(&uid.as_str()));
    }
}
