//! One pass of the twin's cluster-autoscalers over the cloud world: the autoscaled pools of each
//! cluster with their templates, the cluster's pending pods (asked of the node sink), the plan,
//! and the pools grown by it, each change handed to the Kubernetes twin as a node event. It runs
//! with the world locked, after whatever the request did (`handle.rs`), so that a pod created
//! through a cluster's API, a pool that settled and a tag written all lead to the same decision at
//! once, deterministically.
//!
//! How each cloud's autoscaler grows a pool: AKS sets the scale set's capacity (the agent pool's
//! `count` follows), cluster-autoscaler on EKS the Auto Scaling group's desired capacity
//! (SetDesiredCapacity; EKS reports it as the node group's `desiredSize`), GKE its instance groups'
//! sizes. None of them puts the pool through an update, so the pool stays Succeeded / ACTIVE /
//! RUNNING and its nodes appear at once (real nodes take minutes to boot). Only pools in that
//! settled state are grown. Before it grows any, it waits for more pods as upstream's loop does
//! (`PodBuffers`): a pass inside the wait records it and asks for a look when it ends. On EKS the group must carry cluster-autoscaler's auto-discovery tags
//! (`k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`: kubernetes/autoscaler
//! cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup"), which EKS puts there.

use std::collections::BTreeMap;

use super::estimate::{Plan, plan};
use super::log::Decision;
use super::template::{Template, aks_node, eks_node, gke_node};
use crate::config::PodBuffers;
use crate::nodes::{ClusterDemand, NodeEvent, NodeSink};
use crate::{Ctx, World, arm, eks, gke};

