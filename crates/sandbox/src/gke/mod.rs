//! GKE v1 (container.googleapis.com): clusters (GET, with nodePools), nodePools (create, get, list,
//! update, setSize, setAutoscaling, setManagement, delete) and the Operations they return.
//!
//! Written from the GKE v1 REST reference. The official Rust client sends `$alt=json;enum-encoding=int`
//! (enums as integers, int64 as strings) and gcloud sends string enums, so every enum accepts both
//! forms and every integer accepts a number or a decimal string. Responses always use string enums.
//! Errors are google.rpc statuses: `{"error": {"code", "message", "status"}}`.
//!
//! Clusters live in zones, as on GKE. A regional cluster (its location a region, `us-central1`) has
//! three, `<region>-a`, `-b` and `-c`; a zonal one (location `us-central1-a`) has its own zone. A pool
//! runs in its `locations` (default: the cluster's) with one Compute Engine instance group per zone,
//! and every count of the v1 API is per zone: `initialNodeCount`, setSize's `nodeCount`, autoscaling's
//! `minNodeCount`/`maxNodeCount` ("per zone", the google provider's schema of
//! resource_container_node_pool.go; gcloud's `--num-nodes`), while `totalMinNodeCount` and
//! `totalMaxNodeCount` bound the whole pool. So `initialNodeCount: 1` on a regional cluster makes
//! three nodes. A pool is refused when its accelerator is not offered in one of its zones.
//!
//! The files: `routes.rs` matches GKE's paths and custom methods, `compute.rs` Compute Engine's
//! instance group managers, `validate.rs` reads request bodies as GKE does (`accelerators.rs` a
//! pool's GPUs, `fields.rs` each field by its type), `operations.rs` starts the Operations and
//! finishes them, `documents.rs` renders clusters, pools and Operations, and the nodes GKE makes
//! for a pool; `world.rs` holds the clusters, pools and Operations they all read, `error.rs` GKE's
//! error shape. This file only re-exports, so that none of them reaches back into it.

mod accelerators;
mod compute;
mod documents;
mod error;
mod fields;
mod operations;
mod routes;
mod validate;
mod world;

pub(crate) use compute::instance_group_manager;
pub(crate) use documents::{pool_json, pool_nodes, zone_sizes};
pub(crate) use routes::Gke;
pub(crate) use world::GkeWorld;
