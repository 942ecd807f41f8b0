//! The limits each cloud and the NVIDIA device plugin put on a pool: replica counts, MPS client caps, which
//! MIG profiles each cloud can create, pool names, the AKS OS image. Each check says what is wrong and what
//! to write instead, because these errors are what a user sees at plan time.

use super::{GkeSharingStrategy, MigStrategy, PoolSpec, SharingMode};
use crate::catalog::{Cloud, GpuModel, MigProfile, all_gpu_models, all_machine_types};
use crate::error::{DomainError, Field, list, summary};

/// Fewest and most clients per GPU we accept for time-slicing, MPS and GKE sharing. 48 is GKE's and MPS's
/// limit; the NVIDIA plugin has none for time-slicing, but past 48 a slice is a sliver of memory.
pub const MIN_REPLICAS: u32 = 2;
pub const MAX_REPLICAS: u32 = 48;
/// MPS allows only 16 clients per GPU below this compute capability.
const MPS_FULL_CLIENTS_MIN_CC: (u8, u8) = (7, 5);
const MPS_MAX_CLIENTS_LOW_CC: u32 = 16;

pub(super) fn check_mig_profile(
    spec: &PoolSpec,
    profile: &str,
    errors: &mut Vec<DomainError>,
) -> Option<&'static MigProfile> {
    let gpu = spec.hardware.gpu;
    let cloud = spec.cloud;
    if !gpu.mig_capable() {
        errors.push(no_mig(spec));
        return None;
    }
    let allowed_text = allowed_profiles(gpu, cloud);
    let Some(found) = gpu.mig_profile(profile) else {
        errors.push(not_a_profile(spec, profile, &allowed_text));
        return None;
    };
    if let Some(why) = cloud_refusal(gpu, cloud, found) {
        errors.push(DomainError::new(
            Field::MigProfile,
            summary::INVALID_MIG_PROFILE,
            format!(
                "{why} Valid values on {} for the {}: {allowed_text}.",
                cloud.title(),
                gpu.id
            ),
        ));
        return None;
    }
    Some(found)
}

/// A MIG profile asked of a machine type whose GPUs have no MIG, naming the cloud's that do.
fn no_mig(spec: &PoolSpec) -> DomainError {
    let capable: Vec<&str> = all_machine_types()
        .iter()
        .filter(|mt| mt.cloud == spec.cloud && mt.gpu.mig_capable())
        .map(|mt| mt.name)
        .collect();
    DomainError::new(
        Field::MigProfile,
        summary::MIG_NOT_SUPPORTED,
        format!(
            "{} carries {} GPUs, which have no MIG. Use time_slicing or mps on this machine type, or a \
             MIG-capable one: {}.",
            spec.hardware.machine_type,
            spec.hardware.gpu.id,
            list(capable)
        ),
    )
}

/// The profiles of `gpu` the cloud can create, as an error lists them (AKS's with the
/// gpuInstanceProfile each is).
fn allowed_profiles(gpu: &GpuModel, cloud: Cloud) -> String {
    let allowed: Vec<&'static MigProfile> = gpu
        .mig_profiles
        .iter()
        .filter(|p| match cloud {
            Cloud::Aks => p.aks.is_some(),
            Cloud::Gke => p.gke,
            Cloud::Eks => true,
        })
        .collect();
    match cloud {
        Cloud::Aks => list(
            allowed
                .iter()
                .map(|p| format!("{} ({})", p.name, p.aks.map_or("", |a| a.as_str()))),
        ),
        _ => list(allowed.iter().map(|p| p.name)),
    }
}

