terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

output "time_sliced_10" {
  # The YAML the NVIDIA device plugin reads, for a GPU operator's devicePlugin.config.data.
  value = provider::fracgpu::device_plugin_config("time-slicing", 10)
}
