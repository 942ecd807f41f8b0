//! The clouds' node pool APIs behind one trait. A resource hands over a cloud-neutral
//! [`PoolSpec`] (already validated by `gpu`); each client maps it to its API (`aks`: ARM REST,
//! `gke`: GKE v1, `eks`: EKS managed node groups), waits for the long-running operation, retries
//! what is worth retrying, and reads the pool back as a [`Pool`] in the same neutral terms so that
//! drift is a plain comparison. How long anything waits is `crate::operation`'s business; what
//! can go wrong is [`CloudError`] (in `error`).

pub mod aks;
pub mod eks;
mod error;
pub mod gke;
mod shared;

use std::collections::BTreeMap;

use async_trait::async_trait;

pub use crate::operation::{OpCtx, StopSignal};
pub(crate) use error::error_chain;
pub use error::{CloudError, Detail};
pub use shared::SharedReads;

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

impl Location {
    /// The ID a pool of this name has here (the cloud's own, as in [`Pool::id`]), known before
    /// the cloud is asked.
    pub fn pool_id(&self, name: &str) -> String {
        match self {
            Location::Aks { .. } => aks::AksClient::pool_id(self, name).unwrap_or_default(),
            Location::Gke { .. } => gke::pool_id(self, name).unwrap_or_default(),
            Location::Eks { cluster, .. } => eks::pool_id(cluster, name),
        }
    }

    pub fn cloud(&self) -> &'static str {
        match self {
            Location::Aks { .. } => "aks",
            Location::Gke { .. } => "gke",
            Location::Eks { .. } => "eks",
        }
    }
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

    /// Deletes the pool and waits until it is gone. A pool that is already gone is success.
    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError>;

    /// Every pool of the cluster `cluster` names, read as [`NodePools::get`] reads one, pools
    /// being deleted left out, ordered by name. Pages are followed to the end; a cluster that
    /// does not exist is an error.
    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError>;

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

/// The provider's settings of every cloud, one struct per cloud, as its client takes them: the
/// provider block parses straight into these.
#[derive(Clone, Default)]
pub struct CloudSettings {
    /// Base URL of a fracgpu sandbox that stands in for every cloud.
    pub sandbox: Option<String>,
    pub azure: aks::AzureSettings,
    pub google: gke::GkeConfig,
    pub aws: eks::EksConfig,
}

/// Builds the node pool client of a cloud from the provider's settings.
pub async fn connect(
    cloud: &str,
    settings: &CloudSettings,
) -> Result<std::sync::Arc<dyn NodePools>, CloudError> {
    let sandbox = settings.sandbox.clone();
    match cloud {
        "aks" => {
            let cfg = aks::AksConfig::from_env_and(aks::AzureSettings {
                sandbox,
                ..settings.azure.clone()
            })?;
            Ok(std::sync::Arc::new(aks::AksClient::new(cfg)?))
        }
        "gke" => {
            let cfg = gke::GkeConfig {
                sandbox,
                ..settings.google.clone()
            };
            Ok(std::sync::Arc::new(gke::GkeClient::new(cfg).await?))
        }
        _ => {
            let cfg = eks::EksConfig {
                sandbox,
                ..settings.aws.clone()
            };
            Ok(std::sync::Arc::new(eks::EksClient::new(cfg).await?))
        }
    }
}