/// Every pool the autoscalers may grow, grouped by (cloud, cluster).
fn templates(w: &World) -> BTreeMap<(&'static str, String), Vec<Template>> {
    let mut out: BTreeMap<(&'static str, String), Vec<Template>> = BTreeMap::new();
    for t in aks_templates(w)
        .into_iter()
        .chain(eks_templates(w))
        .chain(gke_templates(w))
    {
        out.entry((t.cloud, t.cluster.clone())).or_default().push(t);
    }
    out
}

/// AKS's autoscaled agent pools, as the scale set's tags describe their nodes.
fn aks_templates(w: &World) -> Vec<Template> {
    let mut out = Vec::new();
    for (key, c) in &w.aks.clusters {
        for p in c.pools.values() {
            let pr = &p.props;
            if !pr.enable_auto_scaling || p.provisioning_state != "Succeeded" || p.pending.is_some()
            {
                continue;
            }
            let (labels, taints, capacity) = aks_node(&p.name, &pr.vm_size, &pr.tags);
            let target = arm::pool_nodes(&c.name, p).node_count;
            out.push(Template {
                cloud: "aks",
                cluster: c.name.clone(),
                cluster_key: key.clone(),
                pool: p.name.clone(),
                target,
                max: pr.max_count.unwrap_or(target),
                labels,
                taints,
                capacity,
                source: "the scale set's tags (the agent pool's tags)".into(),
            });
        }
    }
    out
}

/// EKS's node groups whose Auto Scaling group carries the auto-discovery tags.
fn eks_templates(w: &World) -> Vec<Template> {
    let mut out = Vec::new();
    for (key, c) in &w.eks.clusters {
        for ng in c.nodegroups.values() {
            if ng.status != "ACTIVE" || ng.pending.is_some() {
                continue;
            }
            let tags: BTreeMap<String, String> = ng
                .asg_tags(&c.name)
                .into_iter()
                .map(|(k, t)| (k, t.value))
                .collect();
            let discovered = tags.contains_key("k8s.io/cluster-autoscaler/enabled")
                && tags.contains_key(&format!("k8s.io/cluster-autoscaler/{}", c.name));
            if !discovered {
                continue;
            }
            let s = &ng.spec;
            let itype = s.instance_types.first().cloned().unwrap_or_default();
            let (labels, taints, capacity) = eks_node(&itype, &tags, &s.labels, &s.taints, &s.tags);
            out.push(Template {
                cloud: "eks",
                cluster: c.name.clone(),
                cluster_key: key.clone(),
                pool: ng.name.clone(),
                target: s.desired_size.max(0) as u32,
                max: s.max_size.max(0) as u32,
                labels,
                taints,
                capacity,
                source: "the Auto Scaling group's tags and DescribeNodegroup".into(),
            });
        }
    }
    out
}

/// GKE's autoscaled node pools, whose accelerator and sharing config describe their nodes.
fn gke_templates(w: &World) -> Vec<Template> {
    let mut out = Vec::new();
    for (key, c) in &w.gke.clusters {
        let zones = c.zones();
        for p in c.pools.values() {
            let Some(a) = p.spec.autoscaling.as_ref().filter(|a| a.enabled) else {
                continue;
            };
            if p.status != "RUNNING" || p.pending.is_some() {
                continue;
            }
            let nodes = gke::pool_nodes(&c.name, &zones, p);
            let pool_zones = gke::zone_sizes(&zones, p).len().max(1) as i64;
            let max = if a.total_max_node_count > 0 {
                a.total_max_node_count
            } else {
                a.max_node_count * pool_zones
            };
            let partitions = if nodes.mig_profile.is_some() {
                nodes.mig_instances_per_gpu
            } else {
                1
            };
            let mut labels = nodes.labels.clone();
            labels.insert("cloud.google.com/gke-nodepool".into(), p.name.clone());
            let (labels, taints, capacity) = gke_node(
                &labels,
                &nodes.taints,
                nodes.gpus_per_node,
                partitions,
                nodes.gke_sharing.as_ref().map(|(_, n)| *n),
            );
            out.push(Template {
                cloud: "gke",
                cluster: c.name.clone(),
                cluster_key: key.clone(),
                pool: p.name.clone(),
                target: nodes.node_count,
                max: max.max(0) as u32,
                labels,
                taints,
                capacity,
                source: "the node pool's accelerator and sharing config".into(),
            });
        }
    }
    out
}

/// Grows one pool to `to` nodes and returns the node event for the twin.
fn grow(w: &mut World, t: &Template, to: u32) -> Option<NodeEvent> {
    match t.cloud {
        "aks" => {
            let c = w.aks.clusters.get_mut(&t.cluster_key)?;
            let p = c.pools.get_mut(&t.pool)?;
            p.autoscaled_count = Some(to);
            Some(NodeEvent::Changed(arm::pool_nodes(&c.name, p)))
        }
        "eks" => {
            let c = w.eks.clusters.get_mut(&t.cluster_key)?;
            let ng = c.nodegroups.get_mut(&t.pool)?;
            ng.spec.desired_size = i64::from(to);
            Some(NodeEvent::Changed(eks::pool_nodes(&c.name, &c.region, ng)))
        }
        _ => {
            let c = w.gke.clusters.get_mut(&t.cluster_key)?;
            let zones = c.zones();
            let p = c.pools.get_mut(&t.pool)?;
            p.autoscaled_total = Some(i64::from(to));
            Some(NodeEvent::Changed(gke::pool_nodes(&c.name, &zones, p)))
        }
    }
}

/// When the wait for more pods ends, if it has not ended at `now`: the pods considered are those
/// that need a new node (the plan opens one for them, or no pool can take them; pods that fit
/// registered or upcoming nodes are not waited for), the wait runs `new_pods` from the oldest of
/// them and `new_gpu_pods` from the oldest that requests `nvidia.com/gpu`. (pods waited for, end)
pub(crate) fn waiting(
    demand: &ClusterDemand,
    p: &Plan,
    buffers: &PodBuffers,
    now: u64,
) -> Option<(Vec<String>, u64)> {
    let to_help: Vec<&String> = p
        .triggered
        .values()
        .flatten()
        .chain(p.not_triggered.iter().map(|(pod, _)| pod))
        .collect();
    let pods: Vec<_> = demand
        .pending
        .iter()
        .filter(|pod| to_help.contains(&&pod.name))
        .collect();
    let oldest = pods.iter().map(|pod| pod.created_ms).min()?;
    let mut end = oldest + buffers.new_pods.as_millis() as u64;
    if let Some(gpu) = pods
        .iter()
        .filter(|pod| pod.requests.contains_key("nvidia.com/gpu"))
        .map(|pod| pod.created_ms)
        .min()
    {
        end = end.max(gpu + buffers.new_gpu_pods.as_millis() as u64);
    }
    (end > now).then(|| (pods.iter().map(|pod| pod.name.clone()).collect(), end))
}

/// One pass over every cluster the sink has a Kubernetes API for.
pub(crate) fn run(w: &mut World, ctx: &mut Ctx, sink: &dyn NodeSink, buffers: &PodBuffers) {
    for ((cloud, cluster), ts) in templates(w) {
        let Some(demand) = sink.demand(cloud, &cluster) else {
            continue;
        };
        if demand.pending.is_empty() {
            continue;
        }
        let p = plan(&demand, &ts);
        if let Some((pods, end)) = waiting(&demand, &p, buffers, ctx.now) {
            ctx.wake(end);
            let d = Decision {
                at: ctx.now,
                cloud: cloud.into(),
                cluster: cluster.clone(),
                reason: "ScaleUpInCooldown".into(),
                pool: None,
                sizes: None,
                message: format!(
                    "{} pod(s) need a new node; waiting for more pods until {} ({} s after the \
                     oldest of them, {} s after the oldest that requests nvidia.com/gpu)",
                    pods.len(),
                    crate::dates::rfc3339_millis(end),
                    buffers.new_pods.as_secs_f64(),
                    buffers.new_gpu_pods.as_secs_f64(),
                ),
                pods,
            };
            if w.autoscaler.record(format!("{cloud}/{cluster}/wait"), d) {
                ctx.mutated();
            }
            continue;
        }
        for (i, added) in &p.new_nodes {
            let t = &ts[*i];
            let to = t.target + added;
            let Some(ev) = grow(w, t, to) else {
                continue;
            };
            ctx.events.push(ev);
            ctx.mutated();
            let pods = p.triggered.get(i).cloned().unwrap_or_default();
            let d = Decision {
                at: ctx.now,
                cloud: cloud.into(),
                cluster: cluster.clone(),
                reason: "TriggeredScaleUp".into(),
                pool: Some(t.pool.clone()),
                sizes: Some((t.target, to)),
                message: format!(
                    "{} pod(s) triggered scale-up, group: {}, sizes (current/new): {}/{} \
                     (template from {}: {})",
                    pods.len(),
                    t.pool,
                    t.target,
                    to,
                    t.source,
                    t.capacity
                        .iter()
                        .map(|(r, q)| format!("{r}={q}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                pods,
            };
            w.autoscaler
                .record(format!("{cloud}/{cluster}/pool/{}/{to}", t.pool), d);
        }
        for (pod, reasons) in &p.not_triggered {
            let why = reasons
                .iter()
                .map(|(pool, r)| format!("{pool}: {r}"))
                .collect::<Vec<_>>()
                .join("; ");
            let d = Decision {
                at: ctx.now,
                cloud: cloud.into(),
                cluster: cluster.clone(),
                reason: "NotTriggerScaleUp".into(),
                pool: None,
                sizes: None,
                pods: vec![pod.clone()],
                message: format!("pod didn't trigger scale-up: {why}"),
            };
            if w.autoscaler
                .record(format!("{cloud}/{cluster}/pod/{pod}"), d)
            {
                ctx.mutated();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::nodes::PendingPod;

    fn template(target: u32) -> Template {
        Template {
            cloud: "eks",
            cluster: "c".into(),
            cluster_key: "c".into(),
            pool: "ts".into(),
            target,
            max: 4,
            labels: BTreeMap::new(),
            taints: vec![],
            capacity: BTreeMap::from([
                ("nvidia.com/gpu".into(), 10),
                ("nvidia.com/gpu.shared".into(), 10),
            ]),
            source: String::new(),
        }
    }

    fn pod(name: &str, resource: &str, created_ms: u64) -> PendingPod {
        PendingPod {
            name: name.into(),
            requests: BTreeMap::from([(resource.into(), 1)]),
            created_ms,
            ..PendingPod::default()
        }
    }

    fn wait(pods: Vec<PendingPod>, target: u32, now: u64) -> Option<(Vec<String>, u64)> {
        let demand = ClusterDemand {
            pending: pods,
            nodes: vec![],
        };
        let p = plan(&demand, &[template(target)]);
        waiting(&demand, &p, &PodBuffers::UPSTREAM, now)
    }

    #[test]
    fn pods_that_request_nvidia_gpu_are_waited_for_thirty_seconds() {
        let pods = || {
            vec![
                pod("a", "nvidia.com/gpu", 10_000),
                pod("b", "nvidia.com/gpu", 25_000),
            ]
        };
        assert_eq!(
            wait(pods(), 0, 39_999),
            Some((vec!["a".into(), "b".into()], 40_000))
        );
        assert_eq!(wait(pods(), 0, 40_000), None);
        // A renamed resource is not nvidia.com/gpu to upstream: two seconds.
        let shared = vec![pod("a", "nvidia.com/gpu.shared", 10_000)];
        assert_eq!(wait(shared.clone(), 0, 11_000).map(|w| w.1), Some(12_000));
        assert_eq!(wait(shared, 0, 12_000), None);
    }

    #[test]
    fn pods_an_upcoming_node_takes_are_not_waited_for() {
        // One node asked for and not registered: the pod goes there, no new node, no wait.
        assert_eq!(
            wait(vec![pod("a", "nvidia.com/gpu", 10_000)], 1, 11_000),
            None
        );
        // Pods no pool can take are waited for too (upstream counts every pod to help).
        let mut none = pod("a", "nvidia.com/mig-1g.5gb", 10_000);
        none.requests.insert("nvidia.com/gpu".into(), 1);
        assert_eq!(
            wait(vec![none], 0, 11_000).map(|w| w.1),
            Some(10_000 + Duration::from_secs(30).as_millis() as u64)
        );
    }
}
