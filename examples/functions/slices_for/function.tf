terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

output "slices" {
  # A 4000 MiB model on a T4 (15360 MiB) cut into 10 slices needs 3 slices.
  value = provider::fracgpu::slices_for(4000, 15360, 10)
}
