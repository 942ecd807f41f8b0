# The quick start: one time-sliced A100 pool on each of AKS, GKE and EKS.
# `cargo run --bin fracgpu-sandbox -- demo` applies it against the built-in sandbox; against real
# clouds, replace the cluster names and drop `sandbox`.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

variable "sandbox" {
  description = "URL of a running fracgpu-sandbox; null uses the real clouds."
  type        = string
  default     = null
}

provider "fracgpu" {
  sandbox = var.sandbox
}

locals {
  # The same fractional setup on three clouds: A100s, each shared by 10 workloads.
  replicas = 10
}

resource "fracgpu_nodepool" "aks" {
  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  time_slicing { replicas = local.replicas }
  labels = { team = "ml" }
}

resource "fracgpu_nodepool" "gke" {
  name         = "a100ts"
  machine_type = "a2-highgpu-1g"
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  time_slicing { replicas = local.replicas }
  labels = { team = "ml" }
}

resource "fracgpu_nodepool" "eks" {
  name         = "a100ts"
  machine_type = "p4d.24xlarge"
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
  }
  time_slicing { replicas = local.replicas }
  labels = { team = "ml" }
}

output "pools" {
  description = "What a workload on each pool must request and where it lands."
  value = {
    for cloud, p in { aks       = fracgpu_nodepool.aks, gke = fracgpu_nodepool.gke, eks = fracgpu_nodepool.eks } : cloud => {
      id                        = p.id
      resource_name             = p.resource_name
      slices_per_node           = p.slices_per_node
      memory_per_slice_mb       = p.memory_per_slice_mb
      node_selector             = p.node_selector
      device_plugin_config_name = p.device_plugin_config_name
    }
  }
}
