# The HCL of the "From CLI commands to HCL" guide. Each *.tf file here replaces one CLI step.
terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

variable "kubeconfig" {
  description = "Kubeconfig of the AKS cluster whose GPU operator receives the device plugin configs."
  type        = string
}

# Credentials come from the usual places (ARM_*, ADC, the AWS chain), or from the sandbox when
# FRACGPU_SANDBOX is set.
provider "fracgpu" {
  kubernetes {
    config_path = var.kubeconfig
  }
}
