//! What GKE holds: clusters in their zones, node pools and Operations, and the lookups every
//! handler starts with. The routes, the operations, validation and the documents all read these
//! types, so they stand apart from each of them and from the cloud's mod.rs, which only
//! re-exports.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::{GError, gerr};
use crate::operations::{Kind, Queue};

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
    /// The pool's total size as the autoscaler set it (the twin's: `autoscaler/`), while it
    /// autoscales; None until it grows the pool.
    #[serde(default)]
    pub(crate) autoscaled_total: Option<i64>,
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

/// A cluster's resource name below /v1/, as GKE writes it in documents and errors.
pub(super) fn cluster_path(c: &GkeCluster) -> String {
    format!(
        "projects/{}/locations/{}/clusters/{}",
        c.project, c.location, c.name
    )
}

pub(super) fn cluster<'a>(
    gke: &'a GkeWorld,
    p: &str,
    l: &str,
    c: &str,
) -> Result<&'a GkeCluster, GError> {
    gke.clusters.get(&format!("{p}/{l}/{c}")).ok_or_else(|| {
        gerr(
            404,
            format!("Not found: projects/{p}/locations/{l}/clusters/{c}."),
        )
    })
}

pub(super) fn pool_missing(c: &GkeCluster, name: &str) -> GError {
    gerr(
        404,
        format!("Not found: {}/nodePools/{name}.", cluster_path(c)),
    )
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
