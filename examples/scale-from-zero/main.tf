# The demo's second step: one time-sliced pool per cloud that starts at zero nodes and that the
# cluster autoscaler grows by slices, not by whole GPUs. One GPU per node shared ten ways, so ten
# pending one-slice pods need one node. `cargo run --bin fracgpu-sandbox -- demo` applies it after
# the quick start; the guide "Autoscaling shared GPUs" explains the node template it relies on.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

variable "sandbox" {
  description = "URL of a running fracgpu-sandbox; null uses the real clouds (or FRACGPU_SANDBOX)."
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
  # Each node's one GPU is shared by this many workloads.
  replicas = 10
}

# On AKS the pool's tags, which AKS copies to the scale set, tell cluster-autoscaler what a node
# offers before one exists.
resource "fracgpu_nodepool" "aks" {
  name         = "t4zero"
  machine_type = "Standard_NC4as_T4_v3"
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  time_slicing { replicas = local.replicas }
}

# GKE's own autoscaler reads the pool's sharing from the node pool itself.
resource "fracgpu_nodepool" "gke" {
  name         = "l4zero"
  machine_type = "g2-standard-4"
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  time_slicing { replicas = local.replicas }
}

# On EKS the provider tags the node group's Auto Scaling group with the same template.
resource "fracgpu_nodepool" "eks" {
  name         = "t4zero"
  machine_type = "g4dn.xlarge"
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1"]
  }
  time_slicing { replicas = local.replicas }
}

# On AKS and EKS the NVIDIA device plugin shares the GPUs once a node exists: each pool's config
# goes to the GPU operator of its cluster.
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
  description = "What a workload on each pool requests, and where it lands: the pod spec the cluster autoscaler matches against the pool's template."
  value = {
    for cloud, p in { aks      = fracgpu_nodepool.aks, gke = fracgpu_nodepool.gke, eks = fracgpu_nodepool.eks } : cloud => {
      name                     = p.name
      resource_name            = p.resource_name
      slices_per_node          = p.slices_per_node
      node_selector            = p.node_selector
      tolerations              = p.tolerations
      autoscaler_node_template = p.autoscaler_node_template
    }
  }
}
