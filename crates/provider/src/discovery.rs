//! Finding the pools a cluster already has, for the list resource `fracgpu_nodepool` (what
//! `terraform query` reads) and the data source `fracgpu_nodepools`. Both take the same
//! configuration: one cluster, named by an `aks`, `gke` or `eks` block as in the resource, and
//! filters. Every pool is read the way `terraform import` reads it, so what a query generates is
//! what an import would have written.

use std::time::Duration;

use crate::cloud::{Location, Pool};
use crate::provider::{ProviderState, Settings};
use crate::resources::nodepool;
use gpu::SharingMode;
use tfplugin::object::{Decoded, FromValue, SingleBlock};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::{ExactlyOneOf, OneOf};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

/// The values of the `sharing` filter: a pool's sharing block, or `none` for whole GPUs.
pub const SHARING_MODES: &[&str] = &["none", "mig", "time_slicing", "mps"];

/// How long a list may take, the cloud's retries included.
const LIST_TIMEOUT: Duration = Duration::from_secs(300);

/// The cluster blocks and the filters, added to `block`.
pub fn query_block(block: Block) -> Block {
    let aks = Block::new("An AKS cluster.")
        .attr(Attribute::string("subscription_id").optional().describe("Subscription of the cluster. Default: the provider's `azure.subscription_id` or `ARM_SUBSCRIPTION_ID`."))
        .attr(Attribute::string("resource_group").required().describe("Resource group of the cluster."))
        .attr(Attribute::string("cluster_name").required().describe("Name of the AKS cluster."));
    let gke = Block::new("A GKE cluster.")
        .attr(Attribute::string("project").optional().describe("Project of the cluster. Default: the provider's `google.project`, `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`."))
        .attr(Attribute::string("location").required().describe("Region or zone of the cluster, e.g. `us-central1`."))
        .attr(Attribute::string("cluster").required().describe("Name of the GKE cluster."));
    let eks = Block::new("An EKS cluster.")
        .attr(Attribute::string("region").optional().describe("Region of the cluster. Default: the provider's `aws.region`, `AWS_REGION` or `AWS_DEFAULT_REGION`."))
        .attr(Attribute::string("cluster_name").required().describe("Name of the EKS cluster."));
    block
        .attr(Attribute::bool("gpu_only").optional().describe("Only pools whose machine type carries GPUs the provider knows (the pools `fracgpu_nodepool` can manage). Default `true`; `false` adds the cluster's other pools, without GPU details."))
        .attr(Attribute::string("sharing").optional().describe("Only pools shared this way: `mig`, `time_slicing`, `mps`, or `none` (whole GPUs). Default: every pool.").validate(OneOf(SHARING_MODES)))
        .single_block("aks", aks)
        .single_block("gke", gke)
        .single_block("eks", eks)
        .validate(ExactlyOneOf(&["aks", "gke", "eks"]))
}

tfplugin::object! {
    pub struct AksCluster {
        pub subscription_id: Option<String>,
        pub resource_group: String,
        pub cluster_name: String,
    }
}

tfplugin::object! {
    pub struct GkeCluster {
        pub project: Option<String>,
        pub location: String,
        pub cluster: String,
    }
}

tfplugin::object! {
    pub struct EksCluster {
        pub region: Option<String>,
        pub cluster_name: String,
    }
}

tfplugin::object! {
    /// What to find: one cluster, and the filters.
    pub struct Query {
        pub gpu_only: Option<bool>,
        pub sharing: Option<String>,
        pub aks: SingleBlock<AksCluster>,
        pub gke: SingleBlock<GkeCluster>,
        pub eks: SingleBlock<EksCluster>,
    }
}

impl Query {
    /// The cluster, with the provider's defaults for what the block leaves out; a default that
    /// is missing too is an error on the attribute (under `prefix`, where the block sits).
    pub fn location(
        &self,
        settings: &Settings,
        prefix: &AttrPath,
        diags: &mut Diagnostics,
    ) -> Option<Location> {
        let cloud = &settings.cloud;
        let mut missing = |block: &str, attr: &str, what: &str, fix: &str| {
            diags.push(
                Diagnostic::error(
                    format!("Missing {what}"),
                    format!("Set `{block}.{attr}`, {fix}."),
                )
                .at(prefix.with_attr(block).with_index(0).with_attr(attr)),
            );
            None
        };
        if let Some(b) = &*self.aks {
            let Some(subscription_id) = b
                .subscription_id
                .clone()
                .or_else(|| cloud.azure.subscription_id.clone())
            else {
                return missing(
                    "aks",
                    "subscription_id",
                    "Azure subscription",
                    "the provider's `azure.subscription_id`, or ARM_SUBSCRIPTION_ID",
                );
            };
            return Some(Location::Aks {
                subscription_id,
                resource_group: b.resource_group.clone(),
                cluster: b.cluster_name.clone(),
            });
        }
        if let Some(b) = &*self.gke {
            let Some(project) = b.project.clone().or_else(|| cloud.google.project.clone()) else {
                return missing(
                    "gke",
                    "project",
                    "Google Cloud project",
                    "the provider's `google.project`, or GOOGLE_PROJECT",
                );
            };
            return Some(Location::Gke {
                project,
                location: b.location.clone(),
                cluster: b.cluster.clone(),
            });
        }
        if let Some(b) = &*self.eks {
            let Some(region) = b.region.clone().or_else(|| cloud.aws.region.clone()) else {
                return missing(
                    "eks",
                    "region",
                    "AWS region",
                    "the provider's `aws.region`, or AWS_REGION",
                );
            };
            return Some(Location::Eks {
                region,
                cluster: b.cluster_name.clone(),
            });
        }
        None
    }

