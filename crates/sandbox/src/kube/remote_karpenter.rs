//! The twin's Karpenter, as a client of any Kubernetes API server that serves Karpenter's CRDs:
//! pending pods that no node can take make it launch the nodes Karpenter would, judged from what
//! Karpenter reads before a node exists: the NodePools (karpenter.sh/v1), the instance types their
//! requirements allow, and, with the `NodeOverlay` feature gate on, the NodeOverlays
//! (karpenter.sh/v1alpha1) that replace an instance type's capacity. It writes the Nodes (the
//! twin's GPU stack, `remote_twin`, then advertises what their device plugin would); no
//! NodeClaims, and nothing is ever consolidated or removed.
//!
//! The rules, after kubernetes-sigs/karpenter v1 (pkg/controllers/provisioning/scheduling):
//! - Pods are taken largest ask first (`queue.go` sorts by requests, descending). Each goes to room
//!   left on a node that exists, else to a node this pass already launches whose instance types
//!   still fit all its pods (a NodeClaim keeps every type that fits, `nodeclaim.go`), else to a new
//!   one from the NodePool of the highest `spec.weight` that takes it.
//! - An instance type fits a NodePool when no requirement excludes it; a requirement on a key the
//!   instance type does not define leaves it in (such keys become node labels).
//! - An instance type's capacity is its GPUs as `nvidia.com/gpu`; a NodeOverlay whose requirements
//!   the node's labels meet assigns its capacity over that, the overlay of higher weight last
//!   (`pkg/cloudprovider/types.go`, `lo.Assign`). Without the gate, or without a Karpenter
//!   Deployment to say it is on (`FEATURE_GATES` of the Deployment labelled
//!   `app.kubernetes.io/name=karpenter`, as the charts write it), overlays are not read.
//! - `spec.limits` keep out an instance type that would take the pool's nodes over them
//!   (`scheduler.go`, instance types filtered by the remaining limits).
//! - The node launched is the cheapest of the types left: the twin has no prices, so fewest GPUs,
//!   then the order of the sandbox's catalog (smaller sizes first); capacity type `spot` when the
//!   pool allows it, as Karpenter prefers the cheaper offering.
//!
//! A node of a NodePool counts with its simulated capacity, as Karpenter's cluster state counts a
//! NodeClaim's until its node is initialized: the twin never marks one initialized. What it
//! simplifies as the cluster-autoscaler twin does (`autoscaler/estimate.rs`): only extended
//! resources, and a pod's `nodeSelector`, not its node affinity.
//!
//! Instance types come from the sandbox's catalog with the labels Karpenter gives them: on AWS
//! `karpenter.k8s.aws/instance-gpu-{name,count,manufacturer}` (aws/karpenter-provider-aws
//! website/content/en/docs/reference/instance-types.md; GPU memory is not modelled), on Azure
//! `karpenter.azure.com/sku-gpu-{name,count,manufacturer}`, the name being the accelerator part of
//! the VM size (Azure/karpenter-provider-azure pkg/providers/instancetype). The new node carries
//! GPU feature discovery's hardware labels too: the twin's stand-in for the hardware.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::remote_twin::{RemoteError, RemoteTwin};
use super::store::demand::{allocatable, demand_of, integer, str_map, taints_of as taints};
use crate::autoscaler::{refusal, take};
use crate::catalog::{self, Gpu};
use crate::nodes::{NodeRoom, PendingPod};

const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Taints of a node still coming up, which Karpenter's scheduling looks past.
const EPHEMERAL_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
];
/// The annotation saying which pods a node was launched for.
pub const LAUNCHED_FOR: &str = "sandbox.fracgpu.dev/launched-for";

/// What one pass did.
#[derive(Debug, Default, PartialEq)]
pub struct KarpenterReport {
    /// Whether NodeOverlays were read (the gate is on).
    pub overlays_read: bool,
    pub launched: Vec<Launched>,
    /// Pods left pending, with why, per NodePool.
    pub pending: Vec<(String, String)>,
}

