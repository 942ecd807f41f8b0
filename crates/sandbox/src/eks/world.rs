//! What EKS holds: clusters with their managed node groups and the updates made to them, EKS's
//! quotas, and the lookups every handler starts with. The routes, the operations, validation and
//! the documents all read these types, so they stand apart from each of them and from the cloud's
//! mod.rs, which only re-exports.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{AwsError, aws};
use super::launch_templates::LaunchTemplate;
use crate::operations::{Kind, Queue};

pub(crate) const EKS_VERSION: &str = "1.33";
/// EKS service quota: nodes per managed node group.
pub(crate) const MAX_NODES: i64 = 450;
/// EKS service quota "Managed node groups per cluster" (L-6D54EA21): 30 unless raised (Amazon EKS
/// service quotas in the EKS user guide).
pub(crate) const MAX_NODEGROUPS: usize = 30;
pub(crate) const RELEASE_VERSION: &str = "1.33.5-20251120";

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct EksWorld {
    /// Keyed by "region/cluster".
    pub(crate) clusters: BTreeMap<String, EksCluster>,
    pub(crate) updates: BTreeMap<String, EksUpdate>,
    /// Node groups with an operation in flight, by (deadline, cluster key, node group).
    #[serde(default)]
    pub(crate) pending: Queue<(u64, String, String)>,
    /// EC2 launch templates of every region, by id (`launch_templates.rs`).
    #[serde(default)]
    pub(crate) launch_templates: BTreeMap<String, LaunchTemplate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EksCluster {
    pub(crate) region: String,
    pub(crate) name: String,
    pub(crate) created_at: u64,
    pub(crate) nodegroups: BTreeMap<String, Nodegroup>,
    /// The node group quota when raised; [`MAX_NODEGROUPS`] otherwise.
    #[serde(default)]
    pub(crate) nodegroup_quota: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Nodegroup {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) created_at: u64,
    pub(crate) modified_at: u64,
    /// CREATING | ACTIVE | UPDATING | DELETING | CREATE_FAILED | DELETE_FAILED | DEGRADED
    pub(crate) status: String,
    pub(crate) spec: NgSpec,
    pub(crate) health_issues: Vec<Value>,
    pub(crate) client_request_token: Option<String>,
    pub(crate) pending: Option<Pending>,
    /// The tags of the node group's Auto Scaling group (`asg.rs`); None in a state file written
    /// before groups had tags, which then have EKS's own.
    #[serde(default)]
    pub(crate) asg_tags: Option<BTreeMap<String, AsgTag>>,
    /// Instance slots the group has terminated (`asg.rs`): their ids never come back.
    #[serde(default)]
    pub(crate) retired: Vec<u32>,
    /// The group's scaling activities, newest first (`scaling.rs`).
    #[serde(default)]
    pub(crate) activities: Vec<Activity>,
}

/// One scaling activity of a node group's Auto Scaling group (`scaling.rs`: the `Activity` shape's
/// members cluster-autoscaler and the CLI read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Activity {
    pub(crate) id: String,
    pub(crate) description: String,
    pub(crate) cause: String,
    pub(crate) start: u64,
    pub(crate) status: String,
}

/// One tag of a node group's Auto Scaling group: its value and whether it is copied to the
/// instances the group launches (`asg.rs` has the rules).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AsgTag {
    pub(crate) value: String,
    pub(crate) propagate_at_launch: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NgSpec {
    pub(crate) capacity_type: String,
    pub(crate) min_size: i64,
    pub(crate) max_size: i64,
    pub(crate) desired_size: i64,
    pub(crate) instance_types: Vec<String>,
    pub(crate) subnets: Vec<String>,
    pub(crate) ami_type: String,
    pub(crate) node_role: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// (key, value, NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE)
    pub(crate) taints: Vec<(String, String, String)>,
    pub(crate) disk_size: Option<i64>,
    pub(crate) remote_access: Option<Value>,
    pub(crate) launch_template: Option<NgLaunchTemplate>,
    pub(crate) tags: BTreeMap<String, String>,
    pub(crate) version: String,
    pub(crate) release_version: String,
    pub(crate) max_unavailable: i64,
}

/// A node group's launch template (EKS API reference, `LaunchTemplateSpecification`: id, name,
/// version), resolved when the group was made or last updated, with the user data of that version.
/// EKS launches the nodes from a launch template of its own made from the version given (the
/// group's Auto Scaling group names an `eks-<uuid>` template), so a later version of the user's
/// template changes nothing until UpdateNodegroupVersion names it (EKS user guide, "Customizing
/// managed nodes with launch templates" and "Update a managed node group").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct NgLaunchTemplate {
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) name: String,
    /// A version number, as a string (EKS shows the number even when asked for `$Default`).
    #[serde(default)]
    pub(crate) version: String,
    /// The version's user data, base64 as EC2 holds it.
    #[serde(default)]
    pub(crate) user_data: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) kind: Kind,
    pub(crate) update_id: Option<String>,
    pub(crate) deadline: u64,
    pub(crate) fail: bool,
    pub(crate) previous: Option<Box<NgSpec>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EksUpdate {
    pub(crate) id: String,
    pub(crate) cluster_key: String,
    pub(crate) nodegroup: String,
    /// ConfigUpdate | VersionUpdate
    pub(crate) update_type: String,
    /// InProgress | Failed | Cancelled | Successful
    pub(crate) status: String,
    pub(crate) params: Vec<(String, String)>,
    pub(crate) created_at: u64,
    pub(crate) deadline: u64,
    pub(crate) errors: Vec<Value>,
}

impl EksWorld {
    pub(crate) fn add_cluster(&mut self, region: &str, name: &str, nodegroup_quota: Option<usize>) {
        let c = EksCluster {
            region: region.into(),
            name: name.into(),
            created_at: 1_764_460_800_000,
            nodegroups: BTreeMap::new(),
            nodegroup_quota,
        };
        self.clusters.insert(format!("{region}/{name}"), c);
    }
}

pub(super) fn cluster<'a>(
    eks: &'a EksWorld,
    region: &str,
    name: &str,
) -> Result<&'a EksCluster, AwsError> {
    eks.clusters
        .get(&format!("{region}/{name}"))
        .ok_or_else(|| {
            aws(
                StatusCode::NOT_FOUND,
                "ResourceNotFoundException",
                format!("No cluster found for name: {name}."),
            )
            .with("clusterName", name)
        })
}

pub(super) fn ng_missing(cluster: &str, ng: &str) -> AwsError {
    aws(
        StatusCode::NOT_FOUND,
        "ResourceNotFoundException",
        format!("No node group found for name: {ng}."),
    )
    .with("clusterName", cluster)
    .with("nodegroupName", ng)
}

pub(super) fn in_use(cluster: &str, ng: &Nodegroup) -> AwsError {
    aws(
        StatusCode::CONFLICT,
        "ResourceInUseException",
        format!(
            "Nodegroup {} is currently in {} state and cannot be modified.",
            ng.name, ng.status
        ),
    )
    .with("clusterName", cluster)
    .with("nodegroupName", &ng.name)
}
