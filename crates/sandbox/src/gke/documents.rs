//! What GKE shows: the v1 NodePool, Cluster and Operation documents (string enums, int64 fields as
//! the JSON mapping of the v1 protos gives them), and the nodes GKE creates for a pool with GKE's
//! node labels and GPU taint, for the Kubernetes twin.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::world::{Accelerator, GKE_VERSION, GkeCluster, GkeOp, NodePool, PoolSpec, cluster_path};
use crate::catalog;
use crate::dates::rfc3339_millis;
use crate::nodes::{PoolNodes, gke_group_id, k8s_effect};

/// The zones a pool runs in: its `locations`, or the cluster's (a pool saved before pools had zones).
pub(crate) fn pool_zones(cluster_zones: &[String], pool: &NodePool) -> Vec<String> {
    if pool.spec.locations.is_empty() {
        cluster_zones.to_vec()
    } else {
        pool.spec.locations.clone()
    }
}

/// Each zone's instance group size now. A fixed pool has its per-zone count in every zone; the
/// autoscaler keeps each zone within the per-zone bounds, or the whole pool within the total bounds,
/// spread evenly over the zones (BALANCED, GKE's default location policy). The sandbox runs no
/// workloads, so the autoscaler never goes beyond what the bounds force.
pub(crate) fn zone_sizes(cluster_zones: &[String], pool: &NodePool) -> Vec<(String, i64)> {
    let zones = pool_zones(cluster_zones, pool);
    let s = &pool.spec;
    if let (Some(a), Some(total)) = (
        s.autoscaling.as_ref().filter(|a| a.enabled),
        pool.autoscaled_total,
    ) {
        // What the autoscaler set, spread over the zones, within the pool's bounds.
        let n = zones.len().max(1) as i64;
        let (lo, hi) = if a.total_max_node_count > 0 {
            (a.total_min_node_count, a.total_max_node_count)
        } else {
            (a.min_node_count * n, a.max_node_count * n)
        };
        let total = total.clamp(lo, hi.max(lo));
        return zones
            .into_iter()
            .enumerate()
            .map(|(i, z)| (z, total / n + i64::from((i as i64) < total % n)))
            .collect();
    }
    match &s.autoscaling {
        Some(a) if a.enabled && a.total_max_node_count > 0 => {
            let n = zones.len().max(1) as i64;
            let total = (s.node_count * n).clamp(a.total_min_node_count, a.total_max_node_count);
            zones
                .into_iter()
                .enumerate()
                .map(|(i, z)| (z, total / n + i64::from((i as i64) < total % n)))
                .collect()
        }
        Some(a) if a.enabled => zones
            .into_iter()
            .map(|z| (z, s.node_count.clamp(a.min_node_count, a.max_node_count)))
            .collect(),
        _ => zones.into_iter().map(|z| (z, s.node_count)).collect(),
    }
}

/// The nodes GKE creates for a pool, zone by zone, with GKE's node labels.
pub(crate) fn pool_nodes(cluster: &str, cluster_zones: &[String], pool: &NodePool) -> PoolNodes {
    let s = &pool.spec;
    let mut labels = machine_labels(pool);
    let acc = s.accelerators.first();
    let machine_gpu = catalog::gcp_machine_type(&s.machine_type).and_then(|m| m.gpu);
    let acc_info = acc.and_then(|a| catalog::gke_accelerator(&a.accelerator_type));
    let gpu = acc_info.map(|a| a.gpu).or(machine_gpu.map(|(g, _)| g));
    let gpus = acc
        .map(|a| a.count as u32)
        .or(machine_gpu.map(|(_, n)| n))
        .unwrap_or(0);
    let GpuSplit { mig, sharing } = match acc {
        Some(a) => accelerator_labels(&mut labels, a, acc_info),
        None => GpuSplit {
            mig: None,
            sharing: None,
        },
    };
    for (k, v) in &s.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut taints: Vec<(String, String, String)> = s
        .taints
        .iter()
        .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string()))
        .collect();
    if gpus > 0 {
        // GKE taints every GPU node so that only pods asking for GPUs land there ("Run GPUs in GKE
        // Standard node pools": key nvidia.com/gpu, effect NoSchedule; the value it writes is
        // `present`), beside the pool's own taints.
        taints.push((
            "nvidia.com/gpu".into(),
            "present".into(),
            "NoSchedule".into(),
        ));
    }
    // A pool scaled to zero has no nodes.
    let zones: Vec<String> = zone_sizes(cluster_zones, pool)
        .into_iter()
        .flat_map(|(z, n)| std::iter::repeat_n(z, n.max(0) as usize))
        .collect();
    PoolNodes {
        instances: Vec::new(),
        cloud: "gke",
        cluster: cluster.to_string(),
        pool: pool.name.clone(),
        node_count: zones.len() as u32,
        zones,
        labels,
        taints,
        gpu_product: gpu.map(|g| g.product.to_string()),
        gpus_per_node: gpus,
        gpu_memory_mib: gpu.map_or(0, |g| g.memory_mib),
        mig_profile: mig.map(|(p, _)| p.to_string()),
        mig_instances_per_gpu: mig.map_or(0, |(_, n)| n),
        gke_sharing: sharing,
        os_image: None,
    }
}

