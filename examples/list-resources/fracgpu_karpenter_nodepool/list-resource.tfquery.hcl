# The time-sliced Karpenter NodePools of the cluster the provider's `kubernetes` block reaches;
# `terraform query -generate-config-out=pools.tf` writes a resource and an import block for each.
list "fracgpu_karpenter_nodepool" "time_sliced" {
  provider = fracgpu
  config {
    sharing = "time_slicing"
  }
}
