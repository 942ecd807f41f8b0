# gcloud container node-pools create t4ts --cluster sandbox-gke --location us-central1 \
#   --machine-type n1-standard-4 --node-locations us-central1-a,us-central1-b \
#   --enable-autoscaling --total-min-nodes 0 --total-max-nodes 4 \
#   --accelerator type=nvidia-tesla-t4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10
#
# The autoscaling bounds are the pool's totals, as --total-min-nodes/--total-max-nodes give them;
# gcloud's --min-nodes/--max-nodes would be per zone.
resource "fracgpu_nodepool" "gke_time_shared" {
  name         = "t4ts"
  machine_type = "n1-standard-4"
  gpu_model    = "nvidia-tesla-t4"
  gpu_count    = 1
  gke {
    location       = "us-central1"
    cluster        = "sandbox-gke"
    node_locations = ["us-central1-a", "us-central1-b"]
  }
  autoscaling {
    min_nodes = 0
    max_nodes = 4
  }
  # On GKE the cloud shares the GPU itself (gpuSharingConfig): no device plugin config needed.
  time_slicing { replicas = 10 }
}
