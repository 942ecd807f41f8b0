# A node pool is imported by its cloud's own ID.
# AKS: the ARM resource ID of the agent pool
terraform import fracgpu_nodepool.inference /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/a100ts
# GKE: projects/PROJECT/locations/LOCATION/clusters/CLUSTER/nodePools/NAME
terraform import fracgpu_nodepool.partitions projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/a100mig
# EKS: CLUSTER:NODEGROUP (the region comes from the provider)
terraform import fracgpu_nodepool.t4 sandbox-eks:t4mps
