import {
  to       = fracgpu_device_plugin_config.aks
  identity = { namespace = "gpu-operator", name = "time-slicing-config" }
}
