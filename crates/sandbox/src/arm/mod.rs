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
//! resource provider does, `operations.rs` runs the async operations, `documents.rs` renders a pool
//! as ARM and its nodes as AKS show it, `token.rs` is Azure AD's token endpoint.

mod documents;
mod operations;
mod routes;
mod token;
mod validate;

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::operations::{Kind, Queue};
use super::util::json_response;

pub(crate) use documents::{pool_json, pool_nodes};
pub(crate) use routes::Arm;
pub(crate) use token::token;

/// The oldest api-version the emulator serves (the one azurerm pins).
pub(crate) const MIN_API_VERSION: &str = "2025-10-01";
/// Node pools one cluster may have: "Maximum node pools per cluster: 100" (AKS quotas and limits),
/// reported by a managed cluster as its read-only `maxAgentPools` (managedClusters.json).
pub(crate) const MAX_AGENT_POOLS: usize = 100;
pub(crate) const KUBERNETES_VERSION: &str = "1.33.3";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct AksWorld {
    /// Keyed by the lower-cased cluster resource id.
    pub clusters: BTreeMap<String, AksCluster>,
    pub(crate) ops: BTreeMap<String, ArmOp>,
    /// Access tokens the token endpoint issued (kept across restarts so clients' cached tokens stay valid).
    pub tokens: BTreeSet<String>,
    /// Unfinished operations by (deadline, id).
    #[serde(default)]
    pub(crate) pending: Queue<(u64, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AksCluster {
    pub(crate) subscription: String,
    pub(crate) resource_group: String,
    pub(crate) name: String,
    pub(crate) location: String,
    pub pools: BTreeMap<String, AgentPool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentPool {
    pub(crate) name: String,
    pub(crate) props: PoolProps,
    pub(crate) provisioning_state: String,
    pub(crate) pending: Option<Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) op: String,
    pub(crate) kind: Kind,
    pub(crate) deadline: u64,
    pub(crate) fail: bool,
}

/// An ARM async operation, as served at `.../locations/{loc}/operations/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ArmOp {
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) status: String,
    pub(crate) start: u64,
    pub(crate) end: Option<u64>,
    pub(crate) deadline: u64,
    pub(crate) error: Option<(String, String)>,
    /// Lower-cased cluster key and pool name.
    pub(crate) cluster: String,
    pub(crate) pool: String,
}

/// The agent pool properties the emulator models (a subset of ManagedClusterAgentPoolProfileProperties).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PoolProps {
    pub(crate) vm_size: String,
    pub(crate) count: u32,
    pub(crate) enable_auto_scaling: bool,
    pub(crate) min_count: Option<u32>,
    pub(crate) max_count: Option<u32>,
    pub(crate) os_disk_size_gb: u32,
    pub(crate) os_type: String,
    pub(crate) os_sku: String,
    pub(crate) node_taints: Vec<String>,
    pub(crate) node_labels: BTreeMap<String, String>,
    pub(crate) scale_set_priority: String,
    pub(crate) scale_set_eviction_policy: Option<String>,
    pub(crate) spot_max_price: Option<f64>,
    pub(crate) gpu_instance_profile: Option<String>,
    pub(crate) gpu_driver: Option<String>,
    pub(crate) mode: String,
    pub(crate) orchestrator_version: String,
    pub(crate) scale_down_mode: String,
    pub(crate) max_pods: u32,
    pub(crate) availability_zones: Vec<String>,
    pub(crate) tags: BTreeMap<String, String>,
}

impl AksWorld {
    pub(crate) fn has_cluster(&self, sub: &str, rg: &str, name: &str) -> bool {
        self.clusters.contains_key(&cluster_key(sub, rg, name))
    }

    pub(crate) fn add_cluster(&mut self, sub: &str, rg: &str, name: &str, location: &str) {
        let c = AksCluster {
            subscription: sub.into(),
            resource_group: rg.into(),
            name: name.into(),
            location: location.into(),
            pools: BTreeMap::new(),
        };
        self.clusters.insert(cluster_key(sub, rg, name), c);
    }
}

fn cluster_key(sub: &str, rg: &str, name: &str) -> String {
    format!(
        "{}/{}/{}",
        sub.to_ascii_lowercase(),
        rg.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

pub(crate) struct ArmError {
    status: StatusCode,
    code: &'static str,
    message: String,
    target: Option<String>,
}

pub(super) fn err(status: StatusCode, code: &'static str, message: impl Into<String>) -> ArmError {
    ArmError {
        status,
        code,
        message: message.into(),
        target: None,
    }
}

pub(super) fn invalid(target: &str, message: impl Into<String>) -> ArmError {
    ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidParameter",
        message: message.into(),
        target: Some(target.into()),
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(t) = self.target {
            e["target"] = json!(t);
        }
        json_response(self.status, &json!({ "error": e }))
    }
}

pub(super) fn error_body(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}
