# With delivery "cluster_policy": the ConfigMap's namespace and name. The config blocks are
# rebuilt from the ConfigMap in name order.
terraform import fracgpu_device_plugin_config.this gpu-operator/time-slicing-config

# With another delivery: its name, a colon, the namespace and name of the object it writes (the
# release, Application or HelmRelease), then the ConfigMap's name. The ConfigMap's namespace is
# the release's, or the destination the Application or HelmRelease installs the chart into.
terraform import fracgpu_device_plugin_config.this helm:gpu-operator/gpu-operator/time-slicing-config
terraform import fracgpu_device_plugin_config.this nvidia_device_plugin:nvidia-device-plugin/nvdp/time-slicing-config
terraform import fracgpu_device_plugin_config.this argocd:argocd/gpu-operator/time-slicing-config
terraform import fracgpu_device_plugin_config.this flux:flux-system/gpu-operator/time-slicing-config

# What the cluster does not keep (a release's chart and helm_path, a values_path, the resource's
# kubernetes block) the first plan after the import sets in place. An import reaches the cluster
# through the provider's kubernetes block (or KUBECONFIG), since it has only the ID.
