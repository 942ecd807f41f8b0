//! Amazon EKS managed node groups (restJson1): clusters (list, describe), node groups (create,
//! describe, list, delete, update-config, update-version) and updates (describe, list).
//!
//! Written from the EKS API reference. Errors are restJson1: the type in the `x-amzn-ErrorType`
//! header and a JSON body `{"message": ...}` (plus clusterName/nodegroupName where EKS adds them).
//! Requests must carry a well-formed SigV4 `Authorization` header; the signature itself is not
//! checked (any key works), but the credential scope's region selects the cluster's region.
//!
//! The files: `sigv4.rs` checks the Authorization header, `routes.rs` maps restJson1 paths to
//! operations and answers the reads, `validate.rs` reads request bodies as EKS does, `operations.rs`
//! runs node group creates, updates and deletes, `documents.rs` renders node groups, updates and
//! clusters, and the nodes EKS makes for a node group.

mod documents;
mod operations;
mod routes;
mod sigv4;
mod validate;

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::operations::{Kind, Queue};
use super::util::json_response;

pub(crate) use documents::{nodegroup_json, pool_nodes};
pub(crate) use routes::Eks;

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
    pub(crate) launch_template: Option<Value>,
    pub(crate) tags: BTreeMap<String, String>,
    pub(crate) version: String,
    pub(crate) release_version: String,
    pub(crate) max_unavailable: i64,
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

pub(crate) struct AwsError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    extra: Vec<(&'static str, String)>,
}

pub(super) fn aws(status: StatusCode, kind: &'static str, message: impl Into<String>) -> AwsError {
    AwsError {
        status,
        kind,
        message: message.into(),
        extra: Vec::new(),
    }
}

pub(super) fn invalid(message: impl Into<String>) -> AwsError {
    aws(
        StatusCode::BAD_REQUEST,
        "InvalidParameterException",
        message,
    )
}

impl AwsError {
    pub(super) fn with(mut self, k: &'static str, v: &str) -> Self {
        self.extra.push((k, v.to_string()));
        self
    }
}

impl IntoResponse for AwsError {
    fn into_response(self) -> Response {
        let mut body = json!({ "message": self.message });
        for (k, v) in self.extra {
            body[k] = json!(v);
        }
        let mut r = json_response(self.status, &body);
        r.headers_mut()
            .insert("x-amzn-errortype", HeaderValue::from_static(self.kind));
        r
    }
}
