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
//! The files: `routes.rs` matches GKE's paths and custom methods (and Compute Engine's instance
//! group managers), `validate.rs` reads request bodies as GKE does, `operations.rs` starts the
//! Operations and finishes them, `documents.rs` renders clusters, pools and Operations, and the
//! nodes GKE makes for a pool.

mod documents;
mod operations;
mod routes;
mod validate;

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::operations::{Kind, Queue};
use super::util::json_response;

pub(crate) use documents::{pool_json, pool_nodes, zone_sizes};
pub(crate) use routes::{Gke, instance_group_manager};

pub(crate) const GKE_VERSION: &str = "1.33.5-gke.1080000";

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct GkeWorld {
    /// Keyed by "project/location/cluster".
    pub(crate) clusters: BTreeMap<String, GkeCluster>,
    pub(crate) ops: BTreeMap<String, GkeOp>,
    /// Unfinished operations by (deadline, name).
    #[serde(default)]
    pub(crate) pending: Queue<(u64, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GkeCluster {
    pub(crate) project: String,
    pub(crate) location: String,
    pub(crate) name: String,
    pub(crate) pools: BTreeMap<String, NodePool>,
    /// The cluster's `locations`: the zones its node pools run in unless they name their own.
    #[serde(default)]
    pub(crate) zones: Vec<String>,
}

impl GkeCluster {
    /// The cluster's zones (a world saved before zones existed derives them from the location).
    pub(crate) fn zones(&self) -> Vec<String> {
        if self.zones.is_empty() {
            default_zones(&self.location)
        } else {
            self.zones.clone()
        }
    }

    /// The region the cluster is in.
    pub(crate) fn region(&self) -> &str {
        region_of(&self.location)
    }
}

/// Whether a location is a zone (`us-central1-a`) rather than a region (`us-central1`): Compute
/// Engine zone names are the region's name and a one-letter suffix.
pub(crate) fn is_zone(location: &str) -> bool {
    location.rsplit_once('-').is_some_and(|(region, z)| {
        region.contains('-') && z.len() == 1 && z.bytes().all(|b| b.is_ascii_lowercase())
    })
}

/// The region of a zone or region.
pub(crate) fn region_of(location: &str) -> &str {
    if is_zone(location) {
        location.rsplit_once('-').map_or(location, |(r, _)| r)
    } else {
        location
    }
}

/// The zones of a new cluster: its own zone, or three zones of its region.
pub(crate) fn default_zones(location: &str) -> Vec<String> {
    if is_zone(location) {
        vec![location.to_string()]
    } else {
        ["a", "b", "c"]
            .iter()
            .map(|z| format!("{location}-{z}"))
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodePool {
    pub(crate) name: String,
    pub(crate) spec: PoolSpec,
    /// PROVISIONING | RUNNING | RECONCILING | STOPPING | ERROR | RUNNING_WITH_ERROR
    pub(crate) status: String,
    pub(crate) pending: Option<Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) op: String,
    pub(crate) kind: Kind,
    pub(crate) deadline: u64,
    pub(crate) fail: bool,
    /// The spec before an update, restored when the update fails.
    pub(crate) previous: Option<Box<PoolSpec>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PoolSpec {
    pub(crate) machine_type: String,
    pub(crate) disk_size_gb: i64,
    pub(crate) disk_type: String,
    pub(crate) image_type: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// (key, value, NO_SCHEDULE | PREFER_NO_SCHEDULE | NO_EXECUTE)
    pub(crate) taints: Vec<(String, String, String)>,
    pub(crate) spot: bool,
    pub(crate) accelerators: Vec<Accelerator>,
    /// Per zone, as sent.
    pub(crate) initial_node_count: i64,
    /// The pool's current size per zone (changed by setSize): each zone's instance group's
    /// targetSize; not a field of the v1 NodePool resource.
    pub(crate) node_count: i64,
    /// The zones the pool runs in, sorted.
    #[serde(default)]
    pub(crate) locations: Vec<String>,
    pub(crate) autoscaling: Option<Autoscaling>,
    pub(crate) auto_repair: bool,
    pub(crate) auto_upgrade: bool,
    pub(crate) version: String,
    #[serde(default)]
    pub(crate) oauth_scopes: Vec<String>,
    #[serde(default)]
    pub(crate) service_account: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Accelerator {
    pub(crate) count: i64,
    pub(crate) accelerator_type: String,
    pub(crate) gpu_partition_size: Option<String>,
    /// (TIME_SHARING | MPS, maxSharedClientsPerGpu)
    pub(crate) sharing: Option<(String, i64)>,
    pub(crate) driver_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Autoscaling {
    pub(crate) enabled: bool,
    pub(crate) min_node_count: i64,
    pub(crate) max_node_count: i64,
    pub(crate) total_min_node_count: i64,
    pub(crate) total_max_node_count: i64,
    pub(crate) location_policy: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GkeOp {
    pub(crate) name: String,
    pub(crate) op_type: String,
    pub(crate) status: String,
    pub(crate) project: String,
    pub(crate) location: String,
    /// Path of the target below /v1/ (cluster or node pool).
    pub(crate) target: String,
    pub(crate) cluster: String,
    pub(crate) pool: Option<String>,
    pub(crate) start: u64,
    pub(crate) end: Option<u64>,
    pub(crate) deadline: u64,
    pub(crate) error: Option<(i32, String)>,
}

impl GkeWorld {
    pub(crate) fn add_cluster(&mut self, project: &str, location: &str, name: &str) {
        let c = GkeCluster {
            project: project.into(),
            location: location.into(),
            name: name.into(),
            pools: BTreeMap::new(),
            zones: default_zones(location),
        };
        self.clusters
            .insert(format!("{project}/{location}/{name}"), c);
    }
}

pub(crate) struct GError {
    code: u16,
    message: String,
}

pub(super) fn gerr(code: u16, message: impl Into<String>) -> GError {
    GError {
        code,
        message: message.into(),
    }
}

impl GError {
    /// google.rpc's status name of this error, e.g. RESOURCE_EXHAUSTED.
    pub(crate) fn status(&self) -> &'static str {
        status_name(self.code, &self.message)
    }
}

pub(super) fn invalid(message: impl Into<String>) -> GError {
    gerr(400, message)
}

fn status_name(code: u16, message: &str) -> &'static str {
    match code {
        400 if message.contains(" is currently ") => "FAILED_PRECONDITION",
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

impl IntoResponse for GError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let s = status_name(self.code, &self.message);
        json_response(
            status,
            &json!({"error": {"code": self.code, "message": self.message, "status": s}}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_and_regions() {
        assert!(is_zone("us-central1-a") && is_zone("europe-west4-c"));
        assert!(!is_zone("us-central1") && !is_zone("a-b"));
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
        assert_eq!(region_of("us-central1"), "us-central1");
        assert_eq!(
            default_zones("us-central1"),
            ["us-central1-a", "us-central1-b", "us-central1-c"]
        );
        assert_eq!(default_zones("us-west4-b"), ["us-west4-b"]);
    }
}
