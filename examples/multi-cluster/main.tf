# The same fractional setup on three clusters, one per cloud, through one module: T4 nodes whose
# GPUs are time-sliced four ways. Against the sandbox the defaults name its clusters; against real
# clouds, set `clusters` to yours, `kubeconfigs` to their kubeconfig files, and leave `sandbox` null.
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
  description = "Kubeconfig path per key of `clusters`. AKS and EKS clusters need one: their GPU operator receives the pool's device plugin config."
  type        = map(string)
  default     = {}
}

variable "clusters" {
  description = "The clusters that get the pool, by a key of your choice: the cloud and that cloud's cluster fields."
  type = map(object({
    cloud = string
    cluster = object({
      cluster_name    = optional(string)
      resource_group  = optional(string)
      subscription_id = optional(string)
      cluster         = optional(string)
      location        = optional(string)
      project         = optional(string)
      node_locations  = optional(list(string))
      node_role_arn   = optional(string)
      subnet_ids      = optional(list(string))
      region          = optional(string)
    })
  }))
  default = {
    aks = {
      cloud   = "aks"
      cluster = { resource_group = "sandbox-rg", cluster_name = "sandbox-aks" }
    }
    gke = {
      cloud = "gke"
      # Two of the regional cluster's three zones: the two nodes go one to each (GKE runs the
      # same number of nodes in every zone of a pool).
      cluster = {
        location       = "us-central1"
        cluster        = "sandbox-gke"
        node_locations = ["us-central1-a", "us-central1-b"]
      }
    }
    eks = {
      cloud = "eks"
      cluster = {
        cluster_name  = "sandbox-eks"
        node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
        subnet_ids    = ["subnet-0a1", "subnet-0b2"]
      }
    }
  }
}

provider "fracgpu" {
  sandbox = var.sandbox
}

module "t4_shared" {
  source   = "../modules/fractional-gpu-pool"
  for_each = var.clusters

  name            = "t4shared"
  cloud           = each.value.cloud
  cluster         = each.value.cluster
  gpu_model       = "T4"
  gpus_per_node   = 1
  sharing         = { mode = "time-slicing", replicas = 4 }
  node_count      = 2
  labels          = { team = "inference" }
  kubeconfig_path = lookup(var.kubeconfigs, each.key, null)
}

output "pools" {
  description = "Per cluster: what a workload requests, how many fit on a node, and where it lands."
  value = {
    for key, m in module.t4_shared : key => {
      id                  = m.id
      machine_type        = m.machine_type
      resource_name       = m.resource_name
      slices_per_node     = m.slices_per_node
      memory_per_slice_mb = m.memory_per_slice_mb
      node_selector       = m.node_selector
      tolerations         = m.tolerations
    }
  }
}