#[derive(Debug, PartialEq)]
pub struct Launched {
    pub node_pool: String,
    pub node: String,
    pub instance_type: String,
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cloud {
    Aws,
    Azure,
}

/// An instance type as Karpenter sees it before launch.
#[derive(Debug, Clone)]
struct Offer {
    name: &'static str,
    gpu: Gpu,
    gpus: u32,
    /// Place in the catalog: the twin's stand-in for price among types of as many GPUs.
    rank: usize,
    labels: BTreeMap<String, String>,
}

/// Karpenter's AWS name of a GPU (EC2 DescribeInstanceTypes `GpuInfo.Gpus[].Name`, lowercased),
/// from the product GPU feature discovery reports.
fn aws_gpu_name(g: &Gpu) -> Option<&'static str> {
    Some(match g.product {
        "Tesla-T4" => "t4",
        "Tesla-V100-SXM2-16GB" => "v100",
        "NVIDIA-A10G" => "a10g",
        "NVIDIA-L4" => "l4",
        "NVIDIA-L40S" => "l40s",
        "NVIDIA-A100-SXM4-40GB" | "NVIDIA-A100-SXM4-80GB" => "a100",
        "NVIDIA-H100-80GB-HBM3" => "h100",
        "NVIDIA-H200" => "h200",
        _ => return None,
    })
}

/// The accelerator part of an Azure VM size: `Standard_NC4as_T4_v3` -> `T4`.
fn azure_gpu_name(size: &str) -> Option<&str> {
    match size.split('_').collect::<Vec<_>>().as_slice() {
        [_, _, acc, v] if v.starts_with('v') => Some(acc),
        _ => None,
    }
}

fn offers(cloud: Cloud) -> Vec<Offer> {
    let (table, prefix) = match cloud {
        Cloud::Aws => (
            catalog::AWS_INSTANCE_TYPES,
            "karpenter.k8s.aws/instance-gpu-",
        ),
        Cloud::Azure => (catalog::AZURE_VM_SIZES, "karpenter.azure.com/sku-gpu-"),
    };
    table
        .iter()
        .enumerate()
        .filter_map(|(rank, m)| {
            let (gpu, gpus) = m.gpu?;
            let name = match cloud {
                Cloud::Aws => aws_gpu_name(&gpu)?,
                Cloud::Azure => azure_gpu_name(m.name)?,
            };
            let labels = BTreeMap::from([
                (format!("{prefix}name"), name.to_string()),
                (format!("{prefix}count"), gpus.to_string()),
                (format!("{prefix}manufacturer"), "nvidia".to_string()),
                (INSTANCE_TYPE.to_string(), m.name.to_string()),
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ]);
            Some(Offer {
                name: m.name,
                gpu,
                gpus,
                rank,
                labels,
            })
        })
        .collect()
}

/// Whether labels meet a requirement (core NodeSelectorRequirement, with NodeOverlay's Gte and
/// Lte); a key the labels do not define leaves it met.
fn meets(labels: &BTreeMap<String, String>, r: &Value) -> bool {
    let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
    let op = r
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let values: Vec<&str> = r
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(v) = labels.get(key) else {
        return true;
    };
    let num = |s: &str| s.parse::<i64>().ok();
    let cmp = |f: fn(i64, i64) -> bool| match (num(v), values.first().and_then(|s| num(s))) {
        (Some(a), Some(b)) => f(a, b),
        _ => false,
    };
    match op {
        "In" => values.contains(&v.as_str()),
        "NotIn" => !values.contains(&v.as_str()),
        "Exists" => true,
        "DoesNotExist" => false,
        "Gt" => cmp(|a, b| a > b),
        "Lt" => cmp(|a, b| a < b),
        "Gte" => cmp(|a, b| a >= b),
        "Lte" => cmp(|a, b| a <= b),
        _ => false,
    }
}

fn meets_all(labels: &BTreeMap<String, String>, reqs: &[Value]) -> bool {
    reqs.iter().all(|r| meets(labels, r))
}

fn array<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A NodePool as the scheduler reads it.
#[derive(Debug, Clone)]
struct Pool {
    name: String,
    weight: i64,
    cloud: Cloud,
    requirements: Vec<Value>,
    labels: BTreeMap<String, String>,
    taints: Vec<(String, String, String)>,
    startup: Vec<Value>,
    all_taints: Vec<Value>,
    limits: BTreeMap<String, u64>,
}

