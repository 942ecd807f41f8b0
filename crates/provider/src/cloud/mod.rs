//! The clouds' node pool APIs behind one trait. A resource hands over a cloud-neutral
//! [`PoolSpec`] (already validated by `gpu`); each client maps it to its API (`aks`: ARM REST,
//! `gke`: GKE v1, `eks`: EKS managed node groups), waits for the long-running operation, retries
//! what is worth retrying, and reads the pool back as a [`Pool`] in the same neutral terms so that
//! drift is a plain comparison. How long anything waits is `crate::operation`'s business; what
//! can go wrong is [`CloudError`] (in `error`).
//!
//! The neutral terms are in `pool`; each target's descriptor (its blocks, settings, names and
//! client) is in its folder's `target` module, and `registry` lists the targets. This module only
//! declares and re-exports: it calls into none of them, so none of them depends on it.

mod across;
pub mod aks;
mod answer;
pub mod eks;
mod error;
pub mod gke;
mod pool;
pub mod registry;
mod shared;
pub mod target;

pub use across::AcrossClusters;
pub use error::{CloudError, Detail};
pub use pool::{
    AksPoolFields, EksPoolFields, GkePoolFields, GkeSharing, Location, NodePools, NodeTemplate,
    Pool, PoolSpec, PoolTaint, Scaling, TargetFields,
};
pub use registry::CloudSettings;
pub use shared::SharedReads;
pub use target::Target;

pub use crate::operation::{OpCtx, StopSignal};
