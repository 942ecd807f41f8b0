terraform {
  # Validation rules that look at other variables need Terraform 1.9.
  required_version = ">= 1.9"

  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}