fn pool_of(np: &Value) -> Option<Pool> {
    let name = np.pointer("/metadata/name")?.as_str()?.to_string();
    let cloud = match np
        .pointer("/spec/template/spec/nodeClassRef/group")
        .and_then(Value::as_str)?
    {
        "karpenter.k8s.aws" => Cloud::Aws,
        "karpenter.azure.com" => Cloud::Azure,
        _ => return None,
    };
    let requirements = array(np, "/spec/template/spec/requirements").to_vec();
    let allowed = |key: &str| -> Vec<String> {
        requirements
            .iter()
            .filter(|r| r.get("key").and_then(Value::as_str) == Some(key))
            .filter(|r| r.get("operator").and_then(Value::as_str) == Some("In"))
            .flat_map(|r| array(r, "/values").iter().filter_map(Value::as_str))
            .map(str::to_string)
            .collect()
    };
    let kinds = allowed(CAPACITY_TYPE);
    let capacity_type = if kinds.is_empty() || kinds.iter().any(|k| k == "spot") {
        "spot"
    } else {
        kinds[0].as_str()
    }
    .to_string();
    let mut labels = str_map(np.pointer("/spec/template/metadata/labels"));
    // A requirement of one value is a label of every node the pool makes.
    for r in &requirements {
        let vals = array(r, "/values");
        if r.get("operator").and_then(Value::as_str) == Some("In")
            && vals.len() == 1
            && let (Some(k), Some(v)) = (r.get("key").and_then(Value::as_str), vals[0].as_str())
        {
            labels.insert(k.to_string(), v.to_string());
        }
    }
    labels.insert(NODEPOOL_LABEL.into(), name.clone());
    labels.insert(CAPACITY_TYPE.into(), capacity_type);
    let t = array(np, "/spec/template/spec/taints").to_vec();
    let st = array(np, "/spec/template/spec/startupTaints").to_vec();
    let limits = np
        .pointer("/spec/limits")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.contains('/'))
        .filter_map(|(k, v)| Some((k.clone(), integer(v)?)))
        .collect();
    Some(Pool {
        name,
        weight: np
            .pointer("/spec/weight")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        cloud,
        taints: taints(&t),
        all_taints: t.into_iter().chain(st.iter().cloned()).collect(),
        startup: st,
        requirements,
        labels,
        limits,
    })
}

/// One instance type of a pool: the node's labels and capacity.
#[derive(Debug, Clone)]
struct Candidate {
    offer: Offer,
    labels: BTreeMap<String, String>,
    capacity: BTreeMap<String, u64>,
}

