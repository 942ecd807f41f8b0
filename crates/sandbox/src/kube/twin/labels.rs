//! The labels and annotations the GPU stack reads and writes on a node: the operator's and the
//! MIG manager's, GPU feature discovery's hardware labels, and the sandbox's own notes.

pub(crate) const CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// Where a node shows what each config-manager linked and each process loaded (the sandbox's own
/// annotation, JSON: operand -> {config, replicas, error}).
pub(crate) const READERS_ANNOTATION: &str = "sandbox.fracgpu.dev/config-manager";
pub(crate) const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
pub(crate) const MIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// Where a node notes why its device plugin refused its config (the sandbox's own annotation).
pub(crate) const ERROR_ANNOTATION: &str = "sandbox.fracgpu.dev/device-plugin-error";

// The hardware labels of GPU feature discovery, the names NVIDIA/k8s-device-plugin writes
// (README.md "Catalog of Labels", internal/lm/resource.go): the product as NVML names it with spaces as
// dashes, the number of GPUs, the memory of one in MiB, and whether it can be partitioned.
pub(crate) const GFD_PRODUCT: &str = "nvidia.com/gpu.product";
pub(crate) const GFD_COUNT: &str = "nvidia.com/gpu.count";
pub(crate) const GFD_MEMORY: &str = "nvidia.com/gpu.memory";
pub(crate) const GFD_MIG_CAPABLE: &str = "nvidia.com/mig.capable";
