//! Azure Resource Manager: `Microsoft.ContainerService/managedClusters/{c}/agentPools` and the Azure
//! AD client-credentials token endpoint whose bearer tokens ARM then requires.
//!
//! Written from the ARM REST specification (containerservice, api-version 2025-10-01 and later) and
//! the ARM async-operation guidelines: PUT answers 201 (create) or 200 (update) with
//! `provisioningState` Creating/Updating and an `Azure-AsyncOperation` header; DELETE answers 202 with
//! `Location` and `Azure-AsyncOperation`; both carry `Retry-After`. Errors use the ARM shape
//! `{"error": {"code", "message", "target"?}}`.
//!
//! The files: `routes.rs` authenticates and routes like ARM, `validate.rs` reads a PUT body as the
//! resource provider does (`fields.rs` reads each property by its type, `changes.rs` tells which
//! ones an existing pool cannot change), `operations.rs` runs the async operations, `documents.rs`
//! renders a pool as ARM and its nodes as AKS show it, `token.rs` is Azure AD's token endpoint;
//! `world.rs` holds the clusters, pools and operations they all read, `error.rs` ARM's error shape.
//! This file only re-exports, so that none of them reaches back into it.

mod changes;
mod documents;
mod error;
mod fields;
mod operations;
mod routes;
mod token;
mod validate;
mod world;

pub(crate) use documents::{pool_json, pool_nodes};
pub(crate) use routes::Arm;
pub(crate) use token::token;
pub use world::AksWorld;
