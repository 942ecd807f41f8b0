terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# What does each cloud's A100 machine offer, and how can its GPUs be split?
locals {
  machines = {
    aks = "Standard_NC24ads_A100_v4"
    gke = "a2-highgpu-1g"
    eks = "p4d.24xlarge"
  }
}

data "fracgpu_machine_type" "a100" {
  for_each = local.machines
  cloud    = each.key
  name     = each.value
}

output "machines" {
  value = {
    for cloud, m in data.fracgpu_machine_type.a100 : cloud => {
      machine_type = m.name
      gpu          = "${m.gpu_count} x ${m.gpu_model} (${m.gpu_memory_mb} MiB)"
      mig_profiles = [for p in m.mig_profiles : "${p.name} x${p.instances_per_gpu}"]
    }
  }
}
