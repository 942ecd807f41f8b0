# az aks nodepool add --resource-group sandbox-rg --cluster-name sandbox-aks --name t4ts \
#   --node-vm-size Standard_NC4as_T4_v3 --node-count 2 --gpu-driver none \
#   --labels nvidia.com/device-plugin.config=time-sliced-10 \
#   --node-taints nvidia.com/gpu=Present:NoSchedule
resource "fracgpu_nodepool" "aks_time_sliced" {
  name         = "t4ts"
  machine_type = "Standard_NC4as_T4_v3"
  node_count   = 2
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
    gpu_driver     = "None"
  }
  # The provider names the device plugin config and sets the node label itself, and the
  # nvidia.com/gpu=Present:NoSchedule taint is the default.
  time_slicing { replicas = 10 }
}
