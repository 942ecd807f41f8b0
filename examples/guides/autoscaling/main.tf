# The HCL of the "Autoscaling shared GPUs" guide: pools that start at zero nodes and that the
# cluster autoscaler sizes by slices, not by whole GPUs.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# Credentials come from the usual places (ARM_*, ADC, the AWS chain), or from the sandbox when
# FRACGPU_SANDBOX is set.
provider "fracgpu" {}

# One A100 per node, time-sliced four ways: a node offers 4 x nvidia.com/gpu once the device
# plugin runs, and the pool's tags tell cluster-autoscaler so before the first node exists.
resource "fracgpu_nodepool" "aks" {
  name         = "a100auto"
  machine_type = "Standard_NC24ads_A100_v4"
  autoscaling {
    min_nodes = 0
    max_nodes = 4
  }
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  time_slicing { replicas = 4 }
}

# GKE's own autoscaler reads the pool's sharing from the node pool itself: no template needed.
resource "fracgpu_nodepool" "gke" {
  name         = "l4auto"
  machine_type = "g2-standard-4"
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  time_slicing { replicas = 4 }
}

# EKS does not copy a node group's tags to its Auto Scaling group: the provider tags the group.
resource "fracgpu_nodepool" "eks" {
  name         = "t4auto"
  machine_type = "g4dn.xlarge"
  autoscaling {
    min_nodes = 0
    max_nodes = 5
  }
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1"]
  }
  time_slicing { replicas = 10 }
}

output "eks_autoscaler_node_template" {
  description = "The tags cluster-autoscaler reads from the EKS node group's Auto Scaling group."
  value       = fracgpu_nodepool.eks.autoscaler_node_template
}

output "aks_autoscaler_node_template" {
  description = "The tags cluster-autoscaler reads from the AKS pool's scale set."
  value       = fracgpu_nodepool.aks.autoscaler_node_template
}

output "slices_per_node" {
  value = {
    aks = fracgpu_nodepool.aks.slices_per_node
    gke = fracgpu_nodepool.gke.slices_per_node
    eks = fracgpu_nodepool.eks.slices_per_node
  }
}
