terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# Credentials come from the usual places (ARM_*, ADC, the AWS chain); set FRACGPU_SANDBOX or
# `sandbox` to try it against fracgpu-sandbox, whose default world these names are.
provider "fracgpu" {}

# An A100 pool on AKS whose GPUs are time-sliced ten ways.
resource "fracgpu_nodepool" "inference" {
  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  time_slicing { replicas = 10 }
  autoscaling {
    min_nodes = 1
    max_nodes = 4
  }
  labels = { team = "ml" }
}

# The same idea on GKE with hardware partitions, time-shared by two clients each.
resource "fracgpu_nodepool" "partitions" {
  name         = "a100mig"
  machine_type = "a2-highgpu-1g"
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  mig {
    profile = "1g.5gb"
    gke_sharing {
      strategy    = "time-sharing"
      max_clients = 2
    }
  }
}

# And on EKS, where sharing is set up through the GPU operator's node labels.
resource "fracgpu_nodepool" "t4" {
  name         = "t4mps"
  machine_type = "g4dn.xlarge"
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
  }
  mps { replicas = 4 }
  spot = true
}

output "workload_placement" {
  value = {
    for k, p in {
      inference  = fracgpu_nodepool.inference
      partitions = fracgpu_nodepool.partitions
      t4         = fracgpu_nodepool.t4
      } : k => {
      request       = "${p.resource_name} (${p.slices_per_node} per node, ${p.memory_per_slice_mb} MiB each)"
      node_selector = p.node_selector
    }
  }
}
