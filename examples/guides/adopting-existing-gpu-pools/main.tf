# The configuration of the "Adopting existing GPU pools" guide: the provider `terraform query`
# uses, and the directory the generated resource and import blocks are written to.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

# Credentials come from the usual places (ARM_*, ADC, the AWS chain), or from the sandbox when
# FRACGPU_SANDBOX is set.
provider "fracgpu" {}
