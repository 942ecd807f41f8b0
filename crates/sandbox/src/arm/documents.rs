//! An agent pool as the outside sees it: the ARM resource document that GET, the inventory and
//! the cluster's agentPoolProfiles show, and the nodes AKS creates for it, labelled and tainted as
//! AKS does, for the Kubernetes twin.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::validate::{effective_disk, parse_taint};
use super::world::{AgentPool, AksCluster};
use crate::catalog;
use crate::nodes::PoolNodes;

/// The nodes AKS creates for a pool, labelled as AKS labels them.
pub(crate) fn pool_nodes(cluster: &str, pool: &AgentPool) -> PoolNodes {
    let p = &pool.props;
    let mut labels = BTreeMap::new();
    labels.insert("agentpool".to_string(), pool.name.clone());
    labels.insert(
        "kubernetes.azure.com/agentpool".to_string(),
        pool.name.clone(),
    );
    labels.insert(
        "kubernetes.azure.com/mode".to_string(),
        p.mode.to_ascii_lowercase(),
    );
    labels.insert("kubernetes.azure.com/os-sku".to_string(), p.os_sku.clone());
    labels.insert(
        "kubernetes.io/os".to_string(),
        p.os_type.to_ascii_lowercase(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        p.vm_size.clone(),
    );
    let machine = catalog::azure_vm_size(&p.vm_size);
    let gpu = machine.and_then(|m| m.gpu);
    if gpu.is_some() {
        labels.insert("accelerator".to_string(), "nvidia".to_string());
    }
    let mut taints: Vec<(String, String, String)> = p
        .node_taints
        .iter()
        .filter_map(|t| parse_taint(t))
        .collect();
    if p.scale_set_priority == "Spot" {
        labels.insert(
            "kubernetes.azure.com/scalesetpriority".into(),
            "spot".into(),
        );
        taints.push((
            "kubernetes.azure.com/scalesetpriority".into(),
            "spot".into(),
            "NoSchedule".into(),
        ));
    }
    for (k, v) in &p.node_labels {
        labels.insert(k.clone(), v.clone());
    }
    let mig = match (gpu, &p.gpu_instance_profile) {
        (Some((g, _)), Some(ip)) => catalog::aks_mig_profile(&g, ip),
        _ => None,
    };
    let count = aks_count(pool);
    PoolNodes {
        instances: Vec::new(),
        cloud: "aks",
        cluster: cluster.to_string(),
        pool: pool.name.clone(),
        // A user pool scaled to zero has no nodes.
        node_count: count,
        zones: Vec::new(),
        labels,
        taints,
        gpu_product: gpu.map(|(g, _)| g.product.to_string()),
        gpus_per_node: gpu.map_or(0, |(_, n)| n),
        gpu_memory_mib: gpu.map_or(0, |(g, _)| g.memory_mib),
        mig_profile: mig.map(|(p, _)| p.to_string()),
        mig_instances_per_gpu: mig.map_or(0, |(_, n)| n),
        gke_sharing: None,
        os_image: os_image(&p.os_sku).map(Into::into),
    }
}

/// What a node of an OS SKU reports as its OS image; Ubuntu 22.04, AKS's default, is the node's
/// default.
fn os_image(os_sku: &str) -> Option<&'static str> {
    match os_sku {
        "Ubuntu2404" => Some("Ubuntu 24.04.3 LTS"),
        "AzureLinux3" => Some("Microsoft Azure Linux 3.0"),
        "AzureLinux" | "CBLMariner" => Some("CBL-Mariner/Linux"),
        _ => None,
    }
}

/// The nodes a pool runs: its count, or while it autoscales, what the autoscaler set (its minimum
/// until then), within its bounds.
fn aks_count(pool: &AgentPool) -> u32 {
    let p = &pool.props;
    if !p.enable_auto_scaling {
        return p.count;
    }
    let min = p.min_count.unwrap_or(p.count);
    let n = pool.autoscaled_count.unwrap_or(min).max(min);
    p.max_count.map_or(n, |m| n.min(m))
}

pub(crate) fn pool_json(c: &AksCluster, p: &AgentPool) -> Value {
    let pr = &p.props;
    // With the autoscaler at work, `count` is the pool's current size (AKS reports it so).
    let count = if p.autoscaled_count.is_some() {
        aks_count(p)
    } else {
        pr.count
    };
    let mut props = json!({
        "provisioningState": p.provisioning_state,
        "count": count,
        "vmSize": pr.vm_size,
        "osDiskSizeGB": effective_disk(pr.os_disk_size_gb),
        "osDiskType": "Managed",
        "kubeletDiskType": "OS",
        "maxPods": pr.max_pods,
        "type": "VirtualMachineScaleSets",
        "enableAutoScaling": pr.enable_auto_scaling,
        "scaleDownMode": pr.scale_down_mode,
        "scaleSetPriority": pr.scale_set_priority,
        "mode": pr.mode,
        "orchestratorVersion": pr.orchestrator_version,
        "currentOrchestratorVersion": pr.orchestrator_version,
        "nodeImageVersion": format!("AKSUbuntu-2204gen2containerd-202511.01.0"),
        "osType": pr.os_type,
        "osSKU": pr.os_sku,
        "enableFIPS": false,
        "enableNodePublicIP": false,
        "powerState": {"code": "Running"},
        "upgradeSettings": {"maxSurge": "10%"},
    });
    let o = props.as_object_mut().expect("object literal");
    if let Some(v) = pr.min_count {
        o.insert("minCount".into(), json!(v));
    }
    if let Some(v) = pr.max_count {
        o.insert("maxCount".into(), json!(v));
    }
    if !pr.node_taints.is_empty() {
        o.insert("nodeTaints".into(), json!(pr.node_taints));
    }
    if !pr.node_labels.is_empty() {
        o.insert("nodeLabels".into(), json!(pr.node_labels));
    }
    if let Some(v) = &pr.scale_set_eviction_policy {
        o.insert("scaleSetEvictionPolicy".into(), json!(v));
    }
    if let Some(v) = pr.spot_max_price {
        o.insert("spotMaxPrice".into(), json!(v));
    }
    if let Some(v) = &pr.gpu_instance_profile {
        o.insert("gpuInstanceProfile".into(), json!(v));
    }
    if let Some(v) = &pr.gpu_driver {
        o.insert("gpuProfile".into(), json!({"driver": v}));
    }
    if !pr.availability_zones.is_empty() {
        o.insert("availabilityZones".into(), json!(pr.availability_zones));
    }
    if !pr.tags.is_empty() {
        o.insert("tags".into(), json!(pr.tags));
    }
    json!({
        "id": format!("/subscriptions/{}/resourcegroups/{}/providers/Microsoft.ContainerService/managedClusters/{}/agentPools/{}", c.subscription, c.resource_group, c.name, p.name),
        "name": p.name,
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": props,
    })
}
