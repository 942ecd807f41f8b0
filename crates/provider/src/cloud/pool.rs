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

/// AKS fields that have no counterpart on the other clouds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AksPoolFields {
    /// AKS's gpuInstanceProfile, e.g. `MIG1g`.
    pub gpu_instance_profile: Option<String>,
    /// AKS's gpuProfile.driver: `Install` or `None`; None leaves it to AKS (which installs).
    pub gpu_driver: Option<String>,
    /// AKS's osSKU (e.g. `Ubuntu`, `AzureLinux`); None leaves the cloud's default.
    pub os_sku: Option<String>,
}

/// GKE fields that have no counterpart on the other clouds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GkePoolFields {
    /// GKE's acceleratorType, e.g. `nvidia-tesla-a100`.
    pub accelerator_type: Option<String>,
    /// GKE's gpuPartitionSize, e.g. `1g.5gb`.
    pub partition_size: Option<String>,
    pub sharing: Option<GkeSharing>,
    /// The zones the pool's nodes run in (GKE's `locations`). Empty: the cluster's zones, which
    /// the client reads.
    pub node_locations: Vec<String>,
}

/// EKS fields that have no counterpart on the other clouds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EksPoolFields {
    pub node_role_arn: String,
    pub subnet_ids: Vec<String>,
    pub ami_type: String,
    /// The Bottlerocket device plugin settings (TOML) of a Bottlerocket pool that shares its GPUs,
    /// delivered as the user data of the node group's launch template: None for a pool without
    /// a launch template of its own (every other pool). Read back from the template's version the
    /// node group uses.
    pub bottlerocket_settings: Option<String>,
}

/// The part of a pool only its target has: one variant per target, the same as its
/// [`Location`]'s. Each target's descriptor fills it and its client reads it; nothing
/// cloud-neutral looks inside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetFields {
    Aks(AksPoolFields),
    Gke(GkePoolFields),
    Eks(EksPoolFields),
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
    /// GPUs per node (GKE's acceleratorCount; informational elsewhere).
    pub gpu_count: u32,
    /// The tags cluster-autoscaler reads to build a node of the pool before one exists (scale
    /// from zero), in the target's own spelling; empty where the target needs none (GKE, and any
    /// pool without autoscaling). Its descriptor writes them from a [`NodeTemplate`].
    pub node_template: BTreeMap<String, String>,
    /// What only the pool's target has.
    pub target: TargetFields,
}

/// What one node of a pool will offer and carry, for an autoscaler that must size the pool before
/// a node exists: the extended resources its device plugin will advertise, its labels and taints.
#[derive(Clone, Copy, Debug)]
pub struct NodeTemplate<'a> {
    pub resources: &'a BTreeMap<String, u32>,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [PoolTaint],
}

/// What a spec of another target reads as: a client only ever receives its own target's specs (the
/// registry dispatches by the location's target, whose descriptor fills these fields).
static NO_AKS: AksPoolFields = AksPoolFields {
    gpu_instance_profile: None,
    gpu_driver: None,
    os_sku: None,
};
static NO_GKE: GkePoolFields = GkePoolFields {
    accelerator_type: None,
    partition_size: None,
    sharing: None,
    node_locations: Vec::new(),
};
static NO_EKS: EksPoolFields = EksPoolFields {
    node_role_arn: String::new(),
    subnet_ids: Vec::new(),
    ami_type: String::new(),
    bottlerocket_settings: None,
};

impl PoolSpec {
    /// The AKS fields (empty ones on a spec of another target).
    pub fn aks(&self) -> &AksPoolFields {
        match &self.target {
            TargetFields::Aks(f) => f,
            _ => &NO_AKS,
        }
    }

    /// The GKE fields (empty ones on a spec of another target).
    pub fn gke(&self) -> &GkePoolFields {
        match &self.target {
            TargetFields::Gke(f) => f,
            _ => &NO_GKE,
        }
    }

    /// The EKS fields (empty ones on a spec of another target).
    pub fn eks(&self) -> &EksPoolFields {
        match &self.target {
            TargetFields::Eks(f) => f,
            _ => &NO_EKS,
        }
    }

