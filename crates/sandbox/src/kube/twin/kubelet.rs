//! The kubelet of a twin node, for what the device plugin decides: admitting a pod bound to the
//! node and handing its containers GPU devices. Everything else a kubelet does (images, probes,
//! CPU and memory) the twin does not model: an admitted pod runs at once.
//!
//! From the sources, in the order the kubelet meets them:
//! - **Room** (kubernetes pkg/kubelet/lifecycle/predicate.go): a pod asking for more of an
//!   extended resource than the node has left is rejected with reason `OutOf<resource>` and the
//!   message of `InsufficientResourceError` ("Node didn't have enough resource: ...").
//! - **Devices** (pkg/kubelet/cm/devicemanager): per container, the kubelet asks the plugin for a
//!   preferred allocation among the free device IDs, then calls its `Allocate`. An error there
//!   rejects the pod with reason `UnexpectedAdmissionError` and "Allocate failed due to ..., which
//!   is unexpected" (pkg/kubelet/cm/admission/errors.go). A rejected pod is `Failed`, its message
//!   "Pod was rejected: " and the reason's text (pkg/kubelet/kubelet.go `rejectPod`).
//! - **The plugin** (NVIDIA/k8s-device-plugin v0.20.0): a shared GPU is offered as replica IDs
//!   `<gpu>::<n>`. `Allocate` refuses a container more than one of them when
//!   `failRequestsGreaterThanOne` holds (internal/rm/rm.go `ValidateRequest`: "invalid allocation
//!   request for %q: invalid request: maximum request size for shared resources is 1; found %d"):
//!   left out, it holds for MPS and not for time-slicing (api/config/v1/config.go); before v0.20.0
//!   it always holds for MPS, whatever the config says. `GetPreferredAllocation` picks replicas
//!   one at a time from the GPU with the fewest in use (`distributed`) or the most (`packed`),
//!   a tie going to the GPU least picked in this request (internal/rm/allocate.go); before
//!   v0.20.0 the policy is always `distributed`. Whole GPUs and MIG devices are taken in order
//!   (the real plugin aligns them by NVLink, which the twin has no topology for).
//!
//! GKE's device plugin and Bottlerocket's host service read no such config: on their nodes the
//! twin hands out devices in order and refuses nothing but a lack of room.
//!
//! Device IDs are the twin's own (`GPU-<node>-<i>`, `MIG-<node>-<i>`), not UUIDs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::device_config::{DpConfig, running_config};
use super::node::{ContainerDevices, NodeTwin};

/// The kubelet's answer to a pod bound to the node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Admission {
    Admit(Vec<ContainerDevices>),
    /// `status.reason` and `status.message` of the rejected pod.
    Reject(String, String),
}

/// A plugin release from its image tag (`v0.18.1`, `v0.20.0-ubi9`); None when the tag says none.
fn release(tag: &str) -> Option<(u32, u32, u32)> {
    let t = tag.strip_prefix('v').unwrap_or(tag);
    let mut p = t
        .split(['-', '+'])
        .next()?
        .split('.')
        .map(|x| x.parse().ok());
    Some((p.next()??, p.next()??, p.next()??))
}

/// What the running plugin makes of a shared resource: whether it refuses more than one replica
/// to a container, and whether it packs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SharedRules {
    fail_requests: bool,
    packed: bool,
}

fn shared_rules(cfg: &DpConfig, version: Option<&str>) -> SharedRules {
    // A release the tag does not name reads as the current one.
    let current = version.and_then(release).is_none_or(|r| r >= (0, 20, 0));
    let s = cfg.sharing.as_ref();
    let mps = s.is_some_and(|s| s.strategy == "mps");
    let explicit = s.and_then(|s| s.fail_requests);
    SharedRules {
        fail_requests: match (mps, current) {
            (true, false) => true,
            (true, true) => explicit.unwrap_or(true),
            (false, _) => explicit.unwrap_or(false),
        },
        packed: current && cfg.allocation_policy.as_deref() == Some("packed"),
    }
}

