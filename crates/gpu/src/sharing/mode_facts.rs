//! What each sharing mode gives a pod on a given pool: the resource it requests, how many units a GPU
//! offers, the memory of one unit, and how well units are isolated. The per-mode checks run here too,
//! because a mode's facts can only be worked out once it is known to be valid (a MIG profile must exist
//! before its instance count means anything).

use super::rules::{check_mig_profile, check_mps_clients, check_replicas, mig_sharing_off_gke};
use super::{
    GkeSharing, GkeSharingStrategy, Isolation, MigStrategy, NamedConfig, PoolSpec, SharingMode,
    device_plugin_config,
};
use crate::catalog::{Cloud, MigProfile};
use crate::device_plugin::GPU_RESOURCE;
use crate::error::{DomainError, Field, summary};

/// The per-mode part of a valid pool.
pub(super) struct ModeFacts {
    pub(super) sharing: SharingMode,
    pub(super) mig_profile: Option<&'static MigProfile>,
    pub(super) resource_name: String,
    pub(super) slices_per_gpu: u32,
    pub(super) memory_per_slice_mib: u32,
    pub(super) isolation: Isolation,
    pub(super) gke_sharing: Option<GkeSharing>,
    pub(super) device_plugin_config: Option<NamedConfig>,
}

pub(super) fn check_mode(spec: &PoolSpec, errors: &mut Vec<DomainError>) -> Option<ModeFacts> {
    let gpu = spec.hardware.gpu;
    let nvidia_plugin = spec.cloud != Cloud::Gke;
    let before = errors.len();
    let facts = match &spec.sharing {
        SharingMode::None => ModeFacts {
            sharing: SharingMode::None,
            mig_profile: None,
            resource_name: GPU_RESOURCE.to_string(),
            slices_per_gpu: 1,
            memory_per_slice_mib: gpu.memory_mib,
            isolation: Isolation::WholeGpu,
            gke_sharing: None,
            device_plugin_config: None,
        },
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default,
            ..
        } => time_slicing(spec, *replicas, *rename_by_default, errors),
        SharingMode::Mps {
            replicas,
            fail_requests_greater_than_one,
        } => mps(spec, *replicas, *fail_requests_greater_than_one, errors),
        SharingMode::Mig {
            profile,
            strategy,
            gke_sharing,
        } => mig(spec, profile, *strategy, *gke_sharing, errors)?,
    };
    if errors.len() > before {
        return None;
    }
    let device_plugin_config = if nvidia_plugin {
        match device_plugin_config(&facts.sharing) {
            Ok(named) => Some(named),
            Err(e) => {
                errors.push(e);
                return None;
            }
        }
    } else {
        None
    };
    Some(ModeFacts {
        device_plugin_config,
        ..facts
    })
}

fn time_slicing(
    spec: &PoolSpec,
    replicas: u32,
    rename_by_default: bool,
    errors: &mut Vec<DomainError>,
) -> ModeFacts {
    let cloud = spec.cloud;
    check_replicas(
        replicas,
        Field::TimeSlicingReplicas,
        "time_slicing.replicas",
        errors,
    );
    if cloud == Cloud::Gke && rename_by_default {
        errors.push(DomainError::new(
            Field::TimeSlicingRenameByDefault,
            summary::INVALID_SHARING,
            "GKE's time-sharing always advertises nvidia.com/gpu; rename_by_default works only with \
             the NVIDIA device plugin on AKS and EKS. Set rename_by_default = false on GKE.",
        ));
    }
    let resource_name = if cloud != Cloud::Gke && rename_by_default {
        format!("{GPU_RESOURCE}.shared")
    } else {
        GPU_RESOURCE.to_string()
    };
    ModeFacts {
        sharing: spec.sharing.clone(),
        mig_profile: None,
        resource_name,
        slices_per_gpu: replicas,
        memory_per_slice_mib: per_slice(spec.hardware.gpu.memory_mib, replicas),
        isolation: Isolation::None,
        gke_sharing: (cloud == Cloud::Gke).then_some(GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: replicas,
        }),
        device_plugin_config: None,
    }
}

