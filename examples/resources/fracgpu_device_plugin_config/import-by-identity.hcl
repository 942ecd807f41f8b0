# An identity names the ConfigMap alone, so it imports delivery "cluster_policy"; a config that
# another delivery writes imports by its ID (`helm:<namespace>/<release>/<configmap>`, ...).
import {
  to       = fracgpu_device_plugin_config.aks
  identity = { namespace = "gpu-operator", name = "time-slicing-config" }
}
