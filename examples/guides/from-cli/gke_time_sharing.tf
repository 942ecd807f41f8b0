# gcloud container node-pools create t4ts --cluster sandbox-gke --location us-central1 \
#   --machine-type n1-standard-4 --enable-autoscaling --min-nodes 0 --max-nodes 3 \
#   --accelerator type=nvidia-tesla-t4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10
resource "fracgpu_nodepool" "gke_time_shared" {
  name         = "t4ts"
  machine_type = "n1-standard-4"
  gpu_model    = "nvidia-tesla-t4"
  gpu_count    = 1
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  autoscaling {
    min_nodes = 0
    max_nodes = 3
  }
  # On GKE the cloud shares the GPU itself (gpuSharingConfig): no device plugin config needed.
  time_slicing { replicas = 10 }
}