fn candidates(pool: &Pool, overlays: &[Value]) -> Vec<Candidate> {
    // Lowest weight first, so that the highest is assigned last and wins.
    let mut overlays: Vec<&Value> = overlays.iter().collect();
    overlays.sort_by_key(|o| {
        o.pointer("/spec/weight")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    offers(pool.cloud)
        .into_iter()
        .filter_map(|offer| {
            // The instance type's own labels over the pool's (which hold its single-valued
            // requirements, met or not).
            let mut labels = pool.labels.clone();
            labels.extend(offer.labels.clone());
            if !meets_all(&labels, &pool.requirements) {
                return None;
            }
            let mut capacity =
                BTreeMap::from([("nvidia.com/gpu".to_string(), u64::from(offer.gpus))]);
            for o in &overlays {
                if meets_all(&labels, array(o, "/spec/requirements")) {
                    for (r, q) in str_map(o.pointer("/spec/capacity")) {
                        if let Ok(q) = q.parse() {
                            capacity.insert(r, q);
                        }
                    }
                }
            }
            Some(Candidate {
                offer,
                labels,
                capacity,
            })
        })
        .collect()
}

/// A node this pass launches: the types that still fit every pod it holds.
struct Claim {
    pool: usize,
    types: Vec<Candidate>,
    asked: BTreeMap<String, u64>,
    pods: Vec<String>,
}

fn add(to: &mut BTreeMap<String, u64>, q: &BTreeMap<String, u64>) {
    for (r, n) in q {
        *to.entry(r.clone()).or_insert(0) += n;
    }
}

fn fits(
    c: &Candidate,
    taints: &[(String, String, String)],
    pod: &PendingPod,
    asked: &BTreeMap<String, u64>,
) -> Option<String> {
    let mut free = c.capacity.clone();
    for (r, q) in asked {
        let f = free.entry(r.clone()).or_insert(0);
        *f = f.saturating_sub(*q);
    }
    refusal(pod, &c.labels, taints, &free)
}

fn cheapest(types: &[Candidate]) -> Option<&Candidate> {
    types.iter().min_by_key(|c| (c.offer.gpus, c.offer.rank))
}

/// The plan for one pass: the claims to launch and the pods left, from the pools, their
/// candidates, the rooms of existing nodes and what each pool's nodes hold already.
fn schedule(
    pools: &[Pool],
    cands: &[Vec<Candidate>],
    mut rooms: Vec<NodeRoom>,
    in_use: &BTreeMap<String, BTreeMap<String, u64>>,
    pending: &[PendingPod],
) -> (Vec<Claim>, Vec<(String, String)>) {
    let mut pods: Vec<&PendingPod> = pending.iter().filter(|p| !p.requests.is_empty()).collect();
    pods.sort_by(|a, b| {
        let size = |p: &PendingPod| p.requests.values().sum::<u64>();
        size(b).cmp(&size(a)).then_with(|| a.name.cmp(&b.name))
    });
    let mut order: Vec<usize> = (0..pools.len()).collect();
    order.sort_by(|a, b| {
        pools[*b]
            .weight
            .cmp(&pools[*a].weight)
            .then_with(|| pools[*a].name.cmp(&pools[*b].name))
    });
    let mut claims: Vec<Claim> = Vec::new();
    let mut left = Vec::new();
    'pods: for pod in pods {
        if let Some(room) = rooms
            .iter_mut()
            .find(|r| !r.unschedulable && refusal(pod, &r.labels, &r.taints, &r.free).is_none())
        {
            take(&mut room.free, pod);
            continue;
        }
        for claim in &mut claims {
            let taints = &pools[claim.pool].taints;
            let still: Vec<Candidate> = claim
                .types
                .iter()
                .filter(|c| fits(c, taints, pod, &claim.asked).is_none())
                .cloned()
                .collect();
            if !still.is_empty() {
                claim.types = still;
                add(&mut claim.asked, &pod.requests);
                claim.pods.push(pod.name.clone());
                continue 'pods;
            }
        }
        let mut why = Vec::new();
        for &i in &order {
            let pool = &pools[i];
            // What the pool's nodes hold, with those this pass launches at their cheapest.
            let mut held = in_use.get(&pool.name).cloned().unwrap_or_default();
            for c in claims.iter().filter(|c| c.pool == i) {
                if let Some(t) = cheapest(&c.types) {
                    add(&mut held, &t.capacity);
                }
            }
            let mut refused = None;
            let mut types: Vec<Candidate> = Vec::new();
            for c in &cands[i] {
                if let Some(r) = fits(c, &pool.taints, pod, &BTreeMap::new()) {
                    refused.get_or_insert(r);
                    continue;
                }
                let over = pool.limits.iter().any(|(r, lim)| {
                    held.get(r).copied().unwrap_or(0) + c.capacity.get(r).copied().unwrap_or(0)
                        > *lim
                });
                if over {
                    refused.get_or_insert_with(|| {
                        "all available instance types exceed limits for nodepool".into()
                    });
                    continue;
                }
                types.push(c.clone());
            }
            if types.is_empty() {
                why.push(format!(
                    "nodepool {}: {}",
                    pool.name,
                    refused.unwrap_or_else(|| "no instance type meets the requirements".into())
                ));
                continue;
            }
            claims.push(Claim {
                pool: i,
                types,
                asked: pod.requests.clone(),
                pods: vec![pod.name.clone()],
            });
            continue 'pods;
        }
        if why.is_empty() {
            why.push("no NodePool".into());
        }
        left.push((pod.name.clone(), why.join("; ")));
    }
    (claims, left)
}

/// The feature gates a Karpenter container runs with: its `--feature-gates` argument when given
/// (`--feature-gates=X`, `-feature-gates=X` or the value after it), else its `FEATURE_GATES`
/// environment variable, which is only the flag's default (kubernetes-sigs/karpenter
/// pkg/operator/options/options.go: `fs.StringVar(.., "feature-gates",
/// env.WithDefaultString("FEATURE_GATES", ..))`).
fn feature_gates(c: &Value) -> Option<String> {
    let args: Vec<&str> = array(c, "/args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for (i, a) in args.iter().enumerate() {
        let flag = a.trim_start_matches('-');
        if !a.starts_with('-') {
            continue;
        }
        if let Some(v) = flag.strip_prefix("feature-gates=") {
            return Some(v.to_string());
        }
        if flag == "feature-gates" {
            return args.get(i + 1).map(|v| v.to_string());
        }
    }
    array(c, "/env")
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some("FEATURE_GATES"))
        .and_then(|e| e.get("value").and_then(Value::as_str))
        .map(str::to_string)
}

