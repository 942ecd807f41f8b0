//! The provisioners a shared GPU pool can be made by, one file each beside the resource, so
//! that nothing else names a cloud: what each must say is in `node_class` (the [`Provisioner`]
//! the renderer asks, the [`ProvisionerKind`] its block of the schema is), the list in
//! `registry`. Adding a provisioner: a file here implementing both (`nap` is the smaller), one
//! line in `registry::PROVISIONERS`.
//!
//! - `eks`: Karpenter on EKS, with an `EC2NodeClass` (and Bottlerocket's host device plugin).
//! - `nap`: AKS node auto-provisioning, with an `AKSNodeClass`.

pub mod eks;
pub mod nap;
pub mod node_class;
pub mod registry;

pub use eks::{AmiFamily, Aws, Ec2Class};
pub use nap::{AksClass, Nap};
pub use node_class::{
    ApiKind, GpuChoice, NODE_OVERLAY, NODE_POOL, NodeClass, Provisioner, ProvisionerKind,
};
pub use registry::{BLOCK_NAMES, PROVISIONERS, ProvisionerBlock};
