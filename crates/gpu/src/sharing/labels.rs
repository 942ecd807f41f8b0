//! The node labels through which the pool's nodes pick their GPU setup, read by the NVIDIA device
//! plugin and the GPU operator's MIG manager. `validate` writes them and `observed` reads them back, so
//! they stand in a module of their own that uses nothing.

/// The node label the NVIDIA device plugin reads to pick its named config.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// The node label the GPU operator's MIG manager reads to partition a node's GPUs.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
