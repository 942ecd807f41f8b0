# The identity spells out the cloud, the cluster's coordinates and the pool's name; what the
# provider defaults (subscription, project, region) may be left out.
import {
  to       = fracgpu_nodepool.aks
  identity = { cloud = "aks", resource_group = "sandbox-rg", cluster = "sandbox-aks", name = "a100ts" }
}

import {
  to       = fracgpu_nodepool.gke
  identity = { cloud = "gke", location = "us-central1", cluster = "sandbox-gke", name = "a100mig" }
}

import {
  to       = fracgpu_nodepool.eks
  identity = { cloud = "eks", cluster = "sandbox-eks", name = "t4mps" }
}