    fn keeps(&self, found: &Found) -> bool {
        let gpu_only = self.gpu_only.unwrap_or(true);
        match (&found.mode, &self.sharing) {
            (None, _) if gpu_only => false,
            (None, Some(_)) => false,
            (_, None) => true,
            (Some(mode), Some(wanted)) => sharing_name(mode) == wanted,
        }
    }
}

/// One pool of the cluster.
pub struct Found {
    pub location: Location,
    pub pool: Pool,
    /// The pool as `terraform import` reads it; None for a pool `fracgpu_nodepool` cannot
    /// manage (its machine type carries no GPU the provider knows).
    pub state: Option<Value>,
    /// How it shares its GPUs; None without GPUs.
    pub mode: Option<SharingMode>,
}

/// The `sharing` filter's name of a mode.
pub fn sharing_name(mode: &SharingMode) -> &'static str {
    match mode {
        SharingMode::None => "none",
        SharingMode::Mig { .. } => "mig",
        SharingMode::TimeSlicing { .. } => "time_slicing",
        SharingMode::Mps { .. } => "mps",
    }
}

impl Found {
    /// What `terraform query` shows for the pool: its name, machine type, sharing and size.
    pub fn display_name(&self) -> String {
        let spec = &self.pool.spec;
        let sharing = match &self.mode {
            None => "no GPU".to_string(),
            Some(SharingMode::None) => "whole GPUs".to_string(),
            Some(SharingMode::Mig { profile, .. }) => format!("MIG {profile}"),
            Some(SharingMode::TimeSlicing { replicas, .. }) => format!("time-slicing x{replicas}"),
            Some(SharingMode::Mps { replicas }) => format!("MPS x{replicas}"),
        };
        let size = match spec.scaling {
            crate::cloud::Scaling::Fixed { nodes: 1 } => "1 node".to_string(),
            crate::cloud::Scaling::Fixed { nodes } => format!("{nodes} nodes"),
            crate::cloud::Scaling::Auto { min, max } => format!("{min}-{max} nodes"),
        };
        format!("{} ({}, {sharing}, {size})", spec.name, spec.machine_type)
    }
}

/// Every pool of the query's cluster that its filters keep, ordered by name; None after an
/// error diagnostic (the cluster named nothing, or the cloud could not answer).
pub async fn find(
    state: &ProviderState,
    query: &Query,
    prefix: &AttrPath,
    diags: &mut Diagnostics,
) -> Option<Vec<Found>> {
    let settings = state.settings();
    let location = query.location(&settings, prefix, diags)?;
    let client = match state.node_pools(location.cloud()).await {
        Ok(c) => c,
        Err(e) => {
            diags.push(Diagnostic::error(
                "Cloud client unavailable",
                format!(
                    "Could not set up the {} client: {e}. Configure the provider's credentials for it (or `sandbox`).",
                    location.cloud().to_uppercase()
                ),
            ));
            return None;
        }
    };
    let ctx = crate::operation::OpCtx::new(LIST_TIMEOUT, state.stop.clone());
    let pools = match client.list(&location, &ctx).await {
        Ok(p) => p,
        Err(e) => {
            diags.push(Diagnostic::error(
                "Cannot list node pools",
                format!("Listing the node pools of {}: {e}", describe(&location)),
            ));
            return None;
        }
    };
    tracing::debug!(
        cloud = location.cloud(),
        pools = pools.len(),
        "listed node pools"
    );
    let found = pools.into_iter().map(|pool| {
        // A pool the provider cannot manage reads with diagnostics that explain why; here they
        // only mean "not a GPU pool", which the filter decides.
        let state = nodepool::state_of_pool(&pool, &settings, &mut Diagnostics::new());
        let mode = state.as_ref().and_then(nodepool::sharing_of_state);
        Found {
            location: location.clone(),
            pool,
            state,
            mode,
        }
    });
    Some(found.filter(|f| query.keeps(f)).collect())
}

fn describe(loc: &Location) -> String {
    match loc {
        Location::Aks {
            subscription_id,
            resource_group,
            cluster,
        } => format!(
            "AKS cluster {cluster} (resource group {resource_group}, subscription {subscription_id})"
        ),
        Location::Gke {
            project,
            location,
            cluster,
        } => format!("GKE cluster projects/{project}/locations/{location}/clusters/{cluster}"),
        Location::Eks { region, cluster } => format!("EKS cluster {cluster} in {region}"),
    }
}

/// Reads a query from a configuration; a configuration that does not fit the schema (which
/// terraform checked already) is reported rather than trusted.
pub fn query_of(config: &Value, diags: &mut Diagnostics) -> Option<Query> {
    Query::from_value(config).or_report(diags)
}
