variable "name" {
  description = "Name of the node pool. Must suit the strictest cloud you use it on: AKS allows 1 to 12 lowercase letters and digits, starting with a letter."
  type        = string

  validation {
    condition = (
      var.cloud == "aks" ? can(regex("^[a-z][a-z0-9]{0,11}$", var.name)) :
      var.cloud == "gke" ? can(regex("^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", var.name)) :
      can(regex("^[A-Za-z0-9][-A-Za-z0-9_]{0,62}$", var.name))
    )
    error_message = "var.name \"${var.name}\" is not a valid pool name on ${var.cloud}. AKS: 1 to 12 lowercase letters and digits, starting with a letter. GKE: 1 to 40 lowercase letters, digits and '-', starting with a letter. EKS: 1 to 63 letters, digits, '-' and '_'."
  }
}

variable "cloud" {
  description = "Where the pool runs: \"aks\", \"gke\" or \"eks\"."
  type        = string

  validation {
    condition     = contains(["aks", "gke", "eks"], var.cloud)
    error_message = "var.cloud is \"${var.cloud}\"; set it to \"aks\", \"gke\" or \"eks\"."
  }
}

variable "cluster" {
  description = <<-EOT
    The cluster the pool joins. Set the fields of your cloud:
    aks: resource_group, cluster_name (subscription_id optional);
    gke: location, cluster (project and node_locations optional: the pool's zones, by default
    the cluster's);
    eks: cluster_name, node_role_arn, subnet_ids (region optional).
    Optional fields default to the provider's settings.
  EOT
  type = object({
    cluster_name    = optional(string)
    resource_group  = optional(string)
    subscription_id = optional(string)
    cluster         = optional(string)
    location        = optional(string)
    project         = optional(string)
    node_locations  = optional(list(string))
    node_role_arn   = optional(string)
    subnet_ids      = optional(list(string))
    region          = optional(string)
  })

  validation {
    condition = (
      var.cloud == "aks" ? var.cluster.resource_group != null && var.cluster.cluster_name != null :
      var.cloud == "gke" ? var.cluster.location != null && var.cluster.cluster != null :
      var.cloud == "eks" ? var.cluster.cluster_name != null && var.cluster.node_role_arn != null && length(coalesce(var.cluster.subnet_ids, [])) > 0 :
      true
    )
    error_message = "var.cluster lacks a field ${var.cloud} needs. Set resource_group and cluster_name for aks; location and cluster for gke; cluster_name, node_role_arn and at least one of subnet_ids for eks."
  }
}

variable "gpu_model" {
  description = "GPU model from the provider's catalog, e.g. \"T4\", \"L4\", \"A100-40GB\", \"A100-80GB\", \"H100-80GB\". With gpus_per_node it picks the machine type of the cloud (see the module's README). With machine_type set it may be null; a non-null value then overrides the catalog's GPU model (for machine types missing from the catalog)."
  type        = string
  default     = null

  validation {
    condition = var.machine_type != null || !contains(["aks", "gke", "eks"], var.cloud) || (
      var.gpu_model != null && can(local.machine_types[var.cloud][var.gpu_model][tostring(coalesce(var.gpus_per_node, 1))])
    )
    error_message = "var.gpu_model and var.gpus_per_node (${coalesce(var.gpu_model, "null")} x ${coalesce(var.gpus_per_node, 1)}) name no machine type this module knows on ${var.cloud}. Known there: ${join("; ", [for m, counts in try(local.machine_types[var.cloud], {}) : "${m} x ${join("/", keys(counts))}"])}. Pick one of these, or set var.machine_type explicitly."
  }
}

variable "gpus_per_node" {
  description = "GPUs per node, used with gpu_model to pick the machine type (default 1). With machine_type set, a non-null value overrides the catalog's GPU count."
  type        = number
  default     = null

  validation {
    condition     = var.gpus_per_node == null || try(contains([1, 2, 4, 8, 16], var.gpus_per_node), false)
    error_message = "var.gpus_per_node must be 1, 2, 4, 8 or 16."
  }
}

variable "machine_type" {
  description = "Explicit VM size / machine type / instance type, e.g. \"Standard_NC24ads_A100_v4\", \"a2-highgpu-1g\" or \"p4d.24xlarge\". Overrides the choice made from gpu_model and gpus_per_node."
  type        = string
  default     = null
}

variable "sharing" {
  description = <<-EOT
    How workloads share each GPU:
    mode = "time-slicing" or "mps" with replicas (2 to 48 workloads per GPU), or
    mode = "mig" with mig_profile (e.g. "1g.10gb"; the GPU must support MIG).
  EOT
  type = object({
    mode        = string
    replicas    = optional(number)
    mig_profile = optional(string)
  })

  validation {
    condition     = contains(["time-slicing", "mps", "mig"], var.sharing.mode)
    error_message = "var.sharing.mode is \"${var.sharing.mode}\"; set it to \"time-slicing\", \"mps\" or \"mig\"."
  }

  validation {
    condition     = var.sharing.mode == "mig" || try(var.sharing.replicas >= 2 && var.sharing.replicas <= 48 && floor(var.sharing.replicas) == var.sharing.replicas, false)
    error_message = "var.sharing.replicas must be a whole number from 2 to 48 for mode \"${var.sharing.mode}\" (it is ${var.sharing.replicas == null ? "unset" : var.sharing.replicas})."
  }

  validation {
    condition     = var.sharing.mode != "mig" || (var.sharing.mig_profile != null && var.sharing.replicas == null)
    error_message = "With var.sharing.mode = \"mig\", set var.sharing.mig_profile (e.g. \"1g.10gb\") and leave replicas unset: a MIG profile fixes how many workloads fit on a GPU."
  }
}

variable "node_count" {
  description = "Fixed number of nodes in all (default 1; on GKE one per zone of the pool, and a total must be a multiple of the zones). Leave null when autoscaling is set."
  type        = number
  default     = null

  validation {
    condition     = var.node_count == null || try(var.node_count >= 0 && floor(var.node_count) == var.node_count, false)
    error_message = "var.node_count must be a whole number of at least 0."
  }

  validation {
    condition     = var.node_count == null || var.autoscaling == null
    error_message = "Set either var.node_count or var.autoscaling, not both."
  }
}

variable "autoscaling" {
  description = "Let the cloud's autoscaler size the pool: { min_nodes, max_nodes }. min_nodes = 0 lets an idle pool scale to zero."
  type = object({
    min_nodes = number
    max_nodes = number
  })
  default = null

  validation {
    condition     = var.autoscaling == null || try(var.autoscaling.min_nodes >= 0 && var.autoscaling.max_nodes >= 1 && var.autoscaling.min_nodes <= var.autoscaling.max_nodes, false)
    error_message = "var.autoscaling needs 0 <= min_nodes <= max_nodes and max_nodes >= 1."
  }
}

variable "spot" {
  description = "Use spot / preemptible capacity."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Node labels of your own, e.g. { team = \"ml\" }. The labels sharing needs are added by the provider."
  type        = map(string)
  default     = {}
}

variable "taints" {
  description = "Node taints as { key, value, effect }. Null keeps the provider's default nvidia.com/gpu=Present:NoSchedule (on GKE, GKE's own nvidia.com/gpu=present:NoSchedule); [] means none of yours."
  type = list(object({
    key    = string
    value  = optional(string)
    effect = string
  }))
  default = null
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the cluster, used on AKS and EKS to deliver the pool's device plugin config to the cluster's NVIDIA GPU operator. Unused on GKE."
  type        = string
  default     = null

  validation {
    condition     = !contains(["aks", "eks"], var.cloud) || !var.deliver_device_plugin_config || var.kubeconfig_path != null
    error_message = "On ${var.cloud} the NVIDIA device plugin shares the GPUs and needs its config in the cluster: set var.kubeconfig_path to the cluster's kubeconfig, or set var.deliver_device_plugin_config = false and deliver the device_plugin_config output yourself."
  }
}

variable "kubeconfig_context" {
  description = "Context of the kubeconfig to use. Default: its current context."
  type        = string
  default     = null
}

variable "deliver_device_plugin_config" {
  description = "On AKS and EKS, manage the GPU operator's device plugin config (a ConfigMap and the ClusterPolicy pointer) for this pool. A cluster has one such config: when several pools share a cluster, set false on all but one or combine their device_plugin_config outputs in one fracgpu_device_plugin_config of your own."
  type        = bool
  default     = true
}
