//! A GPU node pool as the user declares it: what `validate` takes, and what the checks it calls
//! (`rules`, `mode_facts`) read. Apart from `validate` so that they can read it without using
//! `validate`, which uses them.

use std::collections::BTreeMap;

use super::{SharingMode, Taint};
use crate::catalog::{Cloud, Hardware};

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
