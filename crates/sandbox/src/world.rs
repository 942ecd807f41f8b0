//! Everything the emulators hold, as one value: each cloud's part, the operation counter and the
//! request counts tests read. It is what the state file stores, and what a handler gets locked; it
//! knows the clouds' own worlds and how their operations settle, but nothing of requests or of the
//! handle that shares it.

use serde::{Deserialize, Serialize};

use crate::config::ClusterSpec;
use crate::nodes::{NodeEvent, PoolNodes};
use crate::{arm, eks, gke, operations};

/// Everything the emulators hold. Serialized as the `--state` file.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct World {
    /// Public, unlike the other clouds, because the provider's tests reach into it through
    /// [`crate::Sandbox::with_world`]: the tokens Azure AD issued, and pools removed behind Terraform's back.
    pub aks: arm::AksWorld,
    pub(crate) gke: gke::GkeWorld,
    pub(crate) eks: eks::EksWorld,
    /// Counter for operation ids, so they stay unique across restarts.
    pub(crate) next_id: u64,
    /// Pools made per "cloud/cluster/name" (accepted creates, not retries answered with the same
    /// pool), so a test can prove that no create was duplicated.
    #[serde(default)]
    pub(crate) creates: std::collections::BTreeMap<String, u64>,
    /// Create requests that reached a cluster, per "cloud/cluster/name", whatever the answer
    /// (accepted, refused by a quota, a conflict, an idempotent replay): with `creates`, it shows
    /// how often a client retried.
    #[serde(default)]
    pub(crate) create_requests: std::collections::BTreeMap<String, u64>,
    /// Requests a cluster refused because of other operations in flight, per
    /// "cloud/cluster/status" (GKE's RESOURCE_EXHAUSTED quota and FAILED_PRECONDITION "operation in
    /// progress"), so a test can prove that a client waited its turn instead of being refused.
    #[serde(default)]
    pub(crate) refused: std::collections::BTreeMap<String, u64>,
    /// What the twin's cluster-autoscalers decided, and why (`GET /_sandbox/autoscaler`).
    #[serde(default)]
    pub(crate) autoscaler: crate::autoscaler::log::Log,
}

impl World {
    pub(crate) fn new(clusters: &[ClusterSpec]) -> World {
        let mut w = World::default();
        w.ensure_clusters(clusters);
        w
    }

    /// Add the clusters that the world does not have yet (a restored world keeps its own pools).
    pub(crate) fn ensure_clusters(&mut self, clusters: &[ClusterSpec]) {
        for c in clusters {
            match c {
                ClusterSpec::Aks {
                    subscription,
                    resource_group,
                    name,
                    location,
                } => {
                    if !self.aks.has_cluster(subscription, resource_group, name) {
                        self.aks
                            .add_cluster(subscription, resource_group, name, location)
                    }
                }
                ClusterSpec::Gke {
                    project,
                    location,
                    name,
                } => {
                    if !self
                        .gke
                        .clusters
                        .contains_key(&format!("{project}/{location}/{name}"))
                    {
                        self.gke.add_cluster(project, location, name)
                    }
                }
                ClusterSpec::Eks {
                    region,
                    name,
                    nodegroup_quota,
                } => {
                    if !self.eks.clusters.contains_key(&format!("{region}/{name}")) {
                        self.eks.add_cluster(region, name, *nodegroup_quota)
                    }
                }
            }
        }
    }

    /// Counts a create that made a pool (see [`World::creates`]).
    pub(crate) fn count_create(&mut self, cloud: &str, cluster: &str, pool: &str) {
        *self
            .creates
            .entry(format!("{cloud}/{cluster}/{pool}"))
            .or_insert(0) += 1;
    }

    /// Counts a create request (see [`World::create_requests`]).
    pub(crate) fn count_create_request(&mut self, cloud: &str, cluster: &str, pool: &str) {
        *self
            .create_requests
            .entry(format!("{cloud}/{cluster}/{pool}"))
            .or_insert(0) += 1;
    }

    /// Counts a refusal (see [`World::refused`]).
    pub(crate) fn count_refused(&mut self, cloud: &str, cluster: &str, status: &str) {
        *self
            .refused
            .entry(format!("{cloud}/{cluster}/{status}"))
            .or_insert(0) += 1;
    }

    /// The nodes of every pool that has nodes now: created and not failed at creation (pools being
    /// updated or deleted still have their nodes).
    pub(crate) fn current_nodes(&self) -> Vec<PoolNodes> {
        let mut out = Vec::new();
        for c in self.aks.clusters.values() {
            for p in c.pools.values().filter(|p| {
                matches!(
                    p.provisioning_state.as_str(),
                    "Succeeded" | "Updating" | "Deleting"
                )
            }) {
                out.push(arm::pool_nodes(&c.name, p));
            }
        }
        for c in self.gke.clusters.values() {
            for p in c.pools.values().filter(|p| {
                matches!(
                    p.status.as_str(),
                    "RUNNING" | "RECONCILING" | "STOPPING" | "RUNNING_WITH_ERROR"
                )
            }) {
                out.push(gke::pool_nodes(&c.name, &c.zones(), p));
            }
        }
        for c in self.eks.clusters.values() {
            for p in c.nodegroups.values().filter(|p| {
                matches!(
                    p.status.as_str(),
                    "ACTIVE" | "UPDATING" | "DELETING" | "DEGRADED" | "DELETE_FAILED"
                )
            }) {
                out.push(eks::pool_nodes(&c.name, &c.region, p));
            }
        }
        out
    }

    pub(crate) fn pending_deadlines(&self) -> Vec<u64> {
        use crate::operations::Due;
        let mut d: Vec<u64> = self
            .aks
            .pending
            .iter()
            .map(Due::deadline)
            .chain(self.gke.pending.iter().map(Due::deadline))
            .chain(self.eks.pending.iter().map(Due::deadline))
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// Finish every operation whose time has come. Returns whether anything changed.
    pub(crate) fn settle(&mut self, now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let a = operations::settle(&mut self.aks, now, events);
        let g = operations::settle(&mut self.gke, now, events);
        let e = operations::settle(&mut self.eks, now, events);
        a | g | e
    }
}
