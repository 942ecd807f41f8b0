//! Finding the pools a cluster already has, for the list resource `fracgpu_nodepool` (what
//! `terraform query` reads) and the data source `fracgpu_nodepools`. Both take the same
//! configuration: one cluster, named by an `aks`, `gke` or `eks` block as in the resource, and
//! filters. Every pool is read the way `terraform import` reads it, so what a query generates is
//! what an import would have written.

use std::time::Duration;

use super::{sharing_of_state, state_of_pool};
use crate::cloud::registry::{self, TARGETS};
use crate::cloud::{Location, Pool};
use crate::state::{ProviderState, Settings};
use gpu::SharingMode;
use tfplugin::object::{Decoded, FromValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::{ExactlyOneOf, OneOf};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

/// How long a list may take, the cloud's retries included.
const LIST_TIMEOUT: Duration = Duration::from_secs(300);

/// The cluster blocks and the filters, added to `block`.
pub fn query_block(block: Block) -> Block {
    let block = block
        .attr(Attribute::bool("gpu_only").optional().describe(
            "Only pools whose machine type carries GPUs the provider knows (the pools \
            `fracgpu_nodepool` can manage). Default `true`; `false` adds the cluster's other \
            pools, without GPU details."))
        .attr(Attribute::string("sharing").optional().describe(
            "Only pools shared this way: `mig`, `time_slicing`, `mps`, or `none` (whole GPUs). \
            Default: every pool.").validate(OneOf(SharingMode::NAMES)));
    TARGETS
        .iter()
        .fold(block, |b, t| {
            b.single_block(t.cloud().as_str(), t.query_block())
        })
        .validate(ExactlyOneOf(&registry::BLOCK_NAMES))
}

tfplugin::object! {
    /// The filters of a query.
    struct Filters {
        gpu_only: Option<bool>,
        sharing: Option<String>,
    }
}

/// What to find: one cluster, and the filters.
pub struct Query {
    pub gpu_only: Option<bool>,
    pub sharing: Option<String>,
    /// The configuration, whose target block `cloud::registry` reads.
    cluster: Value,
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
        let located = registry::locate(&self.cluster, &settings.cloud);
        registry::or_report(located, prefix, true, diags)
    }

    fn keeps(&self, found: &Found) -> bool {
        let gpu_only = self.gpu_only.unwrap_or(true);
        match (&found.mode, &self.sharing) {
            (None, _) if gpu_only => false,
            (None, Some(_)) => false,
            (_, None) => true,
            (Some(mode), Some(wanted)) => mode.name() == wanted,
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

impl Found {
    /// What `terraform query` shows for the pool: its name, machine type, sharing and size.
    pub fn display_name(&self) -> String {
        let spec = &self.pool.spec;
        let sharing = match &self.mode {
            None => "no GPU".to_string(),
            Some(mode) => mode.label(),
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
                    "Could not set up the {} client: {e}. Configure the provider's credentials for \
                        it (or `sandbox`).",
                    location.target().title()
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
                format!("Listing the node pools of {}: {e}", location.describe()),
            ));
            return None;
        }
    };
    tracing::debug!(
        cloud = location.cloud().as_str(),
        pools = pools.len(),
        "listed node pools"
    );
    let found = pools.into_iter().map(|pool| {
        // A pool the provider cannot manage reads with diagnostics that explain why; here they
        // only mean "not a GPU pool", which the filter decides.
        let state = state_of_pool(&pool, &settings, &mut Diagnostics::new());
        let mode = state.as_ref().and_then(sharing_of_state);
        Found {
            location: location.clone(),
            pool,
            state,
            mode,
        }
    });
    Some(found.filter(|f| query.keeps(f)).collect())
}

/// Reads a query from a configuration; a configuration that does not fit the schema (which
/// terraform checked already) is reported rather than trusted.
pub fn query_of(config: &Value, diags: &mut Diagnostics) -> Option<Query> {
    let filters = Filters::from_value(config).or_report(diags)?;
    if !registry::names_cluster(config) {
        diags.push(Diagnostic::error(
            "Invalid configuration",
            "The configuration does not name one cluster with an `aks`, `gke` or `eks` block and \
                its required attributes.",
        ));
        return None;
    }
    Some(Query {
        gpu_only: filters.gpu_only,
        sharing: filters.sharing,
        cluster: config.clone(),
    })
}
