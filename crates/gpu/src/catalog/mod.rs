//! The GPU and machine-type catalog: which GPUs each cloud's machine types carry, what those GPUs are
//! (memory, compute capability, MIG profiles), and the lookups the provider needs to turn the names a user
//! writes into them. It is data the provider validates against, so the docs print it rather than retype it.
//!
//! - `cloud`: the three clouds.
//! - `models`: GPU models and their MIG profiles.
//! - `aks`: AKS's `gpuInstanceProfile` and the profile it means on each GPU.
//! - `machines`: each cloud's GPU machine types.
//! - `lookup`: models and machine types by name, with suggestions for a miss (`suggest`).
//! - `hardware`: a pool's GPUs, from the catalog or the user's overrides.
//! - `markdown`: the catalog as tables for the docs.

mod aks;
mod cloud;
mod hardware;
mod lookup;
mod machines;
mod markdown;
mod models;
mod suggest;
#[cfg(test)]
mod tests;

pub use aks::AksGpuInstanceProfile;
pub use cloud::Cloud;
pub use hardware::{Hardware, MAX_GPUS_PER_NODE, resolve_hardware};
pub(crate) use lookup::all_machine_types;
pub use lookup::{all_gpu_models, gpu_model, machine_type, machine_types_of};
pub use machines::MachineType;
pub use markdown::catalog_markdown;
pub(crate) use models::mig_profile_for_aks;
pub use models::{GpuModel, MemorySource, MigProfile, compute_share};
