# The device plugin configs an Argo CD Application has the GPU operator's chart create, on the
# cluster the provider's `kubernetes` block reaches; `terraform query
# -generate-config-out=configs.tf` writes a resource and an import block for each, through the
# delivery that writes it.
list "fracgpu_device_plugin_config" "argocd" {
  provider = fracgpu
  config {
    delivery = "argocd"
  }
}
