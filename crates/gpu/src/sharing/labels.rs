//! The node labels through which the pool's nodes pick their GPU setup, read by the NVIDIA device
//! plugin and the GPU operator's MIG manager. `validate` writes them and `observed` reads them back, so
//! they stand in a module of their own that uses nothing.

/// The node label the NVIDIA device plugin reads to pick its named config.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// The node label the GPU operator's MIG manager reads to partition a node's GPUs.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The node label that says a pool's sharing settings where its device plugin config has the
/// pool's own name (`time-sliced-10`, `mps-4`: the settings' name, see `plugin_config`): the
/// config's name no longer says them, and reading a pool back needs them.
pub const SHARING_LABEL: &str = "fracgpu.dev/sharing";
