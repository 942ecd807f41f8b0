# A pool this provider made is imported by the NodePool's name; the NodePool carries the
# declaration it was made from, so the import reads it back whole.
terraform import fracgpu_karpenter_nodepool.eks t4-slices
