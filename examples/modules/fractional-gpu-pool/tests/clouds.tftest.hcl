# The module on each cloud, applied for real: against a fracgpu-sandbox, or against real clusters
# of your own (then change the cluster fields below). The provider reads FRACGPU_SANDBOX:
#
#   FRACGPU_SANDBOX=http://127.0.0.1:8787 terraform test \
#     -var 'kubeconfigs={aks = "<dir>/aks-sandbox-aks.kubeconfig", eks = "<dir>/eks-sandbox-eks.kubeconfig"}'
#
# The runs share one state, so each one changes the pool of the run before it (a new cloud
# replaces it) and `terraform test` destroys what is left at the end.

run "aks_time_slicing" {
  variables {
    name            = "t4ts"
    cloud           = "aks"
    cluster         = { resource_group = "sandbox-rg", cluster_name = "sandbox-aks" }
    gpu_model       = "T4"
    sharing         = { mode = "time-slicing", replicas = 4 }
    labels          = { team = "ml" }
    kubeconfig_path = var.kubeconfigs["aks"]
  }

  assert {
    condition     = output.machine_type == "Standard_NC4as_T4_v3"
    error_message = "T4 x 1 on AKS should be Standard_NC4as_T4_v3, not ${output.machine_type}."
  }
  assert {
    condition     = output.resource_name == "nvidia.com/gpu" && output.slices_per_node == 4
    error_message = "Workloads should request nvidia.com/gpu, 4 per node; got ${output.resource_name}, ${output.slices_per_node}."
  }
  assert {
    condition     = output.memory_per_slice_mb == 3840
    error_message = "A quarter of a T4 is 3840 MiB, not ${output.memory_per_slice_mb}."
  }
  assert {
    condition     = output.node_selector == tomap({ "agentpool" = "t4ts", "nvidia.com/device-plugin.config" = "fracgpu-t4ts" })
    error_message = "Unexpected node_selector: ${jsonencode(output.node_selector)}."
  }
  assert {
    condition     = output.tolerations[0].key == "nvidia.com/gpu" && output.tolerations[0].effect == "NoSchedule"
    error_message = "Workloads should tolerate the default GPU taint: ${jsonencode(output.tolerations)}."
  }
  assert {
    condition     = output.device_plugin_config_id == "gpu-operator/time-slicing-config"
    error_message = "The device plugin config should be delivered to the GPU operator, got ${jsonencode(output.device_plugin_config_id)}."
  }
}

run "gke_time_sharing" {
  variables {
    name            = "t4ts"
    cloud           = "gke"
    cluster         = { location = "us-central1", cluster = "sandbox-gke" }
    gpu_model       = "T4"
    sharing         = { mode = "time-slicing", replicas = 4 }
    kubeconfig_path = null
  }

  assert {
    condition     = output.machine_type == "n1-standard-4" && output.gpu.model == "T4" && output.gpu.count == 1
    error_message = "T4 x 1 on GKE should be one T4 attached to n1-standard-4, got ${output.machine_type} with ${jsonencode(output.gpu)}."
  }
  assert {
    condition     = output.resource_name == "nvidia.com/gpu" && output.slices_per_node == 4
    error_message = "Workloads should request nvidia.com/gpu, 4 per node; got ${output.resource_name}, ${output.slices_per_node}."
  }
  assert {
    condition     = output.node_selector["cloud.google.com/gke-nodepool"] == "t4ts" && output.node_selector["cloud.google.com/gke-max-shared-clients-per-gpu"] == "4"
    error_message = "Unexpected node_selector: ${jsonencode(output.node_selector)}."
  }
  assert {
    condition     = output.device_plugin_config_name == null && output.device_plugin_config_id == null
    error_message = "GKE shares the GPUs itself: nothing should go to the cluster."
  }
}

run "eks_mps" {
  variables {
    name            = "l4mps"
    cloud           = "eks"
    cluster         = { cluster_name = "sandbox-eks", node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes", subnet_ids = ["subnet-0a1"] }
    gpu_model       = "L4"
    gpus_per_node   = 4
    sharing         = { mode = "mps", replicas = 2 }
    autoscaling     = { min_nodes = 1, max_nodes = 3 }
    kubeconfig_path = var.kubeconfigs["eks"]
  }

  assert {
    condition     = output.machine_type == "g6.12xlarge"
    error_message = "L4 x 4 on EKS should be g6.12xlarge, not ${output.machine_type}."
  }
  assert {
    condition     = output.resource_name == "nvidia.com/gpu" && output.slices_per_node == 8
    error_message = "4 GPUs x 2 MPS clients should offer 8 nvidia.com/gpu per node; got ${output.resource_name}, ${output.slices_per_node}."
  }
  assert {
    condition     = output.node_selector == tomap({ "eks.amazonaws.com/nodegroup" = "l4mps", "nvidia.com/device-plugin.config" = "fracgpu-l4mps" })
    error_message = "Unexpected node_selector: ${jsonencode(output.node_selector)}."
  }
}

run "aks_mig_plan" {
  command = plan

  variables {
    name            = "a100mig"
    cloud           = "aks"
    cluster         = { resource_group = "sandbox-rg", cluster_name = "sandbox-aks" }
    gpu_model       = "A100-80GB"
    sharing         = { mode = "mig", mig_profile = "1g.10gb" }
    kubeconfig_path = var.kubeconfigs["aks"]
  }

  assert {
    condition     = output.machine_type == "Standard_NC24ads_A100_v4"
    error_message = "A100-80GB x 1 on AKS should be Standard_NC24ads_A100_v4, not ${output.machine_type}."
  }
  assert {
    condition     = output.resource_name == "nvidia.com/mig-1g.10gb" && output.slices_per_node == 7 && output.memory_per_slice_mb == 10240
    error_message = "1g.10gb on an A100 80GB should offer 7 nvidia.com/mig-1g.10gb of 10240 MiB; got ${output.resource_name}, ${output.slices_per_node}, ${output.memory_per_slice_mb}."
  }
}

run "explicit_machine_type" {
  command = plan

  variables {
    name            = "a100ts"
    cloud           = "aks"
    cluster         = { resource_group = "sandbox-rg", cluster_name = "sandbox-aks" }
    gpu_model       = null
    machine_type    = "Standard_NC24ads_A100_v4"
    sharing         = { mode = "time-slicing", replicas = 10 }
    kubeconfig_path = var.kubeconfigs["aks"]
  }

  assert {
    condition     = output.gpu.model == "A100-80GB" && output.slices_per_node == 10
    error_message = "An explicit machine type should be taken as the catalog knows it, got ${jsonencode(output.gpu)} and ${output.slices_per_node} slices."
  }
}
