# aws eks create-nodegroup --cluster-name sandbox-eks --nodegroup-name t4ts \
#   --instance-types g4dn.xlarge --ami-type AL2023_x86_64_NVIDIA \
#   --node-role arn:aws:iam::123456789012:role/gpu-nodes --subnets subnet-0a1 subnet-0b2 \
#   --scaling-config minSize=1,maxSize=4,desiredSize=1 \
#   --labels nvidia.com/device-plugin.config=time-sliced-10 \
#   --taints key=nvidia.com/gpu,value=Present,effect=NO_SCHEDULE
resource "fracgpu_nodepool" "eks_time_sliced" {
  name         = "t4ts"
  machine_type = "g4dn.xlarge"
  eks {
    cluster_name  = "sandbox-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-0a1", "subnet-0b2"]
  }
  autoscaling {
    min_nodes = 1
    max_nodes = 4
  }
  time_slicing { replicas = 10 }
}
