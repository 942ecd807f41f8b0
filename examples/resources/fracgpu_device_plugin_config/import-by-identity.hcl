# An identity names the ConfigMap alone: the provider looks at what points the device plugin at
# it (the ClusterPolicy and the Helm release that made it, an Argo CD Application or Flux
# HelmRelease, a release of NVIDIA's standalone chart) and imports it through that delivery.
# Where it may not look, it says so and imports delivery "cluster_policy"; an import by ID
# (`helm:<namespace>/<release>/<configmap>`, ...) names the delivery itself.
import {
  to       = fracgpu_device_plugin_config.aks
  identity = { namespace = "gpu-operator", name = "time-slicing-config" }
}
