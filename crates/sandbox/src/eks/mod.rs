//! Amazon EKS managed node groups (restJson1): clusters (list, describe), node groups (create,
//! describe, list, delete, update-config, update-version) and updates (describe, list); the
//! Auto Scaling group behind each node group with the Auto Scaling tag calls (awsQuery); and the
//! EC2 launch templates a node group can name (EC2 Query).
//!
//! Written from the EKS API reference. Errors are restJson1: the type in the `x-amzn-ErrorType`
//! header and a JSON body `{"message": ...}` (plus clusterName/nodegroupName where EKS adds them).
//! Requests must carry a well-formed SigV4 `Authorization` header; the signature itself is not
//! checked (any key works), but the credential scope's region selects the cluster's region.
//!
//! The files: `sigv4.rs` checks the Authorization header, `routes.rs` maps restJson1 paths to
//! operations and answers the reads, `validate.rs` reads request bodies as EKS does, `operations.rs`
//! runs node group creates, updates and deletes, `documents.rs` renders node groups, updates and
//! clusters, and the nodes EKS makes for a node group; `asg.rs` models a node group's Auto Scaling
//! group, its instances and tags, `autoscaling.rs` serves the Auto Scaling API over `query.rs`'s
//! awsQuery protocol, `scaling.rs` the calls that size a group; `launch_templates.rs` models EC2 launch templates, which `ec2.rs` serves over EC2's
//! flavour of the protocol (`ec2_query.rs`) and node groups name; `world.rs` holds the clusters,
//! node groups and updates they all read, `error.rs` EKS's error shape. This file only
//! re-exports (and tells EC2 from Auto Scaling on their shared root), so that none of them
//! reaches back into it.

mod asg;
mod autoscaling;
mod documents;
mod ec2;
mod ec2_query;
mod error;
mod launch_templates;
mod operations;
mod query;
mod routes;
mod scaling;
mod sigv4;
mod validate;
mod world;

pub(crate) use autoscaling::AutoScaling;
pub(crate) use ec2::Ec2;

/// Whether a request to the shared awsQuery root (`POST /`) is for EC2 rather than Auto Scaling:
/// real AWS tells them apart by host (`ec2.<region>.amazonaws.com`, `autoscaling.<region>...`),
/// the sandbox, which serves both on one address, by the service its SigV4 credential scope names.
pub(crate) fn is_ec2(headers: &axum::http::HeaderMap) -> bool {
    sigv4::scope_service(headers) == Some("ec2")
}
pub(crate) use documents::{nodegroup_json, pool_nodes};
pub(crate) use routes::Eks;
pub(crate) use world::EksWorld;
