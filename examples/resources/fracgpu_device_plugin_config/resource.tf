terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# The cluster to configure. Against the sandbox: `fracgpu-sandbox` writes one kubeconfig per
# cluster (e.g. aks-sandbox-aks.kubeconfig); pass it with TF_VAR_kubeconfig or -var.
variable "kubeconfig" {
  type        = string
  description = "Path of the cluster's kubeconfig."
}

provider "fracgpu" {
  kubernetes {
    config_path = var.kubeconfig
  }
}

resource "fracgpu_device_plugin_config" "this" {
  namespace      = "gpu-operator"
  name           = "time-slicing-config"
  default_config = "all"

  # Whole GPUs for nodes without the nvidia.com/device-plugin.config label.
  config { name = "all" }

  # Nodes labelled nvidia.com/device-plugin.config=mps-4: four MPS clients per GPU.
  config {
    name = "mps-4"
    mps { replicas = 4 }
  }

  # Nodes labelled nvidia.com/device-plugin.config=time-sliced-10: ten slices per GPU.
  # A node pool's config plugs in the same way:
  #   config {
  #     name = fracgpu_nodepool.a100.device_plugin_config_name
  #     yaml = fracgpu_nodepool.a100.device_plugin_config
  #   }
  config {
    name = "time-sliced-10"
    time_slicing {
      replicas          = 10
      rename_by_default = true
    }
  }
}

output "data" {
  value = fracgpu_device_plugin_config.this.data
}
