# gcloud container node-pools create a100mig --cluster sandbox-gke --location us-central1 \
#   --machine-type a2-highgpu-1g \
#   --accelerator type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb
resource "fracgpu_nodepool" "gke_partitions" {
  name         = "a100mig"
  machine_type = "a2-highgpu-1g"
  gke {
    location = "us-central1"
    cluster  = "sandbox-gke"
  }
  mig { profile = "1g.5gb" }
}
