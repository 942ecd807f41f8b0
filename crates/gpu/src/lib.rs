//! The domain, pure: which GPUs each machine type carries, how a GPU can be shared (MIG, time-slicing, MPS)
//! on each cloud, what a pool's sharing setup implies for the pods that land on it (resource name, slices,
//! memory per slice, node selector, tolerations) and the NVIDIA device plugin config that sets it up. No
//! I/O: the provider's resources, data sources and functions call in here to validate and derive, and turn
//! a [`DomainError`] into a diagnostic on the attribute named by its [`Field`].
//!
//! - `catalog`: GPU models, MIG profiles, machine types per cloud, lookups, the AKS and GKE profile rules,
//!   and the catalog as markdown for the docs.
//! - `sharing`: the sharing modes, pool validation and the derived placement facts.
//! - `placement`: whether a workload fits a pool and what it must request.
//! - `device_plugin`: the NVIDIA device plugin config document: model, renderer, parser.
//! - `bottlerocket`: Bottlerocket's own device plugin settings, written and read back.
//! - `mig_parted`: the MIG manager's config file, as far as its config names.
//! - `observed`: the way back, from what a cloud reports to the sharing mode that produced it.

pub mod bottlerocket;
mod catalog;
pub mod device_plugin;
mod error;
pub mod mig_parted;
mod observed;
mod placement;
mod sharing;

pub use catalog::{
    AksGpuInstanceProfile, Cloud, GpuModel, Hardware, MAX_GPUS_PER_NODE, MachineType, MemorySource,
    MigProfile, all_gpu_models, catalog_markdown, compute_share, gpu_model, machine_type,
    machine_types_of, resolve_hardware,
};
pub use error::{DomainError, Field};
pub use observed::{Observed, sharing_from_observed};
pub use placement::{WorkloadFit, WorkloadNeed, slices_for, workload_fit};
pub use sharing::{
    DEVICE_PLUGIN_CONFIG_LABEL, Derived, GKE_GPU_TAINT, GkeAccelerator, GkeSharing,
    GkeSharingStrategy, Isolation, MAX_REPLICAS, MIG_CONFIG_LABEL, MIN_REPLICAS, MigStrategy,
    NamedConfig, PoolSpec, SHARING_LABEL, SharingMode, Taint, TaintEffect, Toleration,
    TolerationOperator, check_aks_os_sku, check_eks_ami_type, device_plugin_config,
    device_plugin_config_yaml, own_config, pool_config_name, validate,
};
