# Bad input is refused by the module's validation. Every run is a plan that makes no cloud call,
# so this file needs neither a sandbox nor credentials; each run names the variable whose
# validation must fail. The cluster names a subscription so that the provider can plan the pool
# where a run leaves it valid (aks_without_kubeconfig) without one from the environment.

variables {
  name            = "t4ts"
  cloud           = "aks"
  cluster         = { subscription_id = "00000000-0000-0000-0000-000000000000", resource_group = "sandbox-rg", cluster_name = "sandbox-aks" }
  gpu_model       = "T4"
  sharing         = { mode = "time-slicing", replicas = 4 }
  kubeconfig_path = "kubeconfig"
}

run "unknown_cloud" {
  command = plan
  variables {
    cloud = "azure"
  }
  expect_failures = [var.cloud]
}

run "gpu_not_offered_on_the_cloud" {
  command = plan
  variables {
    cloud     = "eks"
    cluster   = { cluster_name = "sandbox-eks", node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes", subnet_ids = ["subnet-0a1"] }
    gpu_model = "B200"
  }
  expect_failures = [var.gpu_model]
}

run "gpu_count_without_machine_type" {
  command = plan
  variables {
    gpus_per_node = 2
  }
  expect_failures = [var.gpu_model]
}

run "cluster_field_missing" {
  command = plan
  variables {
    cloud   = "eks"
    cluster = { cluster_name = "sandbox-eks", subnet_ids = ["subnet-0a1"] }
  }
  expect_failures = [var.cluster]
}

run "pool_name_too_long_for_aks" {
  command = plan
  variables {
    name = "inference-t4"
  }
  expect_failures = [var.name]
}

run "mig_without_profile" {
  command = plan
  variables {
    gpu_model = "A100-80GB"
    sharing   = { mode = "mig" }
  }
  expect_failures = [var.sharing]
}

run "too_many_replicas" {
  command = plan
  variables {
    sharing = { mode = "time-slicing", replicas = 64 }
  }
  expect_failures = [var.sharing]
}

run "node_count_and_autoscaling" {
  command = plan
  variables {
    node_count  = 2
    autoscaling = { min_nodes = 1, max_nodes = 3 }
  }
  expect_failures = [var.node_count]
}

run "aks_without_kubeconfig" {
  command = plan
  variables {
    kubeconfig_path = null
  }
  expect_failures = [var.kubeconfig_path]
}
