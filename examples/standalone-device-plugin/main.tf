# A time-sliced T4 pool on an AKS cluster that runs no GPU operator: NVIDIA's standalone device
# plugin chart (`helm install nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin`) runs the
# plugin, and the pool's config reaches it through that release. Against the sandbox, the tests
# install the chart on a cluster of `fracgpu-sandbox` and pass its kubeconfig, the chart and helm.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

variable "kubeconfig" {
  description = "Path of the cluster's kubeconfig."
  type        = string
}

variable "chart" {
  description = "The chart `helm upgrade` is given: a repository's, or a path."
  type        = string
  default     = "nvdp/nvidia-device-plugin"
}

variable "helm_path" {
  description = "The helm executable (3 or 4)."
  type        = string
  default     = "helm"
}

resource "fracgpu_nodepool" "t4" {
  name         = "t4ts"
  machine_type = "Standard_NC4as_T4_v3"
  node_count   = 2
  aks {
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }
  time_slicing { replicas = 4 }
}

resource "fracgpu_device_plugin_config" "this" {
  delivery       = "nvidia_device_plugin"
  default_config = "all"
  kubernetes {
    config_path = var.kubeconfig
  }
  config { name = "all" }
  config {
    name = fracgpu_nodepool.t4.device_plugin_config_name
    yaml = fracgpu_nodepool.t4.device_plugin_config
  }
  nvidia_device_plugin {
    release   = "nvdp"
    namespace = "nvidia-device-plugin"
    chart     = var.chart
    helm_path = var.helm_path
  }
}

# What a workload on the pool asks for: one of the four slices of a T4.
output "resource_name" {
  value = fracgpu_nodepool.t4.resource_name
}
