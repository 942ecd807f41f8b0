# The MIG pools of a GKE cluster; `terraform query -generate-config-out=pools.tf` writes a
# resource and an import block for each.
list "fracgpu_nodepool" "mig" {
  provider = fracgpu
  config {
    gke {
      location = "us-central1"
      cluster  = "sandbox-gke"
    }
    sharing = "mig"
  }
}
