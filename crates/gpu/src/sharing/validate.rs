//! A pool in, its facts out. `validate` is the one entry point the provider calls for a node pool: it runs
//! every check, so a plan shows all problems at once, and on success assembles [`Derived`], which the cloud
//! layer, the data sources and the workload fit all read.

use std::collections::BTreeMap;

use super::mode_facts::{check_mode, mig_config_name};
use super::rules::check_pool_name;
use super::taints::{check_unique, default_taints, node_taints};
use super::{
    DEVICE_PLUGIN_CONFIG_LABEL, GkeSharing, MIG_CONFIG_LABEL, NamedConfig, SharingMode, Taint,
    Toleration,
};
use crate::catalog::{
    AksGpuInstanceProfile, Cloud, GpuModel, Hardware, MigProfile, all_gpu_models,
};
use crate::error::{DomainError, Field, list, summary};

/// A GPU node pool as the user declares it, with its hardware already resolved
/// ([`crate::resolve_hardware`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub cloud: Cloud,
    pub pool_name: String,
    pub hardware: Hardware,
    pub sharing: SharingMode,
    /// `None` gives the pool the default GPU taint: `nvidia.com/gpu=Present:NoSchedule` on AKS and EKS,
    /// GKE's own `nvidia.com/gpu=present:NoSchedule` on GKE; `Some(vec![])` means no taint of the pool's
    /// (GKE's own GPU taint stays on GKE nodes whatever the pool says).
    pub taints: Option<Vec<Taint>>,
    /// The user's own node labels.
    pub labels: BTreeMap<String, String>,
}

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

/// Validates a pool, collecting every problem, and derives its placement facts.
pub fn validate(spec: &PoolSpec) -> Result<Derived, Vec<DomainError>> {
    let mut errors = Vec::new();
    let gpu = spec.hardware.gpu;
    let gpus = spec.hardware.gpus_per_node;

    if let Err(e) = check_pool_name(spec.cloud, &spec.pool_name) {
        errors.push(e);
    }
    if spec.cloud == Cloud::Gke && gpu.gke_accelerator.is_none() {
        errors.push(DomainError::new(
            Field::GpuModel,
            summary::UNKNOWN_GPU_MODEL,
            format!(
                "GKE offers no {} accelerator. GPUs GKE offers: {}.",
                gpu.id,
                list(all_gpu_models().iter().filter_map(|g| g.gke_accelerator))
            ),
        ));
    }
    let taints = spec
        .taints
        .clone()
        .unwrap_or_else(|| default_taints(spec.cloud));
    errors.extend(check_unique(spec.cloud, &taints));
    for t in &taints {
        if t.key.trim().is_empty() || t.key.contains(char::is_whitespace) {
            errors.push(DomainError::new(
                Field::Taints,
                summary::INVALID_TAINT,
                format!("The taint \"{t}\" has an empty or blank key. Give every taint a key, e.g. nvidia.com/gpu."),
            ));
        }
    }

    // Labels and selectors follow from the mode, so a broken mode ends here; the problems found so far
    // (name, taints, mode) are all reported.
    let Some(mode) = check_mode(spec, &mut errors) else {
        return Err(errors);
    };

    let mut node_selector = BTreeMap::new();
    let mut node_labels = BTreeMap::new();
    let pool = spec.pool_name.clone();
    match spec.cloud {
        Cloud::Gke => {
            node_selector.insert("cloud.google.com/gke-nodepool".to_string(), pool);
            if let Some(sharing) = mode.gke_sharing {
                node_selector.insert(
                    "cloud.google.com/gke-gpu-sharing-strategy".to_string(),
                    sharing.strategy.label_value().to_string(),
                );
                node_selector.insert(
                    "cloud.google.com/gke-max-shared-clients-per-gpu".to_string(),
                    sharing.max_clients.to_string(),
                );
            }
            if let Some(profile) = mode.mig_profile {
                node_selector.insert(
                    "cloud.google.com/gke-gpu-partition-size".to_string(),
                    profile.name.to_string(),
                );
            }
        }
        Cloud::Aks | Cloud::Eks => {
            let pool_key = if spec.cloud == Cloud::Aks {
                "agentpool"
            } else {
                "eks.amazonaws.com/nodegroup"
            };
            node_selector.insert(pool_key.to_string(), pool);
            if let Some(named) = &mode.device_plugin_config {
                node_selector.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_string(), named.name.clone());
                node_labels.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_string(), named.name.clone());
            }
            // EKS has no node-group MIG field: the GPU operator's MIG manager partitions the GPUs when it
            // sees this label.
            if spec.cloud == Cloud::Eks
                && let Some(profile) = mode.mig_profile
            {
                node_selector.insert(MIG_CONFIG_LABEL.to_string(), mig_config_name(profile));
            }
        }
    }
    // Every MIG pool's nodes name their MIG config. On EKS that is what partitions the GPUs. On AKS
    // and GKE the cloud partitions them at the pool, but the GPU operator (NVIDIA/gpu-operator
    // controllers/nodelabeling_controller.go) labels a MIG-capable node that names none
    // `all-disabled`, as the chart's MIG manager default says, and its MIG manager would then turn
    // MIG off: the label keeps the geometry the cloud made.
    if let Some(profile) = mode.mig_profile {
        node_labels.insert(MIG_CONFIG_LABEL.to_string(), mig_config_name(profile));
    }

    for (key, value) in &spec.labels {
        if let Some(ours) = node_labels.get(key)
            && ours != value
        {
            errors.push(DomainError::new(
                Field::Labels,
                summary::CONFLICTING_LABEL,
                format!(
                    "The label {key}={value} conflicts with the {key}={ours} this pool's sharing needs. \
                     Remove it from labels: the provider sets it."
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let slices_per_node = mode.slices_per_gpu.saturating_mul(gpus);
    Ok(Derived {
        cloud: spec.cloud,
        gpu,
        gpus_per_node: gpus,
        sharing: mode.sharing,
        mig_profile: mode.mig_profile,
        resource_name: mode.resource_name,
        slices_per_gpu: mode.slices_per_gpu,
        slices_per_node,
        memory_per_slice_mib: mode.memory_per_slice_mib,
        isolation: mode.isolation,
        node_selector,
        // GKE's own GPU taint is on GKE nodes whatever the pool lists: pods must tolerate it too.
        tolerations: node_taints(spec.cloud, &taints)
            .iter()
            .map(Taint::toleration)
            .collect(),
        taints,
        node_labels,
        device_plugin_config: mode.device_plugin_config,
        aks_gpu_instance_profile: mode
            .mig_profile
            .and_then(|p| p.aks)
            .filter(|_| spec.cloud == Cloud::Aks),
        gke_accelerator: gpu
            .gke_accelerator
            .filter(|_| spec.cloud == Cloud::Gke)
            .map(|accelerator_type| GkeAccelerator {
                accelerator_type,
                accelerator_count: gpus,
                gpu_partition_size: mode.mig_profile.map(|p| p.name),
                sharing: mode.gke_sharing,
            }),
    })
}
