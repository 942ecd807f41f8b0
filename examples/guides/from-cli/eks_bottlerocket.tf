# Bottlerocket's device plugin reads its own settings, so by hand this takes a launch template
# whose user data holds them, and a node group that names it:
# aws ec2 create-launch-template --launch-template-name t4br \
#   --launch-template-data '{"UserData": "<base64 of the settings below>"}'
#   [settings.kubelet-device-plugins.nvidia]
#   device-sharing-strategy = "time-slicing"
#   [settings.kubelet-device-plugins.nvidia.time-slicing]
#   replicas = 10
# aws eks create-nodegroup --cluster-name sandbox-eks --nodegroup-name t4br \
#   --instance-types g4dn.xlarge --ami-type BOTTLEROCKET_x86_64_NVIDIA \
#   --launch-template name=t4br,version=1 \
#   --node-role arn:aws:iam::123456789012:role/gpu-nodes --subnets subnet-0a1 subnet-0b2 \
#   --scaling-config minSize=0,maxSize=3,desiredSize=0 \
#   --taints key=nvidia.com/gpu,value=Present,effect=NO_SCHEDULE
resource "fracgpu_nodepool" "eks_bottlerocket" {
  name         = "t4br"
  machine_type = "g4dn.xlarge"
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
    ami_type      = "BOTTLEROCKET_x86_64_NVIDIA"
  }
  # Keeps a GPU operator that runs for the cluster's other pools off these nodes: Bottlerocket
  # runs its own device plugin, and two on one node clash.
  labels = { "nvidia.com/gpu.deploy.operands" = "false" }
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  time_slicing { replicas = 10 }
}
