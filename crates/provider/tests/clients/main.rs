//! The provider's cloud and Kubernetes clients against the sandbox over real HTTP, without
//! terraform: request shapes, long-running operations, retries, errors (and moto for EKS).

mod cloud_aks;
mod cloud_eks;
mod cloud_gke;
mod cloud_lists;
mod request_costs;
mod sandbox_kube_client;
