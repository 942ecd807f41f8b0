# What a workload needs to land on the pool and use its share of a GPU. On AKS and EKS these wait
# for the device plugin config, so whatever consumes them starts once the nodes can advertise it.

output "id" {
  description = "The cloud's ID of the pool (ARM resource ID, GKE node pool path, or cluster:nodegroup on EKS)."
  value       = fracgpu_nodepool.this.id
}

output "machine_type" {
  description = "The machine type the pool runs on, as chosen from gpu_model and gpus_per_node or given."
  value       = fracgpu_nodepool.this.machine_type
}

output "gpu" {
  description = "The GPUs of each node: { model, count, memory_mb }."
  value       = fracgpu_nodepool.this.gpu
}

output "resource_name" {
  description = "The extended resource a workload requests, e.g. nvidia.com/gpu (time-slicing, MPS) or nvidia.com/mig-1g.10gb (MIG)."
  value       = fracgpu_nodepool.this.resource_name
  depends_on  = [fracgpu_device_plugin_config.this]
}

output "slices_per_node" {
  description = "How many of that resource each node offers."
  value       = fracgpu_nodepool.this.slices_per_node
  depends_on  = [fracgpu_device_plugin_config.this]
}

output "memory_per_slice_mb" {
  description = "GPU memory of one slice in MiB (enforced by MIG and MPS; with time-slicing each workload must stay under it by itself)."
  value       = fracgpu_nodepool.this.memory_per_slice_mb
}

output "node_selector" {
  description = "Labels that pin a workload to this pool's nodes (a pod's nodeSelector)."
  value       = fracgpu_nodepool.this.node_selector
  depends_on  = [fracgpu_device_plugin_config.this]
}

output "tolerations" {
  description = "Tolerations a workload needs for the pool's taints, as { key, operator, value, effect }."
  value       = fracgpu_nodepool.this.tolerations
}

output "device_plugin_config_name" {
  description = "Name of the device plugin config the nodes select (AKS, EKS); null on GKE."
  value       = fracgpu_nodepool.this.device_plugin_config_name
}

output "device_plugin_config" {
  description = "That config's YAML, for delivering it yourself when deliver_device_plugin_config is false; null on GKE."
  value       = fracgpu_nodepool.this.device_plugin_config
}

output "device_plugin_config_id" {
  description = "namespace/name of the ConfigMap the module manages in the cluster; null when it delivers nothing (GKE, or delivery turned off)."
  value       = one(fracgpu_device_plugin_config.this[*].id)
}
