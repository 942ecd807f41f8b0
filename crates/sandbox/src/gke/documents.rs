//! What GKE shows: the v1 NodePool, Cluster and Operation documents (string enums, int64 fields as
//! the JSON mapping of the v1 protos gives them), and the nodes GKE creates for a pool with GKE's
//! node labels and GPU taint, for the Kubernetes twin.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{GKE_VERSION, GkeCluster, GkeOp, NodePool, PoolSpec};
use crate::catalog;
use crate::dates::rfc3339_millis;
use crate::nodes::{PoolNodes, k8s_effect};

/// The nodes GKE creates for a pool, with GKE's node labels.
pub(crate) fn pool_nodes(cluster: &str, pool: &NodePool) -> PoolNodes {
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
    let acc = s.accelerators.first();
    let machine_gpu = catalog::gcp_machine_type(&s.machine_type).and_then(|m| m.gpu);
    let acc_info = acc.and_then(|a| catalog::gke_accelerator(&a.accelerator_type));
    let gpu = acc_info.map(|a| a.gpu).or(machine_gpu.map(|(g, _)| g));
    let gpus = acc
        .map(|a| a.count as u32)
        .or(machine_gpu.map(|(_, n)| n))
        .unwrap_or(0);
    let mut mig = None;
    let mut sharing = None;
    if let Some(a) = acc {
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
        if let (Some(p), Some(info)) = (&a.gpu_partition_size, acc_info) {
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
    }
    for (k, v) in &s.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut taints: Vec<(String, String, String)> = s
        .taints
        .iter()
        .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string()))
        .collect();
    if gpus > 0 {
        // GKE taints every GPU node so that only pods asking for GPUs land there.
        taints.push((
            "nvidia.com/gpu".into(),
            "present".into(),
            "NoSchedule".into(),
        ));
    }
    let count = match &s.autoscaling {
        Some(a) if a.enabled => a.min_node_count.max(a.total_min_node_count),
        _ => s.node_count,
    };
    PoolNodes {
        cloud: "gke",
        cluster: cluster.to_string(),
        pool: pool.name.clone(),
        node_count: (count.max(1)) as u32,
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

pub(super) fn cluster_path(c: &GkeCluster) -> String {
    format!(
        "projects/{}/locations/{}/clusters/{}",
        c.project, c.location, c.name
    )
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
    let mut v = json!({
        "name": p.name,
        "config": config,
        "initialNodeCount": s.initial_node_count,
        "locations": [format!("{}-a", c.location)],
        "selfLink": format!("https://container.googleapis.com/v1/{path}"),
        "version": s.version,
        "instanceGroupUrls": [format!("https://www.googleapis.com/compute/v1/projects/{}/zones/{}-a/instanceGroupManagers/gke-{}-{}-grp", c.project, c.location, c.name, p.name)],
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

fn fxhash(path: &str, s: &PoolSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    format!("{s:?}").hash(&mut h);
    h.finish()
}

pub(super) fn cluster_json(c: &GkeCluster) -> Value {
    let pools: Vec<Value> = c.pools.values().map(|p| pool_json(c, p)).collect();
    let nodes: i64 = c.pools.values().map(|p| p.spec.node_count).sum();
    json!({
        "name": c.name,
        "location": c.location,
        "zone": c.location,
        "locations": [format!("{}-a", c.location)],
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
