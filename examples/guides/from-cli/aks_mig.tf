# az aks nodepool add --resource-group sandbox-rg --cluster-name sandbox-aks --name a100mig \
#   --node-vm-size Standard_NC24ads_A100_v4 --gpu-instance-profile MIG1g --node-count 1
resource "fracgpu_nodepool" "aks_mig" {
  name         = "a100mig"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  # MIG1g on this A100 80GB is the 1g.10gb profile: seven isolated instances per GPU.
  mig { profile = "1g.10gb" }
}
