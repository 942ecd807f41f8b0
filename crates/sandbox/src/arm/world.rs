//! What ARM holds: managed clusters with their agent pools, the async operations and the tokens
//! Azure AD issued, and the lookup every handler starts with. The routes, the operations and the
//! documents all read these types, so they stand apart from each of them and from the cloud's
//! mod.rs, which only re-exports.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::error::{ArmError, err};
use crate::operations::{Kind, Queue};

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
    /// The node count the twin's cluster-autoscaler set (its scale set's capacity), while the pool
    /// autoscales; None until it grows the pool, which then runs its minimum.
    #[serde(default)]
    pub(crate) autoscaled_count: Option<u32>,
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

pub(super) fn cluster_key(sub: &str, rg: &str, name: &str) -> String {
    format!(
        "{}/{}/{}",
        sub.to_ascii_lowercase(),
        rg.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

/// The cluster a request names, or ARM's answer when it, its resource group or its subscription
/// does not exist.
pub(super) fn find_cluster<'a>(
    aks: &'a mut AksWorld,
    sub: &str,
    rg: &str,
    cluster: &str,
) -> Result<&'a mut AksCluster, ArmError> {
    let key = cluster_key(sub, rg, cluster);
    if !aks.clusters.contains_key(&key) {
        let rg_exists = aks.clusters.values().any(|c| {
            c.subscription.eq_ignore_ascii_case(sub) && c.resource_group.eq_ignore_ascii_case(rg)
        });
        if !rg_exists {
            if !aks
                .clusters
                .values()
                .any(|c| c.subscription.eq_ignore_ascii_case(sub))
            {
                return Err(err(
                    StatusCode::NOT_FOUND,
                    "SubscriptionNotFound",
                    format!("The subscription '{sub}' could not be found."),
                ));
            }
            return Err(err(
                StatusCode::NOT_FOUND,
                "ResourceGroupNotFound",
                format!("Resource group '{rg}' could not be found."),
            ));
        }
        return Err(err(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!(
                "The Resource 'Microsoft.ContainerService/managedClusters/{cluster}' under \
                    resource group '{rg}' was not found."
            ),
        ));
    }
    Ok(aks.clusters.get_mut(&key).expect("checked above"))
}
