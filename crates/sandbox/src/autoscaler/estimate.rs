//! How many nodes pending pods need: pure, from what the cluster shows (`ClusterDemand`) and the
//! pools' templates (`template.rs`), so that it can be reasoned about and tested apart from the
//! clouds.
//!
//! Upstream's loop (kubernetes/autoscaler cluster-autoscaler/FAQ.md "How does scale-up work?"):
//! pods the scheduler marked unschedulable that would fit on an existing or upcoming node are left
//! alone; for the rest, each node group's template node is simulated, a pod counts for a group only
//! where the scheduler's predicates pass on its template (node selector, taints and tolerations,
//! resources), and the binpacking estimator packs pods onto as many template nodes as they need,
//! up to the group's maximum. What the twin does the same: it packs pods, oldest first, first fit,
//! onto the room of registered nodes, then onto the nodes a pool is already asked for but that have
//! not registered yet (upcoming nodes, as the template), then onto new template nodes. What it
//! simplifies: only extended resources are packed (the twin's nodes model no CPU or memory); a pod's
//! node affinity is not read (only `nodeSelector`); and where several pools could take a pod, the
//! first by name gets it, where upstream lets an expander choose (random by default).

use std::collections::BTreeMap;

use super::template::Template;
use crate::nodes::{ClusterDemand, PendingPod, Toleration};

/// A place a pod may go.
struct Bin {
    /// Index of the template the bin is a node of; None for a registered node no pool owns.
    template: Option<usize>,
    labels: BTreeMap<String, String>,
    taints: Vec<(String, String, String)>,
    free: BTreeMap<String, u64>,
    /// A node this run adds.
    fresh: bool,
}

/// What the pods need: new nodes per template (index), the pods each pool's new nodes are for,
/// and why each pod no pool can take was left pending.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    pub(crate) new_nodes: BTreeMap<usize, u32>,
    pub(crate) triggered: BTreeMap<usize, Vec<String>>,
    /// (pod, reason per pool)
    pub(crate) not_triggered: Vec<(String, Vec<(String, String)>)>,
}

/// Whether a toleration tolerates a taint (core/v1 Toleration.ToleratesTaint: an empty key with
/// Exists matches every key; Exists ignores the value; an empty effect matches every effect).
fn tolerates(t: &Toleration, (key, value, effect): &(String, String, String)) -> bool {
    if !t.effect.is_empty() && t.effect != *effect {
        return false;
    }
    if t.key.is_empty() {
        return t.operator == "Exists";
    }
    if t.key != *key {
        return false;
    }
    match t.operator.as_str() {
        "Exists" => true,
        _ => t.value == *value,
    }
}

