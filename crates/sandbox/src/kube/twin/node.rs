//! One node as the twin knows it: its hardware, where it came from (a cloud's pool, or GPU feature
//! discovery's labels on a node made through the API), and the device plugin state on it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::config_manager::{PluginInputs, Readers};
use super::labels::{GFD_COUNT, GFD_MEMORY, GFD_MIG_CAPABLE, GFD_PRODUCT};

/// One node's hardware and the device plugin state on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodeTwin {
    pub(crate) cloud: String,
    pub(crate) pool: String,
    pub(crate) gpu_product: Option<String>,
    pub(crate) gpus: u32,
    pub(crate) gpu_memory_mib: u64,
    pub(crate) mig_profile: Option<String>,
    pub(crate) mig_instances_per_gpu: u32,
    pub(crate) gke_sharing: Option<(String, u32)>,
    /// The labels the pool put on the node, to tell them from labels added through the API.
    pub(crate) pool_labels: BTreeMap<String, String>,
    pub(crate) loaded: PluginInputs,
    /// The node's nvidia.com/mig.config label when the plugin last started (the MIG manager restarts it).
    pub(crate) seen_mig_label: Option<String>,
    /// The device plugin is the OS's own host service (Bottlerocket), deaf to the GPU operator.
    #[serde(default)]
    pub(crate) host_device_plugin: bool,
    /// The user data the node booted with (decoded), where such an OS reads its settings.
    #[serde(default)]
    pub(crate) user_data: Option<String>,
    /// GPU feature discovery's `nvidia.com/mig.capable` label, when the node carries one (it wins over
    /// the product name).
    #[serde(default)]
    pub(crate) mig_capable: Option<bool>,
    /// The `nvidia.com/mig.config` the MIG manager failed to apply (see `mig_manager::mig_fails`).
    #[serde(default)]
    pub(crate) mig_refused: Option<String>,
    /// What the config-managers of the node's device plugin, GPU feature discovery and MPS control
    /// daemon pods linked and what their processes loaded (`config_manager.rs`).
    #[serde(default)]
    pub(crate) readers: Readers,
    /// The devices the node's kubelet handed the pods it admitted, by pod uid (`kubelet.rs`).
    #[serde(default)]
    pub(crate) held: BTreeMap<String, HeldPod>,
}

/// What one container of an admitted pod holds, as the kubelet's PodResources API lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ContainerDevices {
    pub(crate) container: String,
    pub(crate) resource: String,
    pub(crate) devices: Vec<String>,
}

/// An admitted pod's devices on its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HeldPod {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) containers: Vec<ContainerDevices>,
}

/// Whether a node of this OS image runs the NVIDIA device plugin as a host service.
pub(crate) fn host_device_plugin(os_image: Option<&str>) -> bool {
    os_image.is_some_and(|o| o.starts_with("Bottlerocket"))
}

/// A node's hardware learnt from GPU feature discovery's labels (set by hand on a node no kubelet runs
/// on, or by a real GFD): None when the node names no GPU product and count. `cloud` is the cluster's
/// (`gke` takes GKE's own sharing and partition labels, as GKE's device plugin does).
pub(crate) fn twin_from_labels(
    cloud: &str,
    labels: &BTreeMap<String, String>,
    os_image: Option<&str>,
) -> Option<NodeTwin> {
    let product = labels.get(GFD_PRODUCT).filter(|p| !p.is_empty())?;
    let gpus: u32 = labels.get(GFD_COUNT)?.parse().ok()?;
    let gke = cloud == "gke";
    // GKE's node labels (cloud.google.com/docs "About GPU sharing strategies", "Running multi-instance
    // GPUs"): the sharing strategy and clients per GPU, and the partition size.
    let gke_sharing = labels
        .get("cloud.google.com/gke-gpu-sharing-strategy")
        .filter(|_| gke)
        .map(|s| {
            let clients = labels
                .get("cloud.google.com/gke-max-shared-clients-per-gpu")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let s = if s == "mps" { "MPS" } else { "TIME_SHARING" };
            (s.to_string(), clients)
        });
    let mig_profile = labels
        .get("cloud.google.com/gke-gpu-partition-size")
        .filter(|_| gke)
        .cloned();
    Some(NodeTwin {
        cloud: cloud.to_string(),
        pool: String::new(),
        gpu_product: Some(product.clone()),
        gpus,
        gpu_memory_mib: labels
            .get(GFD_MEMORY)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0),
        mig_profile,
        mig_instances_per_gpu: 0,
        gke_sharing,
        pool_labels: BTreeMap::new(),
        loaded: PluginInputs::default(),
        seen_mig_label: None,
        mig_refused: None,
        host_device_plugin: host_device_plugin(os_image),
        user_data: None,
        mig_capable: labels.get(GFD_MIG_CAPABLE).map(|v| v == "true"),
        readers: Readers::default(),
        held: BTreeMap::new(),
    })
}
