//! The domain, pure: which GPUs each machine type carries, how a GPU can be shared (MIG, time-slicing, MPS)
//! on each cloud, what a pool's sharing setup implies for the pods that land on it (resource name, slices,
//! memory per slice, node selector, tolerations) and the NVIDIA device plugin config that sets it up. No
//! I/O: the provider's resources, data sources and functions call in here to validate and derive, and turn
//! a [`DomainError`] into a diagnostic on the attribute named by its [`Field`].

mod catalog;
pub mod device_plugin;
mod error;

pub use catalog::*;
pub use error::{DomainError, Field, summary};
