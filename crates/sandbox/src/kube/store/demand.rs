//! What a cluster's autoscaler reads from its API server: the pods no node runs yet and the room
//! left on each node, handed to the twin's cluster-autoscaler as plain values (`nodes.rs`'s
//! `ClusterDemand`). A read of the store only; the autoscaler's rules live with it.
//!
//! As the API server defaults them (kubernetes/pkg/apis/core/v1/defaults.go, SetDefaults_Pod: a
//! container's limits become its requests where it has none), a pod's ask is its containers'
//! requests, or limits, summed. Only extended resources are read (integers by the API's rule for
//! them: "Extended resources ... must be integers", kubernetes.io/docs "Resource Management for Pods
//! and Containers"); CPU and memory are not modelled by the twin's nodes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Cluster;
use crate::kube::kinds;
use crate::kube::meta::labels_of;
use crate::nodes::{ClusterDemand, NodeRoom, PendingPod, Toleration};

/// A resource the twin counts: anything with a domain prefix (`nvidia.com/gpu`,
/// `nvidia.com/mig-1g.5gb`), not cpu, memory, pods or ephemeral-storage.
fn extended(name: &str) -> bool {
    name.contains('/') && !name.starts_with("kubernetes.io/") && !name.starts_with("hugepages-")
}

/// A count as the API writes one: a number, or a quantity string of digits.
pub(crate) fn integer(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// An object of strings (labels, a node selector); other values left out.
pub(crate) fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A string field of an object, empty when absent.
fn field(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Taints (core/v1 Taint) as (key, value, effect).
pub(crate) fn taints_of(v: &[Value]) -> Vec<(String, String, String)> {
    v.iter()
        .map(|t| (field(t, "key"), field(t, "value"), field(t, "effect")))
        .collect()
}

/// A pod's ask: per extended resource, its containers' requests (or limits) summed.
pub(crate) fn pod_requests(pod: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        let mut names: Vec<&String> = requests.into_iter().flat_map(|m| m.keys()).collect();
        names.extend(limits.into_iter().flat_map(|m| m.keys()));
        names.sort();
        names.dedup();
        for n in names.into_iter().filter(|n| extended(n)) {
            let q = requests
                .and_then(|m| m.get(n))
                .or_else(|| limits.and_then(|m| m.get(n)))
                .and_then(integer)
                .unwrap_or(0);
            *out.entry(n.clone()).or_insert(0) += q;
        }
    }
    out.retain(|_, q| *q > 0);
    out
}

/// A pod bound to a node that holds some of its GPUs (`nvidia.com/*` requests or limits): not a
/// daemonset pod (the GPU operator's operands), not ended, not being deleted. The node it is on,
/// if so.
pub(crate) fn gpu_holder_node(pod: &Value) -> Option<&str> {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())?;
    let ended = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    let daemon = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| {
            o.iter()
                .any(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
        });
    let gpus = pod_requests(pod)
        .keys()
        .any(|r| r.starts_with("nvidia.com/"));
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    (gpus && !ended && !daemon && !deleting).then_some(node)
}

impl Cluster {
    /// The nodes where pods hold GPUs (see [`gpu_holder_node`]).
    pub(crate) fn gpu_user_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .objects
            .get(&kinds::PODS.qualified())
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(gpu_holder_node)
            .map(str::to_string)
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// The pods waiting for a node and the room on every node, for the twin's autoscaler.
    pub(crate) fn demand(&self) -> ClusterDemand {
        let of = |k: kinds::Kind| {
            self.objects
                .get(&k.qualified())
                .into_iter()
                .flat_map(|m| m.values())
        };
        demand_of(
            of(kinds::PODS),
            of(kinds::NODES),
            |name, _| self.twins.get(name).map(|t| t.pool.clone()),
            |_, n| allocatable(n),
        )
    }
}

/// The extended resources a Node reports allocatable.
pub(crate) fn allocatable(n: &Value) -> BTreeMap<String, u64> {
    n.pointer("/status/allocatable")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| extended(k))
        .filter_map(|(k, v)| integer(v).map(|q| (k.clone(), q)))
        .collect()
}

/// The pods waiting for a node and the room on every node, from an API server's pods and nodes;
/// `pool_of` names the pool a node (name, object) belongs to, `capacity_of` what the node of
/// that pool offers before its pods (its [`allocatable`], or what an autoscaler simulates).
pub(crate) fn demand_of<'a>(
    pods: impl Iterator<Item = &'a Value>,
    nodes: impl Iterator<Item = &'a Value>,
    pool_of: impl Fn(&str, &Value) -> Option<String>,
    capacity_of: impl Fn(Option<&str>, &Value) -> BTreeMap<String, u64>,
) -> ClusterDemand {
    let pods: Vec<&Value> = pods.collect();
    let mut used: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut pending = Vec::new();
    for p in &pods {
        if p.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let phase = p.pointer("/status/phase").and_then(Value::as_str);
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let requests = pod_requests(p);
        match p.pointer("/spec/nodeName").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => {
                let u = used.entry(n.to_string()).or_default();
                for (r, q) in requests {
                    *u.entry(r).or_insert(0) += q;
                }
            }
            _ => pending.push((
                p.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                PendingPod {
                    created_ms: p
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .and_then(crate::dates::parse_rfc3339_secs)
                        .map_or(0, |s| s.max(0) as u64 * 1000),
                    name: format!(
                        "{}/{}",
                        p.pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                        p.pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    ),
                    requests,
                    node_selector: str_map(p.pointer("/spec/nodeSelector")),
                    tolerations: p
                        .pointer("/spec/tolerations")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|t| Toleration {
                            key: field(t, "key"),
                            operator: field(t, "operator"),
                            value: field(t, "value"),
                            effect: field(t, "effect"),
                        })
                        .collect(),
                },
            )),
        }
    }
    // Oldest first, then by name: the order the autoscaler considers them in.
    pending.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
    let nodes = nodes
        .map(|n| {
            let name = n
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let pool = pool_of(&name, n);
            let mut free = capacity_of(pool.as_deref(), n);
            for (r, q) in used.get(&name).into_iter().flatten() {
                let f = free.entry(r.clone()).or_insert(0);
                *f = f.saturating_sub(*q);
            }
            NodeRoom {
                pool,
                labels: labels_of(n),
                taints: taints_of(
                    n.pointer("/spec/taints")
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default(),
                ),
                unschedulable: n.pointer("/spec/unschedulable") == Some(&Value::Bool(true)),
                free,
                name,
            }
        })
        .collect();
    ClusterDemand {
        pending: pending.into_iter().map(|(_, p)| p).collect(),
        nodes,
    }
}