/// The replicas per GPU of an advertised resource under `cfg` (1: not shared).
fn replicas_of(cfg: &DpConfig, resource: &str) -> u64 {
    let Some(s) = &cfg.sharing else { return 1 };
    let base = match s.rename_by_default {
        true => resource.strip_suffix(".shared").unwrap_or(resource),
        false => resource,
    };
    s.resources
        .iter()
        .find(|(n, _)| n == base)
        .map_or(1, |(_, r)| *r)
}

/// Every device ID of a resource the node advertises `count` of.
fn device_ids(node: &str, resource: &str, count: u64, replicas: u64) -> Vec<(u64, String)> {
    let kind = if resource.starts_with("nvidia.com/mig-") {
        "MIG"
    } else {
        "GPU"
    };
    let units = count / replicas.max(1);
    (0..units)
        .flat_map(|u| {
            (0..replicas).map(move |k| match replicas {
                1 => (u, format!("{kind}-{node}-{u}")),
                _ => (u, format!("{kind}-{node}-{u}::{k}")),
            })
        })
        .collect()
}

/// Picks `n` of the free IDs as the plugin prefers them.
fn prefer(
    ids: &[(u64, String)],
    free: &[&(u64, String)],
    n: u64,
    replicas: u64,
    packed: bool,
) -> Vec<String> {
    if replicas <= 1 {
        return free
            .iter()
            .take(n as usize)
            .map(|(_, id)| id.clone())
            .collect();
    }
    let mut left: Vec<&(u64, String)> = free.to_vec();
    let mut picked_from: BTreeMap<u64, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let in_use = |u: u64| {
            let total = ids.iter().filter(|(x, _)| *x == u).count();
            total - left.iter().filter(|(x, _)| *x == u).count()
        };
        let Some(unit) = left.iter().map(|(u, _)| *u).min_by_key(|u| {
            let used = in_use(*u) as i64;
            let order = if packed { -used } else { used };
            (order, picked_from.get(u).copied().unwrap_or(0), *u)
        }) else {
            break;
        };
        let i = left.iter().position(|(u, _)| *u == unit).unwrap_or(0);
        out.push(left.remove(i).1.clone());
        *picked_from.entry(unit).or_default() += 1;
    }
    out
}

