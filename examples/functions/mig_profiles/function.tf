terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

output "a100_profiles" {
  # ["1g.5gb x7", "1g.5gb+me x1", "1g.10gb x4", ...]
  value = [for p in provider::fracgpu::mig_profiles("A100-40GB") : "${p.name} x${p.instances_per_gpu}"]
}
