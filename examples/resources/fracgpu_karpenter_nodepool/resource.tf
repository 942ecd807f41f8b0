# Two Karpenter pools of shared GPUs: one on EKS Karpenter with a node class of its own, one on
# AKS node auto-provisioning with a node class the cluster already has. Each gets a NodeOverlay
# per GPU count, so Karpenter scales them from zero by slices, not by whole GPUs.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# The cluster comes from KUBECONFIG here; a `kubernetes` block in the provider or the resource
# can name it instead.
provider "fracgpu" {}

# T4 instances with 1 or 4 GPUs, each GPU time-sliced ten ways: a g4dn.12xlarge offers 40
# nvidia.com/gpu, and ten pending pods of one slice bring one g4dn.xlarge, not ten.
resource "fracgpu_karpenter_nodepool" "eks" {
  name           = "t4-slices"
  gpu_model      = "T4"
  gpu_counts     = [1, 4]
  capacity_types = ["spot", "on-demand"]
  limit_gpus     = 16
  labels         = { team = "inference" }

  time_slicing { replicas = 10 }

  eks {
    node_class {
      role                = "KarpenterNodeRole-prod"
      subnet_tags         = { "karpenter.sh/discovery" = "prod" }
      security_group_tags = { "karpenter.sh/discovery" = "prod" }
    }
  }

  disruption {
    consolidation_policy = "WhenEmptyOrUnderutilized"
    consolidate_after    = "5m"
    budget { nodes = "10%" }
  }
}

# A100s on AKS node auto-provisioning, shared by MPS four ways (NAP cannot partition by MIG).
resource "fracgpu_karpenter_nodepool" "nap" {
  name       = "a100-mps"
  gpu_model  = "A100-80GB"
  gpu_counts = [1]

  mps { replicas = 4 }

  aks {
    node_class_name = "default"
  }
}

# What a workload needs to land on the EKS pool's slices.
output "eks_workload" {
  value = {
    resource      = fracgpu_karpenter_nodepool.eks.resource_name
    node_selector = fracgpu_karpenter_nodepool.eks.node_selector
    tolerations   = fracgpu_karpenter_nodepool.eks.tolerations
    per_node      = fracgpu_karpenter_nodepool.eks.node_capacity
  }
}
