terraform {
  required_providers {
    fracgpu = { source = "fracgpu/fracgpu" }
  }
}

provider "fracgpu" {
  # Point every cloud and Kubernetes API at a running fracgpu-sandbox (or set FRACGPU_SANDBOX).
  # sandbox = "http://127.0.0.1:8787"
}
