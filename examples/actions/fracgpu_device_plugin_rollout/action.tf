# Restart the GPU operator's device plugin daemonsets after their config changed, and wait
# until the new pods are ready: `terraform apply -invoke=action.fracgpu_device_plugin_rollout.this`.
variable "kubeconfig" {
  type = string
}

action "fracgpu_device_plugin_rollout" "this" {
  config {
    timeout = 300
    kubernetes {
      config_path = var.kubeconfig
    }
  }
}

# Or run it whenever a revision you bump changes.
resource "terraform_data" "device_plugin_revision" {
  input = 1
  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.fracgpu_device_plugin_rollout.this]
    }
  }
}
