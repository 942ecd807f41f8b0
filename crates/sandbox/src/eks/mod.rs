//! Amazon EKS managed node groups (restJson1): clusters (list, describe), node groups (create,
//! describe, list, delete, update-config, update-version) and updates (describe, list); and the
//! Auto Scaling group behind each node group with the Auto Scaling tag calls (awsQuery).
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
//! group and its tags, `autoscaling.rs` serves the Auto Scaling API over `query.rs`'s awsQuery
//! protocol; `world.rs` holds the clusters, node groups
//! and updates they all read, `error.rs` EKS's error shape. This file only re-exports, so that none
//! of them reaches back into it.

mod asg;
mod autoscaling;
mod documents;
mod error;
mod operations;
mod query;
mod routes;
mod sigv4;
mod validate;
mod world;

pub(crate) use autoscaling::AutoScaling;
pub(crate) use documents::{nodegroup_json, pool_nodes};
pub(crate) use routes::Eks;
pub(crate) use world::EksWorld;
