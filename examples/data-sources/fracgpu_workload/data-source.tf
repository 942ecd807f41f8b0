terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# A 4 GB model on an EKS pool of T4s, each GPU time-sliced 10 ways.
data "fracgpu_workload" "embedder" {
  cloud        = "eks"
  machine_type = "g4dn.xlarge"
  pool_name    = "inference"
  time_slicing { replicas = 10 }
  gpu_memory_mb = 4000
}

output "embedder_pod_spec" {
  value = {
    fits          = data.fracgpu_workload.embedder.fits
    limits        = data.fracgpu_workload.embedder.resources       # { "nvidia.com/gpu" = "3" }
    stay_under_mb = data.fracgpu_workload.embedder.memory_limit_mb # 4608
    node_selector = data.fracgpu_workload.embedder.node_selector
    tolerations   = data.fracgpu_workload.embedder.tolerations
  }
}
