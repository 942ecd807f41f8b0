//! A GPU model or a machine type by the name a user wrote. Most of the care goes into the miss, because a
//! typo should be fixable from the message alone: the error names the closest known names, says when the
//! name belongs to another cloud, and explains GCP's n1 types, which have no GPU of their own.

use super::machines::MACHINE_TYPES;
use super::models::GPUS;
use super::suggest::closest;
use super::{Cloud, GpuModel, MachineType};
use crate::error::{DomainError, Field, list, summary};

/// Every GPU model of the catalog.
pub fn all_gpu_models() -> &'static [&'static GpuModel] {
    &GPUS
}

/// Every machine type of the catalog, grouped by cloud (AKS, GKE, EKS) in catalog order.
pub(crate) fn all_machine_types() -> &'static [MachineType] {
    MACHINE_TYPES
}

/// The machine types of one cloud, in catalog order: what a provisioner that picks the machine
/// itself (Karpenter, AKS node auto-provisioning) may choose from.
pub fn machine_types_of(cloud: Cloud) -> impl Iterator<Item = &'static MachineType> {
    MACHINE_TYPES.iter().filter(move |mt| mt.cloud == cloud)
}

/// A GPU model by our id (`A100-40GB`) or GKE accelerator name (`nvidia-tesla-a100`), case-insensitive.
pub fn gpu_model(id: &str) -> Result<&'static GpuModel, DomainError> {
    let wanted = id.trim();
    GPUS.iter()
        .copied()
        .find(|g| {
            g.id.eq_ignore_ascii_case(wanted)
                || g.gke_accelerator
                    .is_some_and(|a| a.eq_ignore_ascii_case(wanted))
        })
        .ok_or_else(|| {
            let names = GPUS
                .iter()
                .flat_map(|g| std::iter::once(g.id).chain(g.gke_accelerator));
            DomainError::new(
                Field::GpuModel,
                summary::UNKNOWN_GPU_MODEL,
                format!(
                    "\"{id}\" is not a GPU model in the catalog. Closest: {}. Valid values: {}.",
                    list(closest(wanted, names.clone(), 3)),
                    list(GPUS.iter().map(|g| g.id))
                ),
            )
        })
}

/// A machine type of one cloud by name. Matching ignores case (ARM treats VM sizes case-insensitively);
/// an unknown name is an error naming the closest known names of that cloud.
pub fn machine_type(cloud: Cloud, name: &str) -> Result<&'static MachineType, DomainError> {
    let wanted = name.trim();
    if let Some(found) = MACHINE_TYPES
        .iter()
        .find(|mt| mt.cloud == cloud && mt.name.eq_ignore_ascii_case(wanted))
    {
        return Ok(found);
    }
    let names = MACHINE_TYPES
        .iter()
        .filter(|mt| mt.cloud == cloud)
        .map(|mt| mt.name);
    let mut detail = format!(
        "\"{name}\" is not in the catalog of {} GPU machine types. Closest known names: {}.",
        cloud.title(),
        list(closest(wanted, names, 5))
    );
    if cloud == Cloud::Gke && is_gcp_n1(wanted) {
        detail.push_str(
            " n1 machine types have no GPU of their own: on a pool, attach T4s by setting gpu_model = \
             \"nvidia-tesla-t4\" and gpu_count (1, 2 or 4).",
        );
    } else if let Some(other) = Cloud::ALL.into_iter().find(|c| {
        *c != cloud
            && MACHINE_TYPES
                .iter()
                .any(|mt| mt.cloud == *c && mt.name.eq_ignore_ascii_case(wanted))
    }) {
        detail.push_str(&format!(" It is one of {}'s machine types.", other.title()));
    } else {
        detail.push_str(
            " If it is a new size, set gpu_model and gpu_count on the pool to describe its GPUs.",
        );
    }
    Err(DomainError::new(
        Field::MachineType,
        summary::UNKNOWN_MACHINE_TYPE,
        detail,
    ))
}

/// GCP n1 machine types take GPUs as separately attached accelerators.
pub(super) fn is_gcp_n1(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["n1-standard-", "n1-highmem-", "n1-highcpu-"]
        .iter()
        .any(|prefix| {
            lower
                .strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}
