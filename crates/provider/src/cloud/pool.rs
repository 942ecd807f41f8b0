//! The cloud-neutral terms every node pool client speaks: where a pool lives ([`Location`]), the
//! pool as declared ([`PoolSpec`]) and as reported ([`Pool`]), and the [`NodePools`] trait. A
//! module of its own so that the clients, the descriptors and the registry all depend on it and
//! it on none of them.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::across::AcrossClusters;
use super::error::CloudError;
use crate::operation::OpCtx;

/// Where a pool lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    Aks {
        subscription_id: String,
        resource_group: String,
        cluster: String,
    },
    Gke {
        project: String,
        location: String,
        cluster: String,
    },
    Eks {
        region: String,
        cluster: String,
    },
}

/// How many nodes a pool has, in all: on every cloud these are the pool's totals. (GKE counts per
/// zone; its client splits a total over the pool's zones and sums them back.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    Fixed { nodes: u32 },
    Auto { min: u32, max: u32 },
}

/// A node taint in Kubernetes terms (`NoSchedule`, `PreferNoSchedule`, `NoExecute`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolTaint {
    pub key: String,
    /// Empty for a taint without value.
    pub value: String,
    pub effect: String,
}

/// GKE's time-sharing or MPS on the pool's GPUs or partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GkeSharing {
    TimeSharing { max_clients: u32 },
    Mps { max_clients: u32 },
}

/// The GPU part of a pool, as the cloud APIs express it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolGpu {
    /// GPUs per node (GKE's acceleratorCount; informational elsewhere).
    pub count: u32,
    /// GKE's acceleratorType, e.g. `nvidia-tesla-a100`.
    pub gke_accelerator_type: Option<String>,
    /// GKE's gpuPartitionSize, e.g. `1g.5gb`.
    pub gke_partition_size: Option<String>,
    pub gke_sharing: Option<GkeSharing>,
    /// AKS's gpuInstanceProfile, e.g. `MIG1g`.
    pub aks_gpu_instance_profile: Option<String>,
    /// AKS's gpuProfile.driver: `Install` or `None`; None leaves it to AKS (which installs).
    pub aks_gpu_driver: Option<String>,
}

/// EKS fields that have no counterpart on the other clouds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EksPoolFields {
    pub node_role_arn: String,
    pub subnet_ids: Vec<String>,
    pub ami_type: String,
}

/// GKE fields that have no counterpart on the other clouds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GkePoolFields {
    /// The zones the pool's nodes run in (GKE's `locations`). Empty: the cluster's zones, which
    /// the client reads.
    pub node_locations: Vec<String>,
}

/// A node pool as the user declared it, resolved for the cloud API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    pub location: Location,
    pub name: String,
    pub machine_type: String,
    pub scaling: Scaling,
    pub spot: bool,
    /// None leaves the cloud's default.
    pub disk_size_gb: Option<u32>,
    /// Every label the nodes must carry: the user's and the ones sharing needs
    /// (e.g. `nvidia.com/device-plugin.config`). Labels the cloud adds itself are not here.
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<PoolTaint>,
    pub gpu: PoolGpu,
    /// AKS osSKU (e.g. `Ubuntu`, `AzureLinux`); None leaves the cloud's default.
    pub os_sku: Option<String>,
    pub eks: Option<EksPoolFields>,
    pub gke: Option<GkePoolFields>,
}

/// A node pool as the cloud reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The cloud's own ID: the ARM resource ID, `projects/P/locations/L/clusters/C/nodePools/N`,
    /// or `cluster:nodegroup` on EKS.
    pub id: String,
    pub spec: PoolSpec,
    /// The cloud's provisioning state or status, as it spells it (`Succeeded`, `RUNNING`, `ACTIVE`).
    pub status: String,
}

/// The node pool API of one cloud.
#[async_trait]
pub trait NodePools: Send + Sync {
    /// The pool, or None when it does not exist (or is being deleted and gone for the user).
    /// Retries and slow answers end at `ctx`'s deadline or stop.
    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError>;

    /// Creates the pool and waits until it is ready. A pool of that name that a previous attempt
    /// of the same create left behind is adopted rather than reported as a conflict.
    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError>;

    /// Brings an existing pool to `spec` in place. Only fields the cloud can change in place
    /// differ between `current.spec` and `spec` (the plan replaced the pool otherwise).
    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError>;

    /// True when `update` reads the pool itself before it changes anything and decides against
    /// that read, not `current` (AKS: a PUT is a read-modify-write of the whole document; EKS:
    /// the group must have settled first). The caller then reads nothing of its own, and
    /// `current` may be the pool as the last refresh saw it; a pool gone by then is a 404.
    fn update_reads_the_pool(&self) -> bool {
        false
    }

    /// Deletes the pool and waits until it is gone. A pool that is already gone is success.
    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError>;

    /// Every pool of the cluster `cluster` names, read as [`NodePools::get`] reads one, pools
    /// being deleted left out, ordered by name. Pages are followed to the end; a cluster that
    /// does not exist is an error.
    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError>;

    /// [`NodePools::list`] for a refresh's shared read (`cloud::SharedReads`): a read that
    /// answers for many clusters (GKE: a project's instance group sizes) is taken once per
    /// refresh, from `across`.
    async fn list_in_refresh(
        &self,
        cluster: &Location,
        _across: &AcrossClusters,
        ctx: &OpCtx,
    ) -> Result<Vec<Pool>, CloudError> {
        self.list(cluster, ctx).await
    }

    /// The zones a new pool at `location` runs in when it names none (GKE: the cluster's), for
    /// the plan; None where pools have no such setting.
    async fn default_zones(
        &self,
        _location: &Location,
        _ctx: &OpCtx,
    ) -> Result<Option<Vec<String>>, CloudError> {
        Ok(None)
    }
}

/// Reads of single pools a list keeps in flight at once (EKS describes each node group; GKE reads
/// each fixed-size pool's instance groups): enough to list a large cluster quickly, few enough
/// to stay clear of the clouds' request rate limits.
pub(crate) const LIST_READS_IN_FLIGHT: usize = 8;
