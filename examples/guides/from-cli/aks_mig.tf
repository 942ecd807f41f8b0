# az aks nodepool add --resource-group sandbox-rg --cluster-name sandbox-aks --name a100mig \
#   --node-vm-size Standard_NC24ads_A100_v4 --gpu-instance-profile MIG1g --node-count 0 \
#   --gpu-driver none
resource "fracgpu_nodepool" "aks_mig" {
  name         = "a100mig"
  machine_type = "Standard_NC24ads_A100_v4"
  # No nodes until the pool is scaled up: a user pool may hold zero.
  node_count = 0
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
    # The GPU operator installs the NVIDIA driver, so AKS must not.
    gpu_driver = "None"
  }
  # MIG1g on this A100 80GB is the 1g.10gb profile: seven isolated instances per GPU.
  mig { profile = "1g.10gb" }
}
