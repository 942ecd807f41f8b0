terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

provider "fracgpu" {}

# The time-sliced GPU pools of an EKS cluster, whoever made them.
data "fracgpu_nodepools" "shared" {
  eks {
    cluster_name = "sandbox-eks"
  }
  sharing = "time_slicing"
}

# What a workload needs to land on each: the resource to request, the node selector and the
# tolerations.
output "placements" {
  value = {
    for p in data.fracgpu_nodepools.shared.pools : p.name => {
      resource      = p.resource_name
      slices        = p.slices_per_node
      node_selector = p.node_selector
      tolerations   = p.tolerations
    }
  }
}
