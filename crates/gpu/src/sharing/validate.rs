//! A pool in, its facts out. `validate` is the one entry point the provider calls for a node pool: it runs
//! every check, so a plan shows all problems at once, and on success assembles [`Derived`], which the cloud
//! layer, the data sources and the workload fit all read.

use std::collections::BTreeMap;

use super::Taint;
use super::derived::{Derived, GkeAccelerator};
use super::labels::{DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, SHARING_LABEL};
use super::mode_facts::{ModeFacts, check_mode, mig_config_name};
use super::plugin_config::{own_config, pool_config_name};
use super::rules::check_pool_name;
use super::spec::PoolSpec;
use super::taints::{check_unique, default_taints, node_taints};
use crate::catalog::{Cloud, all_gpu_models};
use crate::error::{DomainError, Field, list, summary};

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
    errors.extend(taints.iter().filter_map(blank_key));

    // Labels and selectors follow from the mode, so a broken mode ends here; the problems found so far
    // (name, taints, mode) are all reported.
    let Some(mut mode) = check_mode(spec, &mut errors) else {
        return Err(errors);
    };

    let Placement {
        node_selector,
        node_labels,
    } = placement(spec, &mut mode);
    errors.extend(label_conflicts(spec, &node_labels));
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

fn blank_key(t: &Taint) -> Option<DomainError> {
    (t.key.trim().is_empty() || t.key.contains(char::is_whitespace)).then(|| {
        DomainError::new(
            Field::Taints,
            summary::INVALID_TAINT,
            format!(
                "The taint \"{t}\" has an empty or blank key. Give every taint a key, e.g. \
                nvidia.com/gpu."
            ),
        )
    })
}

/// Where a pool's pods go: the labels that select its nodes, and the labels the provider puts on
/// them.
struct Placement {
    node_selector: BTreeMap<String, String>,
    node_labels: BTreeMap<String, String>,
}

/// The pool's selector and node labels on its cloud. A device plugin config of the pool's own
/// gets the pool's name here (`mode` keeps that name).
fn placement(spec: &PoolSpec, mode: &mut ModeFacts) -> Placement {
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
            if let Some(named) = &mut mode.device_plugin_config {
                // A config of the pool's own is selected by the pool's name, the settings' name
                // kept in a label of its own (see `pool_config_name`).
                if own_config(&mode.sharing) {
                    node_labels.insert(SHARING_LABEL.to_string(), named.name.clone());
                    named.name = pool_config_name(&spec.pool_name);
                }
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
    Placement {
        node_selector,
        node_labels,
    }
}

/// The user's labels that contradict the ones the pool's sharing needs.
fn label_conflicts<'a>(
    spec: &'a PoolSpec,
    node_labels: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = DomainError> + 'a {
    spec.labels.iter().filter_map(move |(key, value)| {
        let ours = node_labels.get(key).filter(|ours| *ours != value)?;
        Some(DomainError::new(
            Field::Labels,
            summary::CONFLICTING_LABEL,
            format!(
                "The label {key}={value} conflicts with the {key}={ours} this pool's sharing needs. \
                 Remove it from labels: the provider sets it."
            ),
        ))
    })
}
