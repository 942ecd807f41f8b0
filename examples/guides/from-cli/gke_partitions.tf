# gcloud container node-pools create a100mig --cluster sandbox-gke --location us-central1 \
#   --machine-type a2-highgpu-1g --num-nodes 1 \
#   --accelerator type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb
#
# --num-nodes is per zone: one node in each of the regional cluster's three zones, three in all.
# node_count is the pool's total, so the same pool says 3 (or leaves it out: one per zone).
resource "fracgpu_nodepool" "gke_partitions" {
  name         = "a100mig"
  machine_type = "a2-highgpu-1g"
  node_count   = 3
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  mig { profile = "1g.5gb" }
}