fn mps(spec: &PoolSpec, replicas: u32, fail: bool, errors: &mut Vec<DomainError>) -> ModeFacts {
    let gpu = spec.hardware.gpu;
    check_replicas(replicas, Field::MpsReplicas, "mps.replicas", errors);
    check_mps_clients(gpu, replicas, Field::MpsReplicas, "mps.replicas", errors);
    if spec.cloud == Cloud::Gke && !fail {
        errors.push(DomainError::new(
            Field::MpsFailRequestsGreaterThanOne,
            summary::INVALID_SHARING,
            "GKE's MPS sharing gives each container at most one shared GPU (its device plugin \
             is GKE's own, not NVIDIA's), so fail_requests_greater_than_one = false works only \
             with the NVIDIA device plugin on AKS and EKS. Remove it on GKE.",
        ));
    }
    ModeFacts {
        sharing: spec.sharing.clone(),
        mig_profile: None,
        resource_name: GPU_RESOURCE.to_string(),
        slices_per_gpu: replicas,
        memory_per_slice_mib: per_slice(gpu.memory_mib, replicas),
        isolation: Isolation::MemoryLimit,
        gke_sharing: (spec.cloud == Cloud::Gke).then_some(GkeSharing {
            strategy: GkeSharingStrategy::Mps,
            max_clients: replicas,
        }),
        device_plugin_config: None,
    }
}

/// None when the profile is not one of the GPU's (the error is in `errors` then).
fn mig(
    spec: &PoolSpec,
    profile: &str,
    strategy: MigStrategy,
    gke_sharing: Option<GkeSharing>,
    errors: &mut Vec<DomainError>,
) -> Option<ModeFacts> {
    let cloud = spec.cloud;
    let found = check_mig_profile(spec, profile, errors);
    if let Some(sharing) = gke_sharing {
        check_mig_sharing(cloud, strategy, sharing, errors);
    }
    let found = found?;
    let clients = gke_sharing.map_or(1, |s| s.max_clients);
    let resource_name = match (cloud, strategy) {
        (Cloud::Gke, _) | (_, MigStrategy::Single) => GPU_RESOURCE.to_string(),
        (_, MigStrategy::Mixed) => mig_resource_name(found),
    };
    Some(ModeFacts {
        sharing: SharingMode::Mig {
            profile: found.name.to_string(),
            strategy,
            gke_sharing,
        },
        mig_profile: Some(found),
        resource_name,
        slices_per_gpu: found.max_instances.saturating_mul(clients),
        memory_per_slice_mib: per_slice(found.memory_mib, clients),
        isolation: match gke_sharing.map(|s| s.strategy) {
            None => Isolation::Hardware,
            Some(GkeSharingStrategy::Mps) => Isolation::MemoryLimit,
            Some(GkeSharingStrategy::TimeSharing) => Isolation::None,
        },
        gke_sharing,
        device_plugin_config: None,
    })
}

/// GKE's sharing of MIG partitions: GKE's own, and time-sharing only.
fn check_mig_sharing(
    cloud: Cloud,
    strategy: MigStrategy,
    sharing: GkeSharing,
    errors: &mut Vec<DomainError>,
) {
    if cloud != Cloud::Gke {
        errors.push(mig_sharing_off_gke(Some(cloud), strategy, sharing.strategy));
        return;
    }
    check_replicas(
        sharing.max_clients,
        Field::MigGkeMaxClients,
        "mig.gke_sharing.max_clients",
        errors,
    );
    // MPS runs on whole GPUs only (NVIDIA's MPS and GKE's MPS guide alike); GKE
    // refuses it on partitions, while time-sharing of partitions is supported.
    if sharing.strategy == GkeSharingStrategy::Mps {
        errors.push(DomainError::new(
            Field::MigGkeSharing,
            summary::INVALID_SHARING,
            "GKE cannot run MPS on MIG partitions: MPS shares whole GPUs only. Use \
             gke_sharing strategy \"time-sharing\" on the partitions, or mps \
                 without mig.",
        ));
    }
}

fn per_slice(memory_mib: u32, slices: u32) -> u32 {
    memory_mib.checked_div(slices).unwrap_or(0)
}

/// `nvidia.com/mig-<profile>` as the NVIDIA plugin names a mixed-strategy MIG resource
/// (`nvidia.com/mig-1g.5gb.me`).
fn mig_resource_name(profile: &MigProfile) -> String {
    format!("nvidia.com/mig-{}", dotted(profile))
}

/// The MIG manager config that partitions every GPU of a node into one profile (`all-1g.5gb`).
pub(super) fn mig_config_name(profile: &MigProfile) -> String {
    format!("all-{}", dotted(profile))
}

/// A profile name as resource names and label values can hold it: neither takes '+', so the NVIDIA
/// plugin and the MIG manager both write a `+me` profile with '.' (`1g.5gb.me`).
pub(crate) fn dotted(profile: &MigProfile) -> String {
    profile.name.replace('+', ".")
}
