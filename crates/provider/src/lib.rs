//! terraform-provider-fracgpu: fractional GPUs on Kubernetes, declared with Terraform.
//!
//! # Layout
//! The workspace's crates carry the layering, so the compiler keeps data flowing one way:
//! terraform -> `tfplugin` (decode) -> this crate's handlers (typed models) -> `gpu` (validate,
//! derive) -> the cloud and Kubernetes clients -> back up as state and diagnostics.
//! - `tfplugin` (crates/tfplugin): the plugin protocol and Terraform's value model; knows nothing
//!   of GPUs or clouds.
//! - `gpu` (crates/gpu): the domain, pure: catalog, sharing rules, placement, device plugin
//!   config documents. No I/O.
//! - this crate: the provider itself.
//! - `sandbox` (crates/sandbox): the emulators behind `fracgpu-sandbox`. It depends on none of the
//!   others, so it stays an independent oracle; only this crate's tests use it.
//!
//! This crate's modules:
//! - `provider`: the provider's own schema, and the registry of its resources, data sources,
//!   functions and lists; nothing imports it back.
//! - `state`: the provider's configuration and what every resource shares (the clients built on
//!   first use, the stop signal, the refresh's shared reads).
//! - `cloud`: one `NodePools` trait and a client per target (AKS, GKE, EKS), each in a folder
//!   with its descriptor (`target`: its blocks, settings, names, import IDs) beside its client
//!   (mapping, long-running operations, retries, error mapping); `registry` lists the targets.
//! - `cluster`: a cluster's Kubernetes API (named so as not to shadow the `kube` crate it uses):
//!   delivery of the device plugin config (ConfigMap, ClusterPolicy pointer, device plugin
//!   restart), Helm releases, and the Karpenter objects of a shared GPU pool (applied and read in
//!   `karpenter_api`; rendered by `resources::karpenter_nodepool`, one file per provisioner).
//! - `resources`: one directory per resource (`fracgpu_nodepool`, `fracgpu_device_plugin_config`):
//!   schema, typed model, plan, and short handlers; the node pool's `discovery` finds the pools a
//!   cluster has, for its list and the `fracgpu_nodepools` data source.
//! - `actions`: the actions `terraform apply -invoke` and `action_trigger` run
//!   (`fracgpu_device_plugin_rollout`).
//! - `list_resources`: the lists `terraform query` reads (`list "fracgpu_nodepool"`,
//!   `list "fracgpu_karpenter_nodepool"`).
//! - `data_sources`: one file per data source.
//! - `functions`: provider-defined functions (`provider::fracgpu::...`).
//! - `model`: schema pieces and conversions shared by resources and data sources (sharing blocks,
//!   taints, domain errors as diagnostics).
//! - `docs`: registry-style documentation rendered from the schemas and the examples.
//! - `operation`: how every wait ends: the stop signal, an operation's deadline, backoff, and the
//!   one poll and retry loops.
//! - `bounded`: a size and time bound on HTTP answer bodies, for the clients (kube, the AWS SDK)
//!   that read bodies whole without one.

#![warn(unreachable_pub)]

pub mod actions;
pub mod bounded;
pub mod cloud;
pub mod cluster;
pub mod data_sources;
pub mod docs;
pub mod functions;
pub mod list_resources;
pub mod model;
pub mod operation;
pub mod provider;
pub mod resources;
pub mod state;
