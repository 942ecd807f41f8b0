//! terraform-provider-fracgpu: fractional GPUs on Kubernetes, declared with Terraform.
//!
//! # Layout
//! - `plugin`: the protocol layer: go-plugin handshake, AutoMTLS, the gRPC services and the conversion
//!   between protobuf messages and the `tf` model. Knows nothing of GPUs or clouds.
//! - `tf`: Terraform's data model: values (null, unknown, refined unknown, known), types, the msgpack
//!   and JSON codecs, attribute paths, diagnostics, the schema builder and plan helpers.
//! - `provider`: the provider's own schema and configuration, and the registry of its resources,
//!   data sources and functions.
//! - `cloud`: one `NodePools` trait and a client per cloud (AKS, GKE, EKS): mapping, long-running
//!   operations, retries, error mapping.
//! - `data_sources`: one file per data source.
//! - `resources`: one file per resource (`fracgpu_nodepool`, `fracgpu_device_plugin_config`).
//! - `functions`: provider-defined functions (`provider::fracgpu::...`).
//! - `gpu`: the domain, pure: the GPU and machine-type catalog, the sharing model (validation and
//!   derived placement facts), workload fit, device plugin config documents. No I/O.
//! - `model`: schema pieces and conversions shared by resources and data sources (sharing blocks,
//!   taints, domain errors as diagnostics).
//! - `docs`: registry-style documentation rendered from the schemas and the examples.
//! - `demo`: the quick start run by `fracgpu-sandbox demo`.
//! - `kube`: Kubernetes delivery of the device plugin config (ConfigMap, ClusterPolicy pointer,
//!   device plugin restart) and reading Helm release Secrets.
//! - `bounded`: a size and time bound on HTTP answer bodies, for the clients (kube, the AWS SDK)
//!   that read bodies whole without one.
//! - `sandbox`: local emulators of the cloud and Kubernetes APIs (served by `fracgpu-sandbox`).

pub mod bounded;
pub mod cloud;
pub mod data_sources;
pub mod demo;
pub mod docs;
pub mod functions;
pub mod gpu;
pub mod kube;
pub mod model;
pub mod plugin;
pub mod provider;
pub mod resources;
pub mod sandbox;
pub mod tf;
