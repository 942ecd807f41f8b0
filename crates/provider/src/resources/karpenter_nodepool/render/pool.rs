//! A shared GPU pool as the user declares it for Karpenter ([`KarpenterPool`]), and what the
//! renderer makes of it ([`Rendered`]): the types the renderer's steps share.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu::{GpuModel, SharingMode, Taint};
use serde_json::Value;

use super::super::provisioner::node_class::Provisioner;

/// Where Karpenter says which NodePool made a node.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The pool's disruption settings, passed through to the NodePool.
#[derive(Clone, Debug, PartialEq)]
pub struct Disruption {
    pub consolidation_policy: String,
    pub consolidate_after: String,
    /// Budgets: `nodes` (a count or a percentage) with an optional cron `schedule` and `duration`.
    pub budgets: Vec<Budget>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub nodes: String,
    pub schedule: Option<String>,
    pub duration: Option<String>,
}

/// A shared GPU pool as the user declares it.
#[derive(Clone, Debug)]
pub struct KarpenterPool {
    pub name: String,
    /// Which Karpenter makes the nodes, with the node class it names or makes.
    pub provisioner: Arc<dyn Provisioner>,
    pub gpu: &'static GpuModel,
    /// GPUs per node the pool may launch; one overlay each.
    pub gpu_counts: Vec<u32>,
    pub sharing: SharingMode,
    pub labels: BTreeMap<String, String>,
    /// None: the default GPU taint.
    pub taints: Option<Vec<Taint>>,
    /// `on-demand`, `spot`, `reserved`.
    pub capacity_types: Vec<String>,
    /// The most physical GPUs the pool's nodes may hold in all.
    pub limit_gpus: Option<u32>,
    pub disruption: Option<Disruption>,
    pub weight: Option<u32>,
    /// Whether the cluster's Karpenter reads the pool's NodeOverlays (its `NodeOverlay` feature
    /// gate is on). Karpenter sums its nodes' capacity against `spec.limits`: with the overlays
    /// that capacity counts slices, without them whole GPUs, so the limits are written in the
    /// unit Karpenter will count in.
    pub overlays_read: bool,
    /// The device plugin config name the pool's nodes carry now: one made while names said the
    /// settings is kept while they hold (a changed NodePool template would make Karpenter replace
    /// every node).
    pub config_name: Option<String>,
}

/// The objects of a pool and what workloads need to know of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub node_pool: Value,
    /// One per GPU count, named `<pool>-gpu<count>`.
    pub overlays: Vec<Value>,
    /// The node class the pool makes, if it makes one.
    pub node_class: Option<Value>,
    /// The sharing's facts (for the smallest GPU count): resource name, slices per GPU, memory
    /// per slice, tolerations, the device plugin config.
    pub derived: gpu::Derived,
    /// What one node offers, per GPU count, as the overlays say it.
    pub capacity: BTreeMap<u32, BTreeMap<String, u32>>,
    /// The NodePool's `spec.limits`, translated from physical GPUs.
    pub limits: BTreeMap<String, u32>,
    /// What a workload selects the pool's nodes by.
    pub node_selector: BTreeMap<String, String>,
    /// The node class's user data, when the host runs the device plugin from it (Bottlerocket's
    /// settings).
    pub user_data: Option<String>,
}

/// The overlay of a pool's nodes with `count` GPUs.
pub fn overlay_name(pool: &str, count: u32) -> String {
    format!("{pool}-gpu{count}")
}