/// Whether the cluster's Karpenter Deployment runs with the NodeOverlay gate on (it is off by
/// default: a gates list that does not name it leaves it off).
fn gate_on(deployments: &Value) -> bool {
    array(deployments, "/items").iter().any(|d| {
        array(d, "/spec/template/spec/containers").iter().any(|c| {
            feature_gates(c).is_some_and(|v| {
                v.split(',').any(|g| {
                    g.split_once('=').is_some_and(|(k, v)| {
                        k.trim() == "NodeOverlay" && v.trim().eq_ignore_ascii_case("true")
                    })
                })
            })
        })
    })
}

impl RemoteTwin {
    /// One pass of the twin's Karpenter: the nodes pending pods need, written as Nodes. Nothing
    /// to do where the server serves no karpenter.sh/v1 NodePools.
    pub async fn karpenter_once(&self) -> Result<KarpenterReport, RemoteError> {
        let Some(nps) = self.get("/apis/karpenter.sh/v1/nodepools").await? else {
            return Ok(KarpenterReport::default());
        };
        let deployments = self
            .get("/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Dkarpenter")
            .await?
            .unwrap_or(Value::Null);
        let overlays_read = gate_on(&deployments);
        let overlays = if overlays_read {
            self.get("/apis/karpenter.sh/v1alpha1/nodeoverlays")
                .await?
                .map(|l| array(&l, "/items").to_vec())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let pods = self.get("/api/v1/pods").await?.unwrap_or(Value::Null);
        let nodes = self.get("/api/v1/nodes").await?.unwrap_or(Value::Null);
        let pools: Vec<Pool> = array(&nps, "/items").iter().filter_map(pool_of).collect();
        let cands: Vec<Vec<Candidate>> = pools.iter().map(|p| candidates(p, &overlays)).collect();
        let pool_label = |_: &str, n: &Value| {
            n.pointer("/metadata/labels/karpenter.sh~1nodepool")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        // A pool's node counts with its instance type's simulated capacity.
        let simulated = |pool: Option<&str>, ty: Option<&str>| -> Option<BTreeMap<String, u64>> {
            let i = pools.iter().position(|x| Some(x.name.as_str()) == pool)?;
            cands[i]
                .iter()
                .find(|c| Some(c.offer.name) == ty)
                .map(|c| c.capacity.clone())
        };
        let demand = demand_of(
            array(&pods, "/items").iter(),
            array(&nodes, "/items").iter(),
            pool_label,
            |pool, n| {
                let ty = n.pointer("/metadata/labels/node.kubernetes.io~1instance-type");
                simulated(pool, ty.and_then(Value::as_str)).unwrap_or_else(|| allocatable(n))
            },
        );
        let mut in_use: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut rooms = demand.nodes;
        for room in &mut rooms {
            let Some(p) = room.pool.clone() else {
                continue;
            };
            let Some(pool) = pools.iter().find(|x| x.name == p) else {
                continue;
            };
            // Karpenter schedules onto a node it launched without its startup taints and the
            // taints of a node still coming up (`KnownEphemeralTaints`, pkg/scheduling/taints.go:
            // not-ready, unreachable, uninitialized).
            let startup = taints(&pool.startup);
            room.taints
                .retain(|t| !EPHEMERAL_TAINTS.contains(&t.0.as_str()) && !startup.contains(t));
            if let Some(cap) =
                simulated(Some(&p), room.labels.get(INSTANCE_TYPE).map(String::as_str))
            {
                add(in_use.entry(p).or_default(), &cap);
            }
        }
        let existing: Vec<String> = rooms.iter().map(|r| r.name.clone()).collect();
        let (claims, pending) = schedule(&pools, &cands, rooms, &in_use, &demand.pending);
        let mut report = KarpenterReport {
            overlays_read,
            launched: Vec::new(),
            pending,
        };
        let mut taken = existing;
        for claim in claims {
            let pool = &pools[claim.pool];
            let Some(c) = cheapest(&claim.types) else {
                continue;
            };
            let name = (1..)
                .map(|k| format!("{}-{k}", pool.name))
                .find(|n| !taken.contains(n))
                .unwrap_or_default();
            taken.push(name.clone());
            self.write(
                reqwest::Method::POST,
                "/api/v1/nodes",
                node(pool, c, &name, &claim.pods),
            )
            .await?;
            report.launched.push(Launched {
                node_pool: pool.name.clone(),
                node: name,
                instance_type: c.offer.name.to_string(),
                pods: claim.pods,
            });
        }
        Ok(report)
    }
}

/// The Node Karpenter's launch registers: the pool's labels and taints (startup taints too),
/// the instance type's labels, and the hardware GPU feature discovery will report.
fn node(pool: &Pool, c: &Candidate, name: &str, pods: &[String]) -> Value {
    let mut labels = c.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert("karpenter.sh/registered".into(), "true".into());
    labels.insert("nvidia.com/gpu.product".into(), c.offer.gpu.product.into());
    labels.insert("nvidia.com/gpu.count".into(), c.offer.gpus.to_string());
    labels.insert(
        "nvidia.com/gpu.memory".into(),
        c.offer.gpu.memory_mib.to_string(),
    );
    labels.insert(
        "nvidia.com/mig.capable".into(),
        (!c.offer.gpu.mig.is_empty()).to_string(),
    );
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {LAUNCHED_FOR: pods.join(",")},
        },
        "spec": {"taints": pool.all_taints},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::Toleration;

    fn t4_pool(weight: i64, limits: Value) -> Value {
        json!({"metadata": {"name": "t4-slices"}, "spec": {"weight": weight, "limits": limits,
            "template": {"metadata": {"labels": {"nvidia.com/device-plugin.config": "ts-10"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["t4"]},
                    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["1", "4"]},
                    {"key": "karpenter.k8s.aws/instance-gpu-memory", "operator": "In", "values": ["16384"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})
    }

    fn overlay(count: u32, q: u32) -> Value {
        json!({"spec": {"requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["t4-slices"]},
            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": [count.to_string()]}],
            "capacity": {"nvidia.com/gpu.shared": q.to_string()}}})
    }

    fn pods(n: usize) -> Vec<PendingPod> {
        (0..n)
            .map(|i| PendingPod {
                name: format!("default/m{i:02}"),
                requests: BTreeMap::from([("nvidia.com/gpu.shared".into(), 1)]),
                node_selector: BTreeMap::from([(
                    "karpenter.sh/nodepool".into(),
                    "t4-slices".into(),
                )]),
                tolerations: vec![Toleration {
                    key: "nvidia.com/gpu".into(),
                    operator: "Exists".into(),
                    value: String::new(),
                    effect: "NoSchedule".into(),
                }],
                created_ms: 0,
            })
            .collect()
    }

    /// (instance type, pods) per node launched, and the pods left with why.
    type Outcome = (Vec<(String, usize)>, Vec<(String, String)>);

    fn plan(np: Value, overlays: &[Value], n: usize) -> Outcome {
        let pools = vec![pool_of(&np).unwrap()];
        let cands: Vec<_> = pools.iter().map(|p| candidates(p, overlays)).collect();
        let (claims, left) = schedule(&pools, &cands, Vec::new(), &BTreeMap::new(), &pods(n));
        let launched = claims
            .iter()
            .map(|c| {
                (
                    cheapest(&c.types).unwrap().offer.name.to_string(),
                    c.pods.len(),
                )
            })
            .collect();
        (launched, left)
    }

    #[test]
    fn ten_pods_of_one_slice_bring_one_node_with_the_overlays() {
        let ov = [overlay(1, 10), overlay(4, 40)];
        let (launched, left) = plan(t4_pool(0, json!({})), &ov, 10);
        assert_eq!(launched, vec![("g4dn.xlarge".to_string(), 10)]);
        assert!(left.is_empty());
        // Fifteen fit a 4-GPU node, which Karpenter takes over two 1-GPU ones.
        let (launched, _) = plan(t4_pool(0, json!({})), &ov, 15);
        assert_eq!(launched, vec![("g4dn.12xlarge".to_string(), 15)]);
    }

    #[test]
    fn without_overlays_slices_fit_no_instance_type() {
        let (launched, left) = plan(t4_pool(0, json!({})), &[], 3);
        assert!(launched.is_empty());
        assert_eq!(left.len(), 3);
        assert!(
            left[0].1.contains("Insufficient nvidia.com/gpu.shared"),
            "{left:?}"
        );
    }

    #[test]
    fn limits_keep_out_what_would_exceed_them() {
        let ov = [overlay(1, 10), overlay(4, 40)];
        // 20 slices allowed: the 4-GPU type (40) is over, so 15 pods take two 1-GPU nodes and
        // the rest wait.
        let (launched, left) = plan(t4_pool(0, json!({"nvidia.com/gpu.shared": "20"})), &ov, 25);
        assert_eq!(
            launched,
            vec![
                ("g4dn.xlarge".to_string(), 10),
                ("g4dn.xlarge".to_string(), 10)
            ]
        );
        assert_eq!(left.len(), 5);
        assert!(left[0].1.contains("exceed limits"), "{left:?}");
    }

    #[test]
    fn requirements_and_capacity_type() {
        let p = pool_of(&t4_pool(0, json!({}))).unwrap();
        assert_eq!(p.labels[CAPACITY_TYPE], "on-demand");
        let names: Vec<&str> = candidates(&p, &[]).iter().map(|c| c.offer.name).collect();
        assert_eq!(
            names,
            [
                "g4dn.xlarge",
                "g4dn.2xlarge",
                "g4dn.4xlarge",
                "g4dn.8xlarge",
                "g4dn.16xlarge",
                "g4dn.12xlarge"
            ]
        );
        let gt = json!({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["2"]});
        let c = &candidates(&p, &[])[5];
        assert!(meets(&c.labels, &gt));
        assert!(!meets(&candidates(&p, &[])[0].labels, &gt));
        assert_eq!(azure_gpu_name("Standard_NC24ads_A100_v4"), Some("A100"));
        assert_eq!(azure_gpu_name("Standard_D4s_v5"), None);
    }

    #[test]
    fn the_gate_is_read_from_the_deployment() {
        let d = |gates: &str| {
            json!({"items": [{"spec": {"template": {"spec": {"containers": [{"env": [
                {"name": "FEATURE_GATES", "value": gates}]}]}}}}]})
        };
        assert!(gate_on(&d(
            "SpotToSpotConsolidation=false,NodeOverlay=true"
        )));
        assert!(!gate_on(&d("NodeOverlay=false")));
        assert!(!gate_on(&json!({"items": []})));
        // The argument wins over the environment, whichever way it is written.
        let with_args = |args: Value, gates: &str| {
            json!({"items": [{"spec": {"template": {"spec": {"containers": [{"args": args,
                "env": [{"name": "FEATURE_GATES", "value": gates}]}]}}}}]})
        };
        assert!(gate_on(&with_args(
            json!(["--feature-gates=NodeOverlay=true"]),
            "NodeOverlay=false"
        )));
        assert!(gate_on(&with_args(
            json!(["--feature-gates", "NodeOverlay=True"]),
            ""
        )));
        assert!(!gate_on(&with_args(
            json!(["-feature-gates=SpotToSpotConsolidation=true"]),
            "NodeOverlay=true"
        )));
    }
}
