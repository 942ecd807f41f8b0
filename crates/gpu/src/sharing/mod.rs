//! The sharing model: how a pool's GPUs are shared (MIG, time-slicing, MPS or not at all), the rules each
//! cloud imposes, and what follows for the pods that land on the pool.
//!
//! `validate` checks a pool and collects every problem at once (a plan should show all of them, not one per
//! apply); on success it returns [`Derived`], the facts the cloud layer and the data sources need: the
//! extended resource name, slices and memory per slice, node selector, tolerations, the device plugin config
//! and the node labels that select it.
//!
//! Who advertises the GPUs differs per cloud, and that decides most rules. On GKE, Google's own device plugin
//! does, configured through the node pool's accelerator fields; it always advertises `nvidia.com/gpu` and
//! can time-share or MPS-share whole GPUs or MIG partitions. On AKS and EKS the NVIDIA device plugin (via the
//! GPU operator) does, configured by a named config that a node selects with the
//! `nvidia.com/device-plugin.config` label; it runs MPS on full GPUs only.
//!
//! - `modes`: the sharing modes as users declare them; `names` how a query names them.
//! - `taints`: taints and the tolerations they call for.
//! - `validate`: a pool in, its derived facts out; `mode_facts` holds the per-mode part and `rules` the
//!   checks each cloud and plugin impose; `spec` the pool as declared and `derived` the facts, the types
//!   the three of them share.
//! - `labels`: the node labels that select a device plugin config and a MIG layout.
//! - `plugin_config`: the NVIDIA device plugin config a mode needs, under the name nodes select it by.

mod derived;
mod labels;
mod mode_facts;
pub(crate) use mode_facts::dotted;
mod modes;
mod names;
mod plugin_config;
mod rules;
mod spec;
mod taints;
#[cfg(test)]
mod tests;
mod validate;

pub use derived::{Derived, GkeAccelerator, Isolation};
pub use labels::{DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, SHARING_LABEL};
pub use modes::{GkeSharing, GkeSharingStrategy, MigStrategy, SharingMode};
pub use plugin_config::{
    NamedConfig, device_plugin_config, device_plugin_config_yaml, own_config, pool_config_name,
};
pub use rules::{MAX_REPLICAS, MIN_REPLICAS, check_aks_os_sku, check_eks_ami_type};
pub use spec::PoolSpec;
#[cfg(test)]
use taints::DEFAULT_GPU_TAINT;
pub use taints::{GKE_GPU_TAINT, Taint, TaintEffect, Toleration, TolerationOperator};
pub use validate::validate;
