//! The facts that follow from a valid pool, as `validate` gives them back. Apart from `validate`
//! because `mode_facts`, which `validate` calls, works out part of them (the isolation).

use std::collections::BTreeMap;

use super::labels::{DEVICE_PLUGIN_CONFIG_LABEL, SHARING_LABEL};
use super::{GkeSharing, NamedConfig, SharingMode, Taint, Toleration};
use crate::catalog::{AksGpuInstanceProfile, Cloud, GpuModel, MigProfile};
use crate::device_plugin::GPU_RESOURCE;

/// What GKE's node pool accelerator block must say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GkeAccelerator {
    pub accelerator_type: &'static str,
    pub accelerator_count: u32,
    pub gpu_partition_size: Option<&'static str>,
    pub sharing: Option<GkeSharing>,
}

/// How well a workload on the pool is walled off from its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// A whole GPU per request.
    WholeGpu,
    /// MIG: separate compute and memory in hardware.
    Hardware,
    /// MPS: memory capped per client, faults shared.
    MemoryLimit,
    /// Time-slicing: nothing; each workload must keep to its share by itself.
    None,
}

/// The facts that follow from a valid pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub cloud: Cloud,
    pub gpu: &'static GpuModel,
    pub gpus_per_node: u32,
    /// The sharing mode with the MIG profile spelled as the catalog spells it.
    pub sharing: SharingMode,
    /// The MIG profile, for MIG pools.
    pub mig_profile: Option<&'static MigProfile>,
    /// The extended resource pods request.
    pub resource_name: String,
    /// Schedulable units per GPU: 1, the replicas, the MIG instances, or instances x GKE clients.
    pub slices_per_gpu: u32,
    pub slices_per_node: u32,
    /// Memory of one unit (MiB, floor).
    pub memory_per_slice_mib: u32,
    pub isolation: Isolation,
    /// Selects the pool's nodes.
    pub node_selector: BTreeMap<String, String>,
    /// The pool's taints (the default when the user named none). On GKE this may include GKE's own GPU
    /// taint, which the cloud layer never sends: GKE puts it on the nodes itself.
    pub taints: Vec<Taint>,
    /// What a pod needs to tolerate those taints.
    pub tolerations: Vec<Toleration>,
    /// Labels the provider must set on the pool's nodes (beside the user's own).
    pub node_labels: BTreeMap<String, String>,
    /// The NVIDIA device plugin config the nodes select (AKS and EKS; GKE's own plugin reads none).
    pub device_plugin_config: Option<NamedConfig>,
    /// AKS's `gpuInstanceProfile`, for MIG pools on AKS.
    pub aks_gpu_instance_profile: Option<AksGpuInstanceProfile>,
    /// GKE's accelerator block, for pools on GKE.
    pub gke_accelerator: Option<GkeAccelerator>,
}

impl Derived {
    /// The extended resources one node of the pool offers once its device plugin runs, as an
    /// autoscaler must be told before the node exists (scale from zero): the pool's resource,
    /// `slices_per_node` of it, and no whole `nvidia.com/gpu` where sharing renames the resource
    /// (time-slicing or MPS with `renameByDefault`, MIG `mixed`): the device plugin then
    /// advertises none, while an autoscaler's default counts the machine's physical GPUs as
    /// `nvidia.com/gpu`.
    pub fn node_resources(&self) -> BTreeMap<String, u32> {
        let mut r = BTreeMap::from([(self.resource_name.clone(), self.slices_per_node)]);
        r.entry(GPU_RESOURCE.to_string()).or_insert(0);
        r
    }

    /// Keeps the config name a pool made before configs were named after their pool
    /// (`time-sliced-10`) while its settings are still the ones that name says: the nodes keep
    /// their label and nothing about the pool changes. Once the settings change, the pool takes
    /// its own name (`pool_config_name`). True when the name was kept.
    pub fn keep_config_name(&mut self, name: &str) -> bool {
        let Some(config) = self.device_plugin_config.as_mut() else {
            return false;
        };
        if self.node_labels.get(SHARING_LABEL).map(String::as_str) != Some(name) {
            return false;
        }
        config.name = name.to_string();
        self.node_labels.remove(SHARING_LABEL);
        for m in [&mut self.node_labels, &mut self.node_selector] {
            if let Some(v) = m.get_mut(DEVICE_PLUGIN_CONFIG_LABEL) {
                *v = name.to_string();
            }
        }
        true
    }
}
