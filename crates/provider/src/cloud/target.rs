//! What the provider knows of one provisioning target (a cloud's managed node pools: AKS, GKE,
//! EKS), written once in the target's own folder as a [`Target`] descriptor: its provider block
//! and settings, how its clusters are named (the blocks of `fracgpu_nodepool` and of the pool
//! queries, the resource identity, the import ID), how its client is built, and its part of a
//! pool (its block's arguments, checks and defaults, its part of the spec and of the plan).
//! Everything outside the folders reaches a target through `registry`, by [`gpu::Cloud`], never
//! by a string.
//!
//! The fallback of a cluster's scope (subscription, project, region) to the provider's default
//! lives here once, in [`Target::scope_or_default`]; the callers differ only in how they word a
//! missing one.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use gpu::{Cloud, GpuModel, Observed, SharingMode};
use tfplugin::schema::Block;
use tfplugin::{AttrPath, DecodeError, Diagnostic, Value};

use super::error::CloudError;
use super::pool::{Location, NodePools, NodeTemplate, Pool, PoolSpec, Scaling, TargetFields};

/// The attribute that places a cluster in an account: AKS's subscription, GKE's project, EKS's
/// region. Optional in every block; the provider's setting (or its environment variable) stands in.
pub struct Scope {
    /// The attribute in the target's blocks and in the identity, e.g. `subscription_id`.
    pub attr: &'static str,
    /// What it is, in a diagnostic's summary: `Azure subscription`.
    pub what: &'static str,
    /// What it is, in a sentence: `the cluster's subscription`.
    pub noun: &'static str,
    /// The provider argument that gives the default: `azure.subscription_id`.
    pub provider_attr: &'static str,
    /// The environment variable the provider reads when that argument is unset.
    pub env: &'static str,
    /// The identity attribute's description.
    pub identity_description: &'static str,
}

/// A coordinate of a cluster beside its scope and name, required in every block of the target
/// (AKS's resource group, GKE's location).
pub struct Coordinate {
    pub attr: &'static str,
    /// What it is, in a sentence: `the cluster's resource group`.
    pub noun: &'static str,
    pub identity_description: &'static str,
}

/// A target's settings as the provider block and the environment give them: the default scope
/// known at plan time, and what it takes to build the client on first use.
#[async_trait]
pub trait TargetSettings: Send + Sync {
    /// The scope of blocks that name none, the environment's and the sandbox's included.
    fn default_scope(&self) -> Option<String>;

    /// The node pool client; `sandbox` is the base URL of a fracgpu sandbox standing in for
    /// every cloud.
    async fn connect(&self, sandbox: Option<String>) -> Result<Arc<dyn NodePools>, CloudError>;

    /// Whether the client is worth building when the provider is configured, so that it can do
    /// ahead what its first call would wait for ([`NodePools::warm_up`]). False where building
    /// it costs more than it saves (EKS: the AWS configuration may ask the instance metadata
    /// service for a Region).
    fn warms_up(&self) -> bool {
        false
    }
}

/// One provisioning target. Implemented by a unit struct in the target's folder and listed in
/// `registry`; nothing else names the target.
pub trait Target: Send + Sync {
    fn cloud(&self) -> Cloud;

    /// The name prose uses: `AKS`.
    fn title(&self) -> &'static str;

    /// The provider block of the target's settings: `azure`.
    fn provider_block_name(&self) -> &'static str;

    fn provider_block(&self) -> Block;

    /// The settings from the provider block's value (null when absent); `sandbox` is set when the
    /// provider runs against a fracgpu sandbox, which then supplies the default scope.
    fn settings(&self, block: &Value, sandbox: Option<&str>) -> Arc<dyn TargetSettings>;

    /// The same settings with `scope` as the default scope: validation runs before the provider
    /// is configured, and must not report a missing default it cannot know yet.
    fn settings_with_scope(&self, scope: &str) -> Arc<dyn TargetSettings>;

    fn scope(&self) -> &'static Scope;

    /// The coordinates beside the scope and the cluster's name, in identity order.
    fn coordinates(&self) -> &'static [Coordinate];

    /// The attribute of the target's blocks that names the cluster (`cluster_name`, `cluster`).
    fn cluster_attr(&self) -> &'static str;

    /// The location of a cluster of this target from its scope, coordinates (in the order of
    /// [`Target::coordinates`]) and name.
    fn locate(&self, scope: String, coordinates: Vec<String>, cluster: String) -> Location;

    /// The scope, coordinates and cluster of a location of this target; None for another's.
    fn parts(&self, location: &Location) -> Option<(String, Vec<String>, String)>;

    /// The cloud's own ID of the pool `name` at `location`.
    fn pool_id(&self, location: &Location, name: &str) -> String;

    /// The cluster, in a sentence: `AKS cluster c (resource group rg, subscription s)`.
    fn describe(&self, location: &Location) -> String;

    /// The pool a cloud ID of this target names, with `default_scope` where the ID has none
    /// (EKS's `cluster:nodegroup`); None when the ID is not of this target.
    fn parse_import_id(
        &self,
        id: &str,
        default_scope: Option<String>,
    ) -> Option<(Location, String)>;

    /// The import ID's form, for the diagnostic on one that fits no target.
    fn import_id_form(&self) -> &'static str;

    /// The block of `fracgpu_nodepool` that places a pool here.
    fn pool_block(&self) -> Block;

    /// The block of the pool queries (`list "fracgpu_nodepool"`, `fracgpu_nodepools`) that names
    /// a cluster here: the cluster's coordinates only.
    fn query_block(&self) -> Block;

