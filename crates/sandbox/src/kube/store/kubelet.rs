//! The twin nodes' kubelets in the store: each pod bound to a twin node (`spec.nodeName`) that
//! is still Pending is admitted or rejected (`crates/sandbox/src/kube/twin/kubelet.rs` says how), and the devices of the
//! pods that are gone or ended are given back. A read of the devices is the kubelet's
//! PodResources `List`, for tests and the inventory.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Cluster;
use super::demand::integer;
use crate::kube::kinds;
use crate::kube::twin::{self, Admission, HeldPod};

/// A node's allocatable `nvidia.com/` resources.
fn allocatable(node: &Value) -> BTreeMap<String, u64> {
    node.pointer("/status/allocatable")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .filter_map(|(k, v)| Some((k.clone(), integer(v)?)))
        .collect()
}

fn ended(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

impl Cluster {
    /// One pass of every twin node's kubelet.
    pub(super) fn kubelets(&mut self) {
        let pods: Vec<Value> = self
            .objects
            .get(&kinds::PODS.qualified())
            .into_iter()
            .flat_map(|m| m.values())
            .cloned()
            .collect();
        let live: Vec<&str> = pods
            .iter()
            .filter(|p| !ended(p))
            .filter_map(|p| p.pointer("/metadata/uid")?.as_str())
            .collect();
        for t in self.twins.values_mut() {
            t.held.retain(|uid, _| live.contains(&uid.as_str()));
        }
        for pod in &pods {
            let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) else {
                continue;
            };
            // The registry makes a pod Pending; the kubelet takes it from there.
            let pending = matches!(
                pod.pointer("/status/phase").and_then(Value::as_str),
                None | Some("Pending")
            );
            if !pending || !self.twins.contains_key(node) {
                continue;
            }
            self.kubelet_admit(node, pod);
        }
    }

    fn kubelet_admit(&mut self, node: &str, pod: &Value) {
        let s = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let (ns, name, uid) = (
            s("/metadata/namespace"),
            s("/metadata/name"),
            s("/metadata/uid"),
        );
        let room = self
            .get_ref(kinds::NODES, "", node)
            .map(allocatable)
            .unwrap_or_default();
        let Some(t) = self.twins.get(node) else {
            return;
        };
        let held: Vec<&twin::ContainerDevices> =
            t.held.values().flat_map(|h| &h.containers).collect();
        let now = crate::dates::now_rfc3339_secs();
        let status = match twin::admit(node, t, &room, pod, &held) {
            Admission::Admit(containers) => {
                let h = HeldPod {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    containers,
                };
                if let Some(t) = self.twins.get_mut(node) {
                    t.held.insert(uid.to_string(), h);
                }
                let cond =
                    |c: &str| json!({"type": c, "status": "True", "lastTransitionTime": now});
                json!({"phase": "Running", "startTime": now, "conditions": [
                    cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")]})
            }
            Admission::Reject(reason, message) => {
                json!({"phase": "Failed", "reason": reason, "message": message, "startTime": now})
            }
        };
        let mut updated = pod.clone();
        updated["status"] = status;
        self.put_internal(kinds::PODS, ns, name, updated);
    }

    /// What the kubelet's PodResources `List` says of a node: each admitted pod's containers and
    /// the device IDs they hold, by pod `namespace/name`.
    pub(crate) fn pod_resources(
        &self,
        node: &str,
    ) -> BTreeMap<String, Vec<twin::ContainerDevices>> {
        self.twins
            .get(node)
            .map(|t| {
                t.held
                    .values()
                    .map(|h| (format!("{}/{}", h.namespace, h.name), h.containers.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
