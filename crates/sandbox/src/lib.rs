//! Local emulators of the cloud APIs the provider calls: Azure Resource Manager agent pools (with
//! its token endpoint), GKE v1 node pools and EKS managed node groups, plus fault injection, an
//! inventory and state persistence. Served by `fracgpu-sandbox` on one loopback port; `demo` runs the
//! README's quick start against it.
//!
//! The sandbox is an independent oracle: every request and response type here is written from the
//! clouds' public API documents and never shared with the provider's clients, so a mapping bug in the
//! provider cannot pass on both sides. Operations are asynchronous like the real services: a mutation
//! puts a pool in a transitional state that settles after `Config::op_time` (zero allowed), either by
//! a timer or by the next request that looks at the world, whichever comes first.
//!
//! Routes (one axum `Router`, see [`Sandbox::router`] and `routes.rs`):
//! - `POST /{tenant}/oauth2/v2.0/token`: Azure AD client-credentials tokens (`arm/token.rs`)
//! - `/subscriptions/...`: ARM agentPools and the async operation documents (`arm/`)
//! - `/v1/projects/...`: GKE v1 clusters, nodePools and operations (`gke/`)
//! - `/clusters/...`: EKS clusters, node groups and updates (`eks/`)
//! - `POST /`: Amazon EC2 Auto Scaling (awsQuery), the node groups' Auto Scaling groups and their
//!   tags (`eks/autoscaling.rs`)
//! - `/_sandbox/faults`, `/_sandbox/chaos`: fault injection (`faults.rs`); `/_sandbox/inventory`
//!   (`inventory.rs`), `/_sandbox/autoscaler` (the twin's cluster-autoscaler decisions,
//!   `autoscaler/`), `/_sandbox/health`: the control plane
//! - `/k8s/{cloud}/{cluster}/...` is reserved for the Kubernetes emulator ([`kube`], built separately),
//!   mounted with [`Sandbox::router_with`] and fed pools' nodes through a [`NodeSink`].
//!
//! Every cloud is reached the same way (`api.rs`) and its operations finish the same way
//! (`operations.rs`); the modules of a cloud hold only what its public API makes different.
//!
//! The core, one concern a module: `config.rs` (how a sandbox starts), `world.rs` (what the
//! emulators hold), `context.rs` (what a handler gets besides the world), `handle.rs` (the shared
//! [`Sandbox`]: locking, settling, timers) and `persist.rs` (the state file). This file only
//! re-exports them, under the paths the sandbox has always had.

mod api;
pub mod apiserver;
mod arm;
mod autoscaler;
mod catalog;
mod config;
mod context;
mod dates;
pub mod demo;
mod eks;
mod faults;
mod gke;
mod handle;
mod inventory;
pub mod kube;
mod nodes;
mod operations;
mod persist;
mod routes;
pub mod stack;
mod util;
mod world;

pub(crate) use config::AWS_ACCOUNT;
pub use config::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION, Latency, PodBuffers};
pub use context::Ctx;
pub use handle::{Sandbox, WeakSandbox};
pub use nodes::{NodeEvent, NodeSink, OsImage, PoolNodes, RecordingSink};
pub use persist::SandboxError;
pub(crate) use persist::write_atomic;
pub use world::World;