    /// Whether a refresh of a pool here reads from its cluster's snapshot (`cloud::SharedReads`):
    /// where the cloud lists a cluster's pools in fewer requests than it reads them one by one
    /// (AKS; GKE, whose list takes every fixed-size pool's instance group sizes from one Compute
    /// aggregated list per project), or in fewer round trips (EKS, whose list describes the node
    /// groups concurrently, ahead of terraform's reads: DescribeNodegroup has no batch form).
    /// Every target does now; a target whose list would cost more says no.
    fn shares_reads(&self) -> bool {
        true
    }

    // A pool's block of `fracgpu_nodepool` (`block` is its value, one element of the list) and
    // the target's part of the spec. What the target does not have, it leaves to the defaults.

    /// Whether the block reads as the target's arguments, or why not (the path is the block's
    /// own: `os_sku`, not `aks[0].os_sku`).
    fn decode_block(&self, block: &Value) -> Result<(), DecodeError>;

    /// What the block's typed model reads, for the test that holds it to the schema.
    fn block_shape(&self) -> tfplugin::shape::Shape;

    /// Problems the sharing mode has with the block (AKS's OS SKU, EKS's AMI type), as
    /// diagnostics on its attribute; reported beside the domain's own validation.
    fn check_sharing(&self, _block: &Value, _sharing: &SharingMode) -> Vec<Diagnostic> {
        Vec::new()
    }

    /// Problems of the block on its own, reported once the pool validates (GKE's zones).
    fn check_block(&self, _block: &Value) -> Vec<Diagnostic> {
        Vec::new()
    }

    /// The attribute listing a pool's zones, where the target's pools have zones of their own
    /// that default to the cluster's (GKE's `node_locations`).
    fn zones_attr(&self) -> Option<&'static str> {
        None
    }

    /// A fixed total the pool's zones cannot split (nodes run evenly over the zones), refused.
    fn uneven_split(&self, nodes: u32, zones: &[String]) -> Diagnostic {
        Diagnostic::error(
            "Node count does not split over the zones",
            format!(
                "node_count = {nodes} does not split evenly over the pool's {} zones; use a \
                    multiple of {}.",
                zones.len(),
                zones.len()
            ),
        )
        .at(AttrPath::attr("node_count"))
    }

    /// The target's part of the spec: what the block says and what the domain derived for this
    /// target (AKS's GPU instance profile, GKE's accelerator).
    fn fields(&self, block: &Value, derived: &gpu::Derived) -> TargetFields;

    /// The block as the cloud reports the pool, every attribute written.
    fn block_of(&self, pool: &Pool) -> Value;

    /// What the cloud records of how the pool shares its GPUs, beside its labels.
    fn observed<'a>(&self, spec: &'a PoolSpec, gpu: &'static GpuModel) -> Observed<'a> {
        Observed {
            cloud: self.cloud(),
            gpu,
            labels: &spec.labels,
            aks_gpu_instance_profile: None,
            gke_partition_size: None,
            gke_sharing: None,
            bottlerocket_settings: None,
        }
    }

    /// The GPU model a pool reports when its machine type names none of its own (GKE's N1
    /// machine types with attached accelerators), as users write it.
    fn reported_gpu_model(&self, _spec: &PoolSpec) -> Option<String> {
        None
    }

    /// The scaling a state records: the form the user wrote where the cloud stores another that
    /// means the same (EKS, which has no autoscaling switch).
    fn recorded_scaling(&self, _written: Scaling, read: Scaling) -> Scaling {
        read
    }

    /// The taint the cloud puts on every GPU node itself and that is never asked for (GKE's).
    fn own_gpu_taint(&self) -> Option<gpu::Taint> {
        None
    }

    /// Whether the GPU settings of the spec changed in a way the cloud cannot apply in place.
    fn gpu_change_replaces(&self, old: &PoolSpec, new: &PoolSpec) -> bool;

    /// Attributes of the block whose change from `old` to `new` replaces the pool although the
    /// schema marks them in place (AKS's OS SKU across image families).
    fn replacements(&self, _old: &PoolSpec, _new: &PoolSpec) -> Vec<AttrPath> {
        Vec::new()
    }

    /// Warnings on a configuration's block (EKS's retired AMI type).
    fn warnings(&self, _block: &Value) -> Vec<Diagnostic> {
        Vec::new()
    }

    /// The tags that tell the cluster autoscaler of the target what a node of an autoscaled pool
    /// offers before one exists (`PoolSpec::node_template`), or why the pool cannot carry them.
    /// None by default: a target whose autoscaler knows the pool's sharing by itself (GKE).
    fn node_template(
        &self,
        _template: &NodeTemplate<'_>,
    ) -> Result<BTreeMap<String, String>, Diagnostic> {
        Ok(BTreeMap::new())
    }
}

/// The path of an attribute of a target's block: `aks[0].os_sku`.
pub fn block_path(target: &dyn Target, attr: &str) -> AttrPath {
    AttrPath::attr(target.cloud().as_str())
        .with_index(0)
        .with_attr(attr)
}

impl dyn Target {
    /// The scope a block or identity gives, else the provider's default: the one place where
    /// the fallback is written.
    pub fn scope_or_default(
        &self,
        given: Option<String>,
        settings: &dyn TargetSettings,
    ) -> Option<String> {
        given.or_else(|| settings.default_scope())
    }
}

/// An environment variable's value, unset when empty: the fallback of a provider argument.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}