/// A container's ask: its requests, or its limits where it has no request (as the API server
/// defaults them), of `nvidia.com/` resources.
fn container_asks(c: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for f in ["limits", "requests"] {
        for (k, v) in c
            .pointer(&format!("/resources/{f}"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let q = match v {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.parse().ok(),
                _ => None,
            };
            if let Some(q) = q.filter(|_| k.starts_with("nvidia.com/")) {
                out.insert(k.clone(), q);
            }
        }
    }
    out.retain(|_, q| *q > 0);
    out
}

/// The kubelet's admission of `pod` on the twin node `node` whose status allocates
/// `allocatable`, with `held` the devices of the pods it runs.
pub(crate) fn admit(
    node: &str,
    t: &NodeTwin,
    allocatable: &BTreeMap<String, u64>,
    pod: &Value,
    held: &[&ContainerDevices],
) -> Admission {
    let containers: Vec<&Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let asks: Vec<(String, BTreeMap<String, u64>)> = containers
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                container_asks(c),
            )
        })
        .collect();
    let mut total: BTreeMap<&str, u64> = BTreeMap::new();
    for (r, q) in asks.iter().flat_map(|(_, a)| a) {
        *total.entry(r.as_str()).or_default() += q;
    }
    let used = |r: &str| -> u64 {
        held.iter()
            .filter(|h| h.resource == r)
            .map(|h| h.devices.len() as u64)
            .sum()
    };
    for (r, q) in &total {
        let cap = allocatable.get(*r).copied().unwrap_or(0);
        let used = used(r);
        if used + q > cap {
            return Admission::Reject(
                format!("OutOf{r}"),
                format!(
                    "Pod was rejected: Node didn't have enough resource: {r}, requested: {q}, \
                     used: {used}, capacity: {cap}"
                ),
            );
        }
    }
    if total.is_empty() {
        return Admission::Admit(Vec::new());
    }
    // Only NVIDIA's device plugin reads the config (not GKE's, not Bottlerocket's host service).
    let nvidia = t.cloud != "gke" && !t.host_device_plugin;
    let cfg = match nvidia {
        true => running_config(&t.readers.plugin).unwrap_or_default(),
        false => DpConfig::default(),
    };
    let rules = shared_rules(&cfg, t.loaded.plugin_version.as_deref());
    let mut taken: Vec<String> = held
        .iter()
        .flat_map(|h| h.devices.iter().cloned())
        .collect();
    let mut out = Vec::new();
    for (container, ask) in asks {
        for (r, n) in ask {
            let replicas = replicas_of(&cfg, &r);
            let ids = device_ids(
                node,
                &r,
                allocatable.get(&r).copied().unwrap_or(0),
                replicas,
            );
            let free: Vec<&(u64, String)> =
                ids.iter().filter(|(_, id)| !taken.contains(id)).collect();
            let devices = prefer(&ids, &free, n, replicas, rules.packed);
            if replicas > 1 && rules.fail_requests && devices.len() > 1 {
                return Admission::Reject(
                    "UnexpectedAdmissionError".into(),
                    format!(
                        "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc \
                         = invalid allocation request for {r:?}: invalid request: maximum \
                         request size for shared resources is 1; found {}, which is unexpected",
                        devices.len()
                    ),
                );
            }
            taken.extend(devices.iter().cloned());
            out.push(ContainerDevices {
                container: container.clone(),
                resource: r,
                devices,
            });
        }
    }
    Admission::Admit(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::twin::device_config::parse_config;

    fn rules(yaml: &str, version: Option<&str>) -> SharedRules {
        shared_rules(&parse_config(yaml).unwrap(), version)
    }

    const MPS_RELAXED: &str = "sharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    \
        resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

    #[test]
    fn mps_refuses_several_replicas_unless_v0_20_is_told_otherwise() {
        let mps =
            "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";
        assert!(rules(mps, Some("v0.20.0")).fail_requests);
        assert!(!rules(MPS_RELAXED, Some("v0.20.0")).fail_requests);
        assert!(!rules(MPS_RELAXED, None).fail_requests);
        assert!(rules(MPS_RELAXED, Some("v0.18.1")).fail_requests);
        let ts = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";
        assert!(!rules(ts, Some("v0.18.1")).fail_requests);
    }

    #[test]
    fn packed_and_distributed_place_replicas_as_the_plugin_does() {
        let ids = device_ids("n", "nvidia.com/gpu", 8, 4);
        let mut taken: Vec<String> = Vec::new();
        let place = |packed: bool, taken: &mut Vec<String>| {
            let free: Vec<&(u64, String)> =
                ids.iter().filter(|(_, i)| !taken.contains(i)).collect();
            let got = prefer(&ids, &free, 1, 4, packed);
            taken.extend(got.clone());
            got[0].split("::").next().unwrap().to_string()
        };
        // Distributed: one at a time, each on the GPU with the fewest in use.
        let spread: Vec<String> = (0..2).map(|_| place(false, &mut taken)).collect();
        assert_eq!(spread, ["GPU-n-0", "GPU-n-1"]);
        taken.clear();
        let packed: Vec<String> = (0..3).map(|_| place(true, &mut taken)).collect();
        assert_eq!(packed, ["GPU-n-0", "GPU-n-0", "GPU-n-0"]);
        // Within one request, a tie goes to the GPU least picked in it.
        let free: Vec<&(u64, String)> = ids.iter().collect();
        let two = prefer(&ids, &free, 2, 4, false);
        assert_eq!(two, ["GPU-n-0::0", "GPU-n-1::0"]);
    }
}
