# One list block per cluster: every GPU pool it has, made by terraform or not.
list "fracgpu_nodepool" "aks" {
  provider = fracgpu
  config {
    aks {
      resource_group = "sandbox-rg"
      cluster_name   = "sandbox-aks"
    }
  }
}

list "fracgpu_nodepool" "gke" {
  provider = fracgpu
  config {
    gke {
      location = "us-central1"
      cluster  = "sandbox-gke"
    }
  }
}

list "fracgpu_nodepool" "eks" {
  provider = fracgpu
  config {
    eks {
      cluster_name = "sandbox-eks"
    }
  }
}