/// A profile the pool's GPU does not have, naming the GPUs that have it.
fn not_a_profile(spec: &PoolSpec, profile: &str, allowed_text: &str) -> DomainError {
    let owners: Vec<&str> = all_gpu_models()
        .iter()
        .filter(|g| g.mig_profile(profile).is_some())
        .map(|g| g.id)
        .collect();
    let whose = if owners.is_empty() {
        String::new()
    } else {
        format!(" It is a profile of the {}.", list(owners))
    };
    DomainError::new(
        Field::MigProfile,
        summary::INVALID_MIG_PROFILE,
        format!(
            "\"{profile}\" is not a MIG profile of the {} on {}.{whose} Valid values: \
                {allowed_text}.",
            spec.hardware.gpu.id, spec.hardware.machine_type
        ),
    )
}

/// Why the cloud cannot create a profile the GPU has, if it cannot.
fn cloud_refusal(gpu: &GpuModel, cloud: Cloud, found: &MigProfile) -> Option<String> {
    match cloud {
        Cloud::Aks if found.aks.is_none() => Some(format!(
            "AKS can create only the profiles its gpuInstanceProfile (MIG1g to MIG7g) names{}; \"{}\" is not \
             one of them.",
            if found.has_media_extensions() {
                ", never a +me profile"
            } else {
                ""
            },
            found.name
        )),
        Cloud::Gke if !found.gke => Some(format!(
            "GKE does not accept \"{}\" as gpu_partition_size for {}{}.",
            found.name,
            gpu.gke_accelerator.unwrap_or(gpu.id),
            if found.has_media_extensions() {
                " (no +me profile is)"
            } else {
                ""
            }
        )),
        _ => None,
    }
}

/// `cloud` is `None` when the caller knows no cloud (the config function), and then the text names both.
pub(super) fn mig_sharing_off_gke(
    cloud: Option<Cloud>,
    strategy: MigStrategy,
    sharing: GkeSharingStrategy,
) -> DomainError {
    let where_ = cloud.map_or("AKS and EKS", Cloud::title);
    let detail = match (sharing, strategy) {
        (GkeSharingStrategy::Mps, MigStrategy::Mixed) => format!(
            "MPS cannot be combined with MIG strategy mixed: the NVIDIA device plugin, which shares GPUs on \
             {}, runs MPS on full GPUs only and refuses it with migStrategy mixed. Drop gke_sharing, or use \
             mps without MIG.",
            where_
        ),
        (GkeSharingStrategy::Mps, MigStrategy::Single) => format!(
            "MPS does not run on MIG devices with the NVIDIA device plugin, which shares GPUs on {}. Drop \
             gke_sharing, or use mps without MIG.",
            where_
        ),
        (GkeSharingStrategy::TimeSharing, _) => format!(
            "Sharing on top of MIG partitions (gke_sharing) is GKE's feature; on {} drop gke_sharing, or use \
             time_slicing on whole GPUs.",
            where_
        ),
    };
    DomainError::new(Field::MigGkeSharing, summary::INVALID_SHARING, detail)
}

pub(super) fn check_replicas(
    replicas: u32,
    field: Field,
    name: &str,
    errors: &mut Vec<DomainError>,
) {
    if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&replicas) {
        errors.push(DomainError::new(
            field,
            summary::INVALID_REPLICAS,
            format!(
                "{name} is {replicas}; use {MIN_REPLICAS} to {MAX_REPLICAS} clients per GPU (fewer than 2 \
                 is no sharing; 48 is the most GKE and MPS allow)."
            ),
        ));
    }
}

pub(super) fn check_mps_clients(
    gpu: &GpuModel,
    clients: u32,
    field: Field,
    name: &str,
    errors: &mut Vec<DomainError>,
) {
    if gpu.compute_capability < MPS_FULL_CLIENTS_MIN_CC && clients > MPS_MAX_CLIENTS_LOW_CC {
        errors.push(DomainError::new(
            field,
            summary::INVALID_REPLICAS,
            format!(
                "{name} is {clients}, but MPS allows at most {MPS_MAX_CLIENTS_LOW_CC} clients per GPU below \
                 compute capability {}.{} and the {} has {}. Use {MIN_REPLICAS} to {MPS_MAX_CLIENTS_LOW_CC}.",
                MPS_FULL_CLIENTS_MIN_CC.0,
                MPS_FULL_CLIENTS_MIN_CC.1,
                gpu.id,
                gpu.compute_capability_string()
            ),
        ));
    }
}