/// The labels GKE puts on every node of a pool: the pool, the machine and the OS.
fn machine_labels(pool: &NodePool) -> BTreeMap<String, String> {
    let s = &pool.spec;
    let mut labels = BTreeMap::new();
    labels.insert(
        "cloud.google.com/gke-nodepool".to_string(),
        pool.name.clone(),
    );
    labels.insert(
        "cloud.google.com/machine-family".to_string(),
        s.machine_type.split('-').next().unwrap_or("").to_string(),
    );
    labels.insert(
        "cloud.google.com/gke-os-distribution".to_string(),
        "cos".to_string(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        s.machine_type.clone(),
    );
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    if s.spot {
        labels.insert("cloud.google.com/gke-spot".to_string(), "true".to_string());
    }
    labels
}

/// How each GPU of a node is split.
struct GpuSplit {
    /// The MIG profile and how many instances one GPU holds.
    mig: Option<(&'static str, u32)>,
    /// GKE's own sharing: (TIME_SHARING | MPS, clients per GPU).
    sharing: Option<(String, u32)>,
}

/// Labels the node with its accelerator as GKE does, and tells how each GPU is split.
fn accelerator_labels(
    labels: &mut BTreeMap<String, String>,
    a: &Accelerator,
    info: Option<&'static catalog::GkeAccelerator>,
) -> GpuSplit {
    let mut mig = None;
    let mut sharing = None;
    labels.insert(
        "cloud.google.com/gke-accelerator".to_string(),
        a.accelerator_type.clone(),
    );
    labels.insert(
        "cloud.google.com/gke-accelerator-count".to_string(),
        a.count.to_string(),
    );
    if let Some(d) = &a.driver_version {
        labels.insert(
            "cloud.google.com/gke-gpu-driver-version".to_string(),
            d.to_ascii_lowercase(),
        );
    }
    if let (Some(p), Some(info)) = (&a.gpu_partition_size, info) {
        labels.insert(
            "cloud.google.com/gke-gpu-partition-size".to_string(),
            p.clone(),
        );
        mig = catalog::gke_partition(info, p);
    }
    if let Some((strategy, max)) = &a.sharing {
        labels.insert(
            "cloud.google.com/gke-gpu-sharing-strategy".to_string(),
            strategy.to_ascii_lowercase().replace('_', "-"),
        );
        labels.insert(
            "cloud.google.com/gke-max-shared-clients-per-gpu".to_string(),
            max.to_string(),
        );
        sharing = Some((strategy.clone(), *max as u32));
    }
    GpuSplit { mig, sharing }
}

pub(crate) fn pool_json(c: &GkeCluster, p: &NodePool) -> Value {
    let s = &p.spec;
    let accelerators: Vec<Value> = s
        .accelerators
        .iter()
        .map(|a| {
            let mut v = json!({"acceleratorCount": a.count.to_string(), "acceleratorType": a.accelerator_type});
            if let Some(ps) = &a.gpu_partition_size {
                v["gpuPartitionSize"] = json!(ps);
            }
            if let Some((st, max)) = &a.sharing {
                v["gpuSharingConfig"] = json!({"gpuSharingStrategy": st, "maxSharedClientsPerGpu": max.to_string()});
            }
            if let Some(d) = &a.driver_version {
                v["gpuDriverInstallationConfig"] = json!({"gpuDriverVersion": d});
            }
            v
        })
        .collect();
    let mut config = json!({
        "machineType": s.machine_type, "diskSizeGb": s.disk_size_gb, "diskType": s.disk_type, "imageType": s.image_type,
        "oauthScopes": if s.oauth_scopes.is_empty() { vec![
            // GKE's default scopes when the request names none.
            "https://www.googleapis.com/auth/devstorage.read_only".to_string(),
            "https://www.googleapis.com/auth/logging.write".to_string(),
            "https://www.googleapis.com/auth/monitoring".to_string(),
            "https://www.googleapis.com/auth/service.management.readonly".to_string(),
            "https://www.googleapis.com/auth/servicecontrol".to_string(),
            "https://www.googleapis.com/auth/trace.append".to_string(),
        ] } else { s.oauth_scopes.clone() },
        "serviceAccount": if s.service_account.is_empty() { "default" } else { s.service_account.as_str() },
        "metadata": {"disable-legacy-endpoints": "true"},
    });
    if !s.labels.is_empty() {
        config["labels"] = json!(s.labels);
    }
    if !s.taints.is_empty() {
        config["taints"] = json!(
            s.taints
                .iter()
                .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
                .collect::<Vec<_>>()
        );
    }
    if s.spot {
        config["spot"] = json!(true);
    }
    if !accelerators.is_empty() {
        config["accelerators"] = json!(accelerators);
    }
    let path = format!("{}/nodePools/{}", cluster_path(c), p.name);
    let zones = pool_zones(&c.zones(), p);
    // One managed instance group per zone.
    let groups: Vec<String> = zones
        .iter()
        .map(|z| {
            format!(
                "https://www.googleapis.com/compute/v1/projects/{}/zones/{z}/instanceGroupManagers/{}",
                c.project,
                instance_group_name(&c.name, &p.name, z)
            )
        })
        .collect();
    let mut v = json!({
        "name": p.name,
        "config": config,
        "initialNodeCount": s.initial_node_count,
        "locations": zones,
        "selfLink": format!("https://container.googleapis.com/v1/{path}"),
        "version": s.version,
        "instanceGroupUrls": groups,
        "status": p.status,
        "management": {"autoUpgrade": s.auto_upgrade, "autoRepair": s.auto_repair},
        "podIpv4CidrSize": 24,
        "upgradeSettings": {"maxSurge": 1, "strategy": "SURGE"},
        "etag": format!("{:x}", fxhash(&path, s)),
    });
    if let Some(a) = &s.autoscaling {
        let mut av = json!({"enabled": a.enabled});
        if a.total_max_node_count > 0 {
            av["totalMinNodeCount"] = json!(a.total_min_node_count);
            av["totalMaxNodeCount"] = json!(a.total_max_node_count);
        } else {
            av["minNodeCount"] = json!(a.min_node_count);
            av["maxNodeCount"] = json!(a.max_node_count);
        }
        if let Some(lp) = &a.location_policy {
            av["locationPolicy"] = json!(lp);
        }
        v["autoscaling"] = av;
    }
    v
}

/// The name of a pool's instance group manager in a zone, as GKE names them.
pub(crate) fn instance_group_name(cluster: &str, pool: &str, zone: &str) -> String {
    format!(
        "gke-{cluster}-{pool}-{}-grp",
        gke_group_id(cluster, pool, zone)
    )
}

fn fxhash(path: &str, s: &PoolSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    format!("{s:?}").hash(&mut h);
    h.finish()
}

pub(super) fn cluster_json(c: &GkeCluster) -> Value {
    let pools: Vec<Value> = c.pools.values().map(|p| pool_json(c, p)).collect();
    let zones = c.zones();
    let nodes: i64 = c
        .pools
        .values()
        .flat_map(|p| zone_sizes(&zones, p))
        .map(|(_, n)| n)
        .sum();
    json!({
        "name": c.name,
        "location": c.location,
        "zone": c.location,
        "locations": zones,
        "status": "RUNNING",
        "currentMasterVersion": GKE_VERSION,
        "currentNodeVersion": GKE_VERSION,
        "initialClusterVersion": GKE_VERSION,
        "currentNodeCount": nodes,
        "endpoint": "127.0.0.1",
        "selfLink": format!("https://container.googleapis.com/v1/{}", cluster_path(c)),
        "network": "default",
        "subnetwork": "default",
        "nodePools": pools,
        "releaseChannel": {"channel": "REGULAR"},
        "masterAuth": {"clusterCaCertificate": ""},
    })
}

pub(super) fn op_json(base: &str, op: &GkeOp) -> Value {
    let mut v = json!({
        "name": op.name,
        "zone": op.location,
        "operationType": op.op_type,
        "status": op.status,
        "selfLink": format!("{base}/v1/projects/{}/locations/{}/operations/{}", op.project, op.location, op.name),
        "targetLink": format!("{base}/v1/{}", op.target),
        "startTime": rfc3339_millis(op.start),
    });
    if let Some(e) = op.end {
        v["endTime"] = json!(rfc3339_millis(e));
    }
    if let Some((code, msg)) = &op.error {
        v["error"] = json!({"code": code, "message": msg});
        v["statusMessage"] = json!(msg);
    }
    v
}
