//! The one error type of the domain. It is shaped like a Terraform diagnostic so the provider can hand it on
//! without rewording: a fixed summary users can search for, a detail that names the cause, the fix and the
//! valid values, and the input it concerns so the diagnostic can point at the attribute.

use std::fmt;

/// The input a [`DomainError`] concerns. The provider maps each to an attribute path of the resource, data
/// source or function that was called; `path()` is the dotted name used in our schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Cloud,
    MachineType,
    GpuModel,
    GpuCount,
    PoolName,
    OsSku,
    /// The EKS AMI type of a node group.
    EksAmiType,
    MigProfile,
    MigStrategy,
    MigGkeSharing,
    MigGkeMaxClients,
    TimeSlicingReplicas,
    TimeSlicingRenameByDefault,
    MpsReplicas,
    MpsFailRequestsGreaterThanOne,
    Taints,
    Labels,
    /// The workload's memory need (`fracgpu_workload.gpu_memory_mb`).
    WorkloadMemory,
    /// The workload's MIG profile (`fracgpu_workload.mig_profile`).
    WorkloadMigProfile,
    /// A device plugin config document as a whole (parse errors carry the YAML position in the detail).
    DevicePluginConfig,
}

impl Field {
    pub fn path(self) -> &'static str {
        match self {
            Field::Cloud => "cloud",
            Field::MachineType => "machine_type",
            Field::GpuModel => "gpu_model",
            Field::GpuCount => "gpu_count",
            Field::PoolName => "name",
            Field::OsSku => "os_sku",
            Field::EksAmiType => "ami_type",
            Field::MigProfile => "mig.profile",
            Field::MigStrategy => "mig.strategy",
            Field::MigGkeSharing => "mig.gke_sharing.strategy",
            Field::MigGkeMaxClients => "mig.gke_sharing.max_clients",
            Field::TimeSlicingReplicas => "time_slicing.replicas",
            Field::TimeSlicingRenameByDefault => "time_slicing.rename_by_default",
            Field::MpsReplicas => "mps.replicas",
            Field::MpsFailRequestsGreaterThanOne => "mps.fail_requests_greater_than_one",
            Field::Taints => "taints",
            Field::Labels => "labels",
            Field::WorkloadMemory => "gpu_memory_mb",
            Field::WorkloadMigProfile => "mig_profile",
            Field::DevicePluginConfig => "config",
        }
    }
}

/// A problem with the user's input. `summary` is one of a fixed set of short titles; `detail` is a sentence
/// or two naming the cause and the fix, listing the valid values where there is a short list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainError {
    pub field: Field,
    pub summary: &'static str,
    pub detail: String,
}

impl DomainError {
    pub(crate) fn new(field: Field, summary: &'static str, detail: impl Into<String>) -> Self {
        DomainError {
            field,
            summary,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.summary,
            self.field.path(),
            self.detail
        )
    }
}

impl std::error::Error for DomainError {}

/// Fixed summaries, so tests and users can match on them.
pub(crate) mod summary {
    pub(crate) const UNKNOWN_CLOUD: &str = "Unknown cloud";
    pub(crate) const UNKNOWN_MACHINE_TYPE: &str = "Unknown machine type";
    pub(crate) const UNKNOWN_GPU_MODEL: &str = "Unknown GPU model";
    pub(crate) const INVALID_GPU_COUNT: &str = "Invalid GPU count";
    pub(crate) const INVALID_POOL_NAME: &str = "Invalid pool name";
    pub(crate) const MIG_NOT_SUPPORTED: &str = "MIG not supported";
    pub(crate) const INVALID_MIG_PROFILE: &str = "Invalid MIG profile";
    pub(crate) const INVALID_SHARING: &str = "Invalid GPU sharing";
    pub(crate) const INVALID_REPLICAS: &str = "Invalid replica count";
    pub(crate) const INVALID_OS_SKU: &str = "Unsupported OS SKU";
    pub(crate) const MIG_STRATEGY_NOT_ON_BOTTLEROCKET: &str =
        "MIG strategy not supported on Bottlerocket";
    pub(crate) const CONFLICTING_LABEL: &str = "Conflicting node label";
    pub(crate) const INVALID_TAINT: &str = "Invalid taint";
    pub(crate) const CONFLICTING_TAINT: &str = "Conflicting taint";
    pub(crate) const INVALID_WORKLOAD: &str = "Invalid workload need";
    pub(crate) const INVALID_DEVICE_PLUGIN_CONFIG: &str = "Invalid device plugin config";
}

/// Joins values for a detail sentence: `a, b, c`.
pub(crate) fn list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for (i, s) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(s.as_ref());
    }
    out
}
