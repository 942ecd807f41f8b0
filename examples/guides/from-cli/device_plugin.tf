# helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values \
#   --set devicePlugin.config.name=time-slicing-config --set devicePlugin.config.default=all \
#   -f values.yaml        # devicePlugin.config.data: { all: ..., time-sliced-10: ... }
resource "fracgpu_device_plugin_config" "aks" {
  namespace      = "gpu-operator"
  name           = "time-slicing-config"
  default_config = "all"

  # Nodes without the nvidia.com/device-plugin.config label keep whole GPUs.
  config { name = "all" }

  # The config the time-sliced pool's nodes select, under the name their label carries.
  config {
    name = fracgpu_nodepool.aks_time_sliced.device_plugin_config_name
    yaml = fracgpu_nodepool.aks_time_sliced.device_plugin_config
  }
}

output "workloads" {
  description = "What a workload requests on each pool."
  value = {
    for k, p in {
      aks_mig         = fracgpu_nodepool.aks_mig
      aks_time_sliced = fracgpu_nodepool.aks_time_sliced
      gke_partitions  = fracgpu_nodepool.gke_partitions
      gke_time_shared = fracgpu_nodepool.gke_time_shared
      eks_time_sliced = fracgpu_nodepool.eks_time_sliced
    } : k => "${p.slices_per_node} x ${p.resource_name} per node, ${p.memory_per_slice_mb} MiB each"
  }
}
