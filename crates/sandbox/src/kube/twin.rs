//! The digital twin: what a node advertises once the GPU stack on it has started.
//!
//! On GKE the cloud's own device plugin advertises sharing and partitions straight from the node pool. On AKS
//! and EKS the NVIDIA device plugin (deployed by the GPU operator) does, from the config it loaded when its pod
//! last started: that is why every node carries its own [`PluginInputs`] snapshot, refreshed only when the
//! device plugin daemonset is restarted (or the pod starts on a new node), never when the ConfigMap is edited.
//! What each config-manager (the plugin's, GPU feature discovery's, the MPS daemon's) linked and loaded
//! is in [`config_manager`]; when the operands' pods restart and what they read then, in [`restart`].
//!
//! Bottlerocket's NVIDIA variants are the exception on EKS: their device plugin is a host service the
//! OS configures from its own settings (`settings.kubelet-device-plugins.nvidia.*`: time-slicing, mps,
//! mig.profile; bottlerocket.dev, "kubelet-device-plugins"), not the operator's daemonset. Nothing the
//! operator's ConfigMap, the config label or the MIG manager label says reaches it: it advertises what
//! the settings in the node's user data say (`twin/bottlerocket.rs`), whole GPUs without any.
//!
//! Written from the device plugin's documented config format (api/config/v1), independently of the provider.
//!
//! The node's hardware and state are in [`node`]; the device plugin's config format in
//! [`device_config`]; the MIG manager in [`mig_manager`] (geometries in [`mig_geometry`]); what a
//! node advertises and how it shows on the node in [`advertise`]; the kubelet's admission of pods
//! and the devices it hands them in [`kubelet`]; the names of the labels and
//! annotations involved in [`labels`]. This module only declares them and re-exports what the
//! store and the remote twin use, so that the parts import one another and never this module.

mod advertise;
mod bottlerocket;
mod chart_stack;
mod config_manager;
mod device_config;
mod kubelet;
mod labels;
mod mig_configs;
mod mig_geometry;
mod mig_manager;
mod node;
mod restart;
#[cfg(test)]
mod tests;

pub(crate) use advertise::{Rendered, gke_labels, render};
pub(crate) use chart_stack::{chart_configmap, chart_inputs, chart_role};
pub(crate) use config_manager::PluginInputs;
pub(crate) use kubelet::{Admission, admit};
pub(crate) use labels::{
    ERROR_ANNOTATION, GFD_COUNT, GFD_MEMORY, GFD_MIG_CAPABLE, GFD_PRODUCT, MIG_STATE_LABEL,
    READERS_ANNOTATION,
};
pub(crate) use mig_configs::{MigConfigs, generated as generated_mig_config};
pub(crate) use mig_manager::{
    MigManager, mig_capable, mig_config_name, mig_fails, mig_manager_policy,
};
pub(crate) use node::{ContainerDevices, HeldPod, NodeTwin, host_device_plugin, twin_from_labels};
pub(crate) use restart::{
    Restarts, config_name, plugin_inputs, readers_summary, restart_marker, restart_step,
};
