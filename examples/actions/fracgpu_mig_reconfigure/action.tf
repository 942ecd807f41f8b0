# Move a MIG pool's nodes to another geometry one node at a time, each drained first:
# `terraform apply -invoke=action.fracgpu_mig_reconfigure.this`.
variable "kubeconfig" {
  type = string
}

variable "node_selector" {
  description = "The pool's labels, e.g. fracgpu_nodepool.<name>.node_selector."
  type        = map(string)
  default     = { "eks.amazonaws.com/nodegroup" = "a100mig" }
}

action "fracgpu_mig_reconfigure" "this" {
  config {
    node_selector   = var.node_selector
    config          = "all-2g.10gb"
    max_unavailable = 1
    node_timeout    = 1800
    kubernetes {
      config_path = var.kubeconfig
    }
  }
}
