import {
  to       = fracgpu_karpenter_nodepool.eks
  identity = { name = "t4-slices" }
}
