# The ConfigMap's namespace and name (delivery "cluster_policy"). The config blocks are rebuilt
# from the ConfigMap in name order.
terraform import fracgpu_device_plugin_config.this gpu-operator/time-slicing-config
