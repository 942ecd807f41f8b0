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

variable "kubeconfigs" {
  description = "Kubeconfig path of each cluster whose GPU operator receives the pool's device plugin config (keys aks, eks). The demo passes the sandbox's."
  type        = map(string)
  default     = {}
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

# On AKS and EKS the NVIDIA device plugin shares the GPUs: each pool's config goes to the GPU
# operator of its cluster, and the nodes labelled with its name advertise the slices.
resource "fracgpu_device_plugin_config" "aks" {
  count = contains(keys(var.kubeconfigs), "aks") ? 1 : 0
  kubernetes {
    config_path = var.kubeconfigs["aks"]
  }
  default_config = "all"
  config { name = "all" }
  config {
    name = fracgpu_nodepool.aks.device_plugin_config_name
    yaml = fracgpu_nodepool.aks.device_plugin_config
  }
}

resource "fracgpu_device_plugin_config" "eks" {
  count = contains(keys(var.kubeconfigs), "eks") ? 1 : 0
  kubernetes {
    config_path = var.kubeconfigs["eks"]
  }
  default_config = "all"
  config { name = "all" }
  config {
    name = fracgpu_nodepool.eks.device_plugin_config_name
    yaml = fracgpu_nodepool.eks.device_plugin_config
  }
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