/// Why a pod cannot go to a node with these labels, taints and room; None when it can. The texts
/// are the scheduler's predicate failures as cluster-autoscaler quotes them in its events.
pub(crate) fn refusal(
    pod: &PendingPod,
    labels: &BTreeMap<String, String>,
    taints: &[(String, String, String)],
    free: &BTreeMap<String, u64>,
) -> Option<String> {
    if pod
        .node_selector
        .iter()
        .any(|(k, v)| labels.get(k) != Some(v))
    {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    // PreferNoSchedule never keeps a pod off a node.
    if let Some((k, _, _)) = taints
        .iter()
        .filter(|t| t.2 != "PreferNoSchedule")
        .find(|t| !pod.tolerations.iter().any(|tol| tolerates(tol, t)))
    {
        return Some(format!("node(s) had untolerated taint {{{k}}}"));
    }
    for (r, q) in &pod.requests {
        if free.get(r).copied().unwrap_or(0) < *q {
            return Some(format!("Insufficient {r}"));
        }
    }
    None
}

pub(crate) fn take(free: &mut BTreeMap<String, u64>, pod: &PendingPod) {
    for (r, q) in &pod.requests {
        if let Some(f) = free.get_mut(r) {
            *f -= q;
        }
    }
}

/// The plan for one cluster. Pods that ask for no extended resource are left to the cluster's
/// other nodes: the twin models only GPU pools.
pub(crate) fn plan(demand: &ClusterDemand, templates: &[Template]) -> Plan {
    let mut bins: Vec<Bin> = Vec::new();
    let mut registered: BTreeMap<&str, u32> = BTreeMap::new();
    for n in demand.nodes.iter().filter(|n| !n.unschedulable) {
        let template = n
            .pool
            .as_deref()
            .and_then(|p| templates.iter().position(|t| t.pool == p));
        if let Some(p) = n.pool.as_deref() {
            *registered.entry(p).or_insert(0) += 1;
        }
        bins.push(Bin {
            template,
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            free: n.free.clone(),
            fresh: false,
        });
    }
    let template_bin = |i: usize, t: &Template| Bin {
        template: Some(i),
        labels: t.labels.clone(),
        taints: t.taints.clone(),
        free: t.capacity.clone(),
        fresh: false,
    };
    for (i, t) in templates.iter().enumerate() {
        let upcoming = t
            .target
            .saturating_sub(registered.get(t.pool.as_str()).copied().unwrap_or(0));
        for _ in 0..upcoming {
            bins.push(template_bin(i, t));
        }
    }
    let mut out = Plan::default();
    for pod in demand.pending.iter().filter(|p| !p.requests.is_empty()) {
        if let Some(b) = bins
            .iter_mut()
            .find(|b| refusal(pod, &b.labels, &b.taints, &b.free).is_none())
        {
            take(&mut b.free, pod);
            if let Some(i) = b.template.filter(|_| b.fresh) {
                out.triggered.entry(i).or_default().push(pod.name.clone());
            }
            continue;
        }
        let mut reasons = Vec::new();
        let mut opened = false;
        for (i, t) in templates.iter().enumerate() {
            if let Some(r) = refusal(pod, &t.labels, &t.taints, &t.capacity) {
                reasons.push((t.pool.clone(), r));
                continue;
            }
            let added = out.new_nodes.get(&i).copied().unwrap_or(0);
            if t.target + added >= t.max {
                reasons.push((t.pool.clone(), "max node group size reached".into()));
                continue;
            }
            out.new_nodes.insert(i, added + 1);
            out.triggered.entry(i).or_default().push(pod.name.clone());
            let mut b = template_bin(i, t);
            b.fresh = true;
            take(&mut b.free, pod);
            bins.push(b);
            opened = true;
            break;
        }
        if !opened {
            out.not_triggered.push((pod.name.clone(), reasons));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::NodeRoom;

    fn template(pool: &str, capacity: u64, max: u32) -> Template {
        Template {
            cloud: "aks",
            cluster: "c".into(),
            cluster_key: "c".into(),
            pool: pool.into(),
            target: 0,
            max,
            labels: BTreeMap::from([("pool".into(), pool.into())]),
            taints: vec![("sku".into(), "gpu".into(), "NoSchedule".into())],
            capacity: BTreeMap::from([("nvidia.com/gpu".into(), capacity)]),
            source: String::new(),
        }
    }

    fn pods(n: usize, selector: &[(&str, &str)]) -> Vec<PendingPod> {
        (0..n)
            .map(|i| PendingPod {
                name: format!("default/p{i}"),
                requests: BTreeMap::from([("nvidia.com/gpu".into(), 1)]),
                node_selector: selector
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                tolerations: vec![Toleration {
                    key: "sku".into(),
                    operator: "Exists".into(),
                    ..Toleration::default()
                }],
                created_ms: 0,
            })
            .collect()
    }

    #[test]
    fn slices_pack_onto_one_node_whole_gpus_onto_ten() {
        let d = ClusterDemand {
            pending: pods(10, &[]),
            nodes: vec![],
        };
        let p = plan(&d, &[template("ts", 10, 10)]);
        assert_eq!(p.new_nodes, BTreeMap::from([(0, 1)]));
        assert_eq!(p.triggered[&0].len(), 10);
        let p = plan(&d, &[template("whole", 1, 10)]);
        assert_eq!(p.new_nodes, BTreeMap::from([(0, 10)]));
        let p = plan(&d, &[template("whole", 1, 4)]);
        assert_eq!(p.new_nodes, BTreeMap::from([(0, 4)]));
        assert_eq!(p.not_triggered.len(), 6);
        assert_eq!(p.not_triggered[0].1[0].1, "max node group size reached");
    }

    #[test]
    fn registered_and_upcoming_nodes_take_pods_first() {
        let mut t = template("ts", 10, 10);
        t.target = 1;
        let d = ClusterDemand {
            pending: pods(10, &[]),
            nodes: vec![],
        };
        // One node asked for, not registered yet: it is counted as the template.
        assert_eq!(plan(&d, &[t.clone()]).new_nodes, BTreeMap::new());
        // Registered, it offers what it advertises (here whole GPUs: the device plugin runs
        // without the time-slicing the tags promised), so the rest need more nodes.
        let d = ClusterDemand {
            pending: pods(10, &[]),
            nodes: vec![NodeRoom {
                name: "n".into(),
                pool: Some("ts".into()),
                labels: t.labels.clone(),
                taints: t.taints.clone(),
                free: BTreeMap::from([("nvidia.com/gpu".into(), 1)]),
                unschedulable: false,
            }],
        };
        assert_eq!(plan(&d, &[t]).new_nodes, BTreeMap::from([(0, 1)]));
    }

    #[test]
    fn selectors_taints_and_resources_decide_which_pool() {
        let d = ClusterDemand {
            pending: pods(1, &[("pool", "other")]),
            nodes: vec![],
        };
        let p = plan(&d, &[template("ts", 10, 10)]);
        assert!(p.new_nodes.is_empty());
        assert_eq!(
            p.not_triggered[0].1,
            [(
                "ts".into(),
                "node(s) didn't match Pod's node affinity/selector".into()
            )]
        );
        let mut untolerant = pods(1, &[]);
        untolerant[0].tolerations.clear();
        let p = plan(
            &ClusterDemand {
                pending: untolerant,
                nodes: vec![],
            },
            &[template("ts", 10, 10)],
        );
        assert_eq!(
            p.not_triggered[0].1[0].1,
            "node(s) had untolerated taint {sku}"
        );
        let mut shared = pods(1, &[]);
        shared[0].requests = BTreeMap::from([("nvidia.com/gpu.shared".into(), 1)]);
        let p = plan(
            &ClusterDemand {
                pending: shared,
                nodes: vec![],
            },
            &[template("ts", 10, 10)],
        );
        assert_eq!(
            p.not_triggered[0].1[0].1,
            "Insufficient nvidia.com/gpu.shared"
        );
    }
}