/// Pool name rules of each cloud's API, checked here because the name also becomes a node selector value.
pub(super) fn check_pool_name(cloud: Cloud, name: &str) -> Result<(), DomainError> {
    let b = name.as_bytes();
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let (ok, rule) = match cloud {
        Cloud::Aks => (
            (1..=12).contains(&b.len()) && b[0].is_ascii_lowercase() && b.iter().all(lower_alnum),
            "AKS pool names are 1 to 12 lowercase letters and digits, starting with a letter",
        ),
        Cloud::Gke => (
            (1..=40).contains(&b.len())
                && b[0].is_ascii_lowercase()
                && b.last().is_some_and(lower_alnum)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-'),
            "GKE node pool names are 1 to 40 lowercase letters, digits and '-', starting with a letter and \
             ending with a letter or digit",
        ),
        Cloud::Eks => (
            (1..=63).contains(&b.len())
                && b[0].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_'),
            "EKS node group names are 1 to 63 letters, digits, '-' and '_', starting with a letter \
                or digit",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(DomainError::new(
            Field::PoolName,
            summary::INVALID_POOL_NAME,
            format!("\"{name}\" is not a valid pool name: {rule}."),
        ))
    }
}

/// Bottlerocket's NVIDIA variants run the NVIDIA device plugin as a host service configured by the
/// OS's own settings (`settings.kubelet-device-plugins.nvidia`, see [`crate::bottlerocket`]), not by
/// the GPU operator: a pool on them shares its GPUs through those settings, which take MIG with the
/// device plugin's `single` strategy only (bottlerocket-os/bottlerocket#4483).
pub fn check_eks_ami_type(sharing: &SharingMode, ami_type: &str) -> Result<(), DomainError> {
    match sharing {
        SharingMode::Mig {
            strategy: MigStrategy::Mixed,
            ..
        } if ami_type.starts_with("BOTTLEROCKET") => {
            let instead = if ami_type.contains("ARM_64") {
                "AL2023_ARM_64_NVIDIA"
            } else {
                "AL2023_x86_64_NVIDIA"
            };
            Err(DomainError::new(
                Field::MigStrategy,
                summary::MIG_STRATEGY_NOT_ON_BOTTLEROCKET,
                format!(
                    "On {ami_type} the NVIDIA device plugin is a Bottlerocket host service whose \
                    settings partition GPUs with the `single` MIG strategy only. Set \
                    mig.strategy = \"single\" (pods then request nvidia.com/gpu), or use \
                    ami_type = \"{instead}\", where the GPU operator's device plugin supports \
                    `mixed`."
                ),
            ))
        }
        _ if ami_type.starts_with("BOTTLEROCKET") => crate::bottlerocket::check_sharing(sharing),
        _ => Ok(()),
    }
}

/// MIG is not supported on Azure Linux node images, so an AKS MIG pool must run Ubuntu.
pub fn check_aks_os_sku(sharing: &SharingMode, os_sku: &str) -> Result<(), DomainError> {
    let sku = os_sku.trim().to_ascii_lowercase();
    let azure_linux = sku.starts_with("azurelinux") || sku == "cblmariner" || sku == "mariner";
    if matches!(sharing, SharingMode::Mig { .. }) && azure_linux {
        return Err(DomainError::new(
            Field::OsSku,
            summary::INVALID_OS_SKU,
            format!(
                "AKS does not support MIG on Azure Linux node images (os_sku \"{os_sku}\"). Use an Ubuntu \
                 os_sku (Ubuntu, Ubuntu2204, Ubuntu2404) for a MIG pool, or share with time_slicing or mps."
            ),
        ));
    }
    Ok(())
}