    /// The AKS fields to change; a spec of another target becomes an AKS one with empty fields.
    pub fn aks_mut(&mut self) -> &mut AksPoolFields {
        if !matches!(self.target, TargetFields::Aks(_)) {
            self.target = TargetFields::Aks(AksPoolFields::default());
        }
        match &mut self.target {
            TargetFields::Aks(f) => f,
            _ => unreachable!("set just above"),
        }
    }

    /// The GKE fields to change, as [`PoolSpec::aks_mut`] gives AKS's.
    pub fn gke_mut(&mut self) -> &mut GkePoolFields {
        if !matches!(self.target, TargetFields::Gke(_)) {
            self.target = TargetFields::Gke(GkePoolFields::default());
        }
        match &mut self.target {
            TargetFields::Gke(f) => f,
            _ => unreachable!("set just above"),
        }
    }

    /// The EKS fields to change, as [`PoolSpec::aks_mut`] gives AKS's.
    pub fn eks_mut(&mut self) -> &mut EksPoolFields {
        if !matches!(self.target, TargetFields::Eks(_)) {
            self.target = TargetFields::Eks(EksPoolFields::default());
        }
        match &mut self.target {
            TargetFields::Eks(f) => f,
            _ => unreachable!("set just above"),
        }
    }
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

    /// What the client can do before its first call, started when the provider is configured
    /// (where [`crate::cloud::target::TargetSettings::warms_up`]): AKS fetches its access
    /// token, which the first ARM call would otherwise wait for, one round trip on the
    /// refresh's way. Errors are the first call's to report, which asks again.
    async fn warm_up(&self, _ctx: &OpCtx) {}

    /// Deletes the pool and waits until it is gone. A pool that is already gone is success.
    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError>;

    /// Every pool of the cluster `cluster` names, read as [`NodePools::get`] reads one, pools
    /// being deleted left out, ordered by name. Pages are followed to the end; a cluster that
    /// does not exist is an error.
    async fn list(&self, cluster: &Location, ctx: &OpCtx) -> Result<Vec<Pool>, CloudError>;

    /// Whether listing a cluster costs no more requests than reading one of its pools (ARM's
    /// managed cluster GET, which holds every agent pool, against an agent pool GET; GKE's list
    /// of the project's clusters with their node pools, and the project's instance group sizes,
    /// both shared by the project's clusters, against a node pool GET and its instance groups').
    /// A refresh then lists from its first read of the cluster (`cloud::SharedReads`). Not so
    /// on EKS, whose list describes every node group of the cluster.
    fn lists_for_a_read(&self) -> bool {
        false
    }

    /// [`NodePools::list`] for a refresh's shared read (`cloud::SharedReads`), each pool handed
    /// to `to.found` as soon as it is known (EKS: as its node group is described, those reads
    /// wait for first), so that the refresh's reads need not wait for the last pool. A read that
    /// answers for many clusters (GKE: a project's clusters and its instance group sizes) is
    /// taken once per refresh, from `across`. An error ends the list; the pools found before it stand.
    async fn list_in_refresh(
        &self,
        cluster: &Location,
        _across: &AcrossClusters,
        ctx: &OpCtx,
        to: &dyn Listening,
    ) -> Result<(), CloudError> {
        for pool in self.list(cluster, ctx).await? {
            to.found(pool);
        }
        Ok(())
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

/// Those a refresh's list works for ([`NodePools::list_in_refresh`]): the reads waiting on it.
pub trait Listening: Send + Sync {
    /// The list found this pool.
    fn found(&self, pool: Pool);
    /// The pools reads have come to wait for since the last call, by name: a list that reads
    /// pools one by one (EKS) reads these first. Terraform refreshes in an order of its own, and
    /// holds one of its `-parallelism` slots for each read that waits.
    fn wanted(&self) -> Vec<String>;
    /// Notified whenever a read comes to wait, so that a list busy with other calls starts that
    /// read at once rather than at its next answer; None where nobody waits on the list.
    fn asked(&self) -> Option<&tokio::sync::Notify> {
        None
    }
    /// A read of this one pool, made in this refresh, found none: as good as a read of its own
    /// (a list that reads pools one by one tells this of the pools reads wait for).
    fn gone(&self, _name: &str) {}
}

/// Reads of single pools a list keeps in flight at once (GKE reads each fixed-size pool's
/// instance groups): enough to list a large cluster quickly, few enough to stay clear of the
/// clouds' request rate limits.
pub(crate) const LIST_READS_IN_FLIGHT: usize = 8;
