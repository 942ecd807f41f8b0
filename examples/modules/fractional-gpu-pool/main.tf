# One fractional GPU node pool, described the same way on AKS, GKE and EKS.
#
# The module maps a GPU model and a GPU count to the cloud's machine type, creates the pool with
# its sharing setup, and on AKS and EKS (where the NVIDIA device plugin does the sharing) delivers
# the pool's device plugin config to the cluster's GPU operator. On GKE the cloud shares the GPUs
# itself (gpuSharingConfig, gpuPartitionSize), so nothing goes to the cluster.

locals {
  # cloud -> GPU model -> GPUs per node -> machine type, from the provider's GPU catalog.
  machine_types = {
    aks = {
      "T4"            = { "1" = "Standard_NC4as_T4_v3", "4" = "Standard_NC64as_T4_v3" }
      "A100-40GB"     = { "8" = "Standard_ND96asr_v4" }
      "A100-80GB"     = { "1" = "Standard_NC24ads_A100_v4", "2" = "Standard_NC48ads_A100_v4", "4" = "Standard_NC96ads_A100_v4", "8" = "Standard_ND96amsr_A100_v4" }
      "H100-NVL-94GB" = { "1" = "Standard_NC40ads_H100_v5", "2" = "Standard_NC80adis_H100_v5" }
      "H100-80GB"     = { "8" = "Standard_ND96isr_H100_v5" }
      "H200-141GB"    = { "8" = "Standard_ND96isr_H200_v5" }
    }
    gke = {
      # GKE attaches T4s to n1 machine types; the module names the GPUs for the provider.
      "T4"         = { "1" = "n1-standard-4", "2" = "n1-standard-8", "4" = "n1-standard-16" }
      "L4"         = { "1" = "g2-standard-4", "2" = "g2-standard-24", "4" = "g2-standard-48", "8" = "g2-standard-96" }
      "A100-40GB"  = { "1" = "a2-highgpu-1g", "2" = "a2-highgpu-2g", "4" = "a2-highgpu-4g", "8" = "a2-highgpu-8g" }
      "A100-80GB"  = { "1" = "a2-ultragpu-1g", "2" = "a2-ultragpu-2g", "4" = "a2-ultragpu-4g", "8" = "a2-ultragpu-8g" }
      "H100-80GB"  = { "8" = "a3-highgpu-8g" }
      "H200-141GB" = { "8" = "a3-ultragpu-8g" }
      "B200"       = { "8" = "a4-highgpu-8g" }
    }
    eks = {
      "T4"         = { "1" = "g4dn.xlarge", "4" = "g4dn.12xlarge", "8" = "g4dn.metal" }
      "A10G"       = { "1" = "g5.xlarge", "4" = "g5.12xlarge", "8" = "g5.48xlarge" }
      "L4"         = { "1" = "g6.xlarge", "4" = "g6.12xlarge", "8" = "g6.48xlarge" }
      "L40S"       = { "1" = "g6e.xlarge", "4" = "g6e.12xlarge", "8" = "g6e.48xlarge" }
      "A100-40GB"  = { "8" = "p4d.24xlarge" }
      "A100-80GB"  = { "8" = "p4de.24xlarge" }
      "H100-80GB"  = { "8" = "p5.48xlarge" }
      "H200-141GB" = { "8" = "p5e.48xlarge" }
    }
  }

  gpus_per_node = coalesce(var.gpus_per_node, 1)
  machine_type = (
    var.machine_type != null ? var.machine_type :
    try(local.machine_types[var.cloud][var.gpu_model][tostring(local.gpus_per_node)], "")
  )
  # n1 machine types carry no GPU of their own: the provider needs the model and count.
  attached = var.cloud == "gke" && startswith(local.machine_type, "n1-")
  gpu_model_override = (
    var.machine_type != null ? var.gpu_model :
    local.attached ? var.gpu_model : null
  )
  gpu_count_override = (
    var.machine_type != null ? var.gpus_per_node :
    local.attached ? local.gpus_per_node : null
  )

  # The device plugin shares the GPUs on AKS and EKS; on GKE the cloud does.
  deliver = var.cloud != "gke" && var.deliver_device_plugin_config
}

resource "fracgpu_nodepool" "this" {
  name         = var.name
  machine_type = local.machine_type
  gpu_model    = local.gpu_model_override
  gpu_count    = local.gpu_count_override
  node_count   = var.autoscaling == null ? var.node_count : null
  spot         = var.spot
  labels       = length(var.labels) > 0 ? var.labels : null
  taints       = var.taints

  dynamic "aks" {
    for_each = var.cloud == "aks" ? [var.cluster] : []
    content {
      subscription_id = aks.value.subscription_id
      resource_group  = aks.value.resource_group
      cluster_name    = aks.value.cluster_name
    }
  }

  dynamic "gke" {
    for_each = var.cloud == "gke" ? [var.cluster] : []
    content {
      project        = gke.value.project
      location       = gke.value.location
      cluster        = gke.value.cluster
      node_locations = gke.value.node_locations
    }
  }

  dynamic "eks" {
    for_each = var.cloud == "eks" ? [var.cluster] : []
    content {
      region        = eks.value.region
      cluster_name  = eks.value.cluster_name
      node_role_arn = eks.value.node_role_arn
      subnet_ids    = eks.value.subnet_ids
    }
  }

  dynamic "autoscaling" {
    for_each = var.autoscaling == null ? [] : [var.autoscaling]
    content {
      min_nodes = autoscaling.value.min_nodes
      max_nodes = autoscaling.value.max_nodes
    }
  }

  dynamic "time_slicing" {
    for_each = var.sharing.mode == "time-slicing" ? [var.sharing] : []
    content {
      replicas = time_slicing.value.replicas
    }
  }

  dynamic "mps" {
    for_each = var.sharing.mode == "mps" ? [var.sharing] : []
    content {
      replicas = mps.value.replicas
    }
  }

  dynamic "mig" {
    for_each = var.sharing.mode == "mig" ? [var.sharing] : []
    content {
      profile = mig.value.mig_profile
    }
  }
}

# The GPU operator's device plugin config: whole GPUs for nodes of other pools ("all"), and this
# pool's sharing for the nodes that carry its nvidia.com/device-plugin.config label.
resource "fracgpu_device_plugin_config" "this" {
  count = local.deliver ? 1 : 0

  kubernetes {
    config_path    = var.kubeconfig_path
    config_context = var.kubeconfig_context
  }

  default_config = "all"
  config { name = "all" }
  config {
    name = fracgpu_nodepool.this.device_plugin_config_name
    yaml = fracgpu_nodepool.this.device_plugin_config
  }
}
