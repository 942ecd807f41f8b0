//! `fracgpu_nodepools`: the GPU pools one cluster already has, with what a workload needs to pick
//! one (sharing, resource name, slices, node selector, tolerations). For modules, and for
//! terraform before 1.14, which has no `terraform query`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::cloud::Scaling;
use crate::model::{self, TolerationOut};
use crate::resources::nodepool::discovery::{self, Found, query_block, query_of};
use crate::state::ProviderState;
use gpu::SharingMode;
use tfplugin::api::DataSource;
use tfplugin::object::{Decoded, FromValue, merge};
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::{AttrPath, Diagnostics, Type, Value};

pub const TYPE_NAME: &str = "fracgpu_nodepools";

pub struct NodePoolsDataSource {
    state: Arc<ProviderState>,
}

impl NodePoolsDataSource {
    pub fn new(state: Arc<ProviderState>) -> NodePoolsDataSource {
        NodePoolsDataSource { state }
    }
}

/// The attributes of each pool: (name, type, description). Those of the GPU are null for a pool
/// without GPUs (`gpu_only = false`).
fn pool_attributes() -> Vec<Attribute> {
    let s = |name: &str, d: &str| Attribute::string(name).computed().describe(d);
    let n = |name: &str, d: &str| Attribute::number(name).computed().describe(d);
    let map = |name: &str, d: &str| {
        Attribute::new(name, Type::map(Type::String))
            .computed()
            .describe(d)
    };
    vec![
        s("name", "Name of the pool (the node group on EKS)."),
        s(
            "id",
            "The cloud's ID of the pool, as `terraform import` takes it.",
        ),
        s("machine_type", "VM size, machine type or instance type."),
        s("status", "The cloud's provisioning state."),
        s("gpu_model", "The GPU model, e.g. `A100-40GB`."),
        n("gpu_count", "GPUs per node."),
        n("gpu_memory_mb", "Memory of one GPU in MiB."),
        n(
            "node_count",
            "Nodes of a fixed-size pool; null when it autoscales.",
        ),
        n(
            "min_nodes",
            "Lower autoscaling bound; null for a fixed-size pool.",
        ),
        n(
            "max_nodes",
            "Upper autoscaling bound; null for a fixed-size pool.",
        ),
        Attribute::bool("spot")
            .computed()
            .describe("Spot / preemptible capacity."),
        s(
            "sharing",
            "`mig`, `time_slicing`, `mps` or `none` (whole GPUs).",
        ),
        s(
            "mig_profile",
            "The MIG profile of a MIG pool, e.g. `1g.10gb`.",
        ),
        n("replicas", "Clients per GPU of a time-sliced or MPS pool."),
        s(
            "resource_name",
            "The extended resource workloads request, e.g. `nvidia.com/gpu` or \
                `nvidia.com/mig-1g.10gb`.",
        ),
        n("slices_per_node", "Schedulable GPU units per node."),
        n("memory_per_slice_mb", "GPU memory of one unit in MiB."),
        map(
            "node_selector",
            "Labels that pin a workload to the pool's nodes.",
        ),
        model::tolerations_attribute("Tolerations for the pool's taints."),
        s(
            "device_plugin_config_name",
            "The NVIDIA device plugin config the nodes select (AKS, EKS); null on GKE.",
        ),
        map(
            "node_labels",
            "Every label the nodes carry by the pool's configuration.",
        ),
    ]
}

tfplugin::object! {
    /// One entry of `pools`.
    struct PoolOut {
        name: String,
        id: String,
        machine_type: String,
        status: String,
        gpu_model: Option<String>,
        gpu_count: Option<u32>,
        gpu_memory_mb: Option<u32>,
        node_count: Option<u32>,
        min_nodes: Option<u32>,
        max_nodes: Option<u32>,
        spot: bool,
        sharing: Option<String>,
        mig_profile: Option<String>,
        replicas: Option<u32>,
        resource_name: Option<String>,
        slices_per_node: Option<u32>,
        memory_per_slice_mb: Option<u32>,
        node_selector: Option<BTreeMap<String, String>>,
        tolerations: Option<Vec<TolerationOut>>,
        device_plugin_config_name: Option<String>,
        node_labels: BTreeMap<String, String>,
    }
}

tfplugin::object! {
    /// The data source's answer.
    struct Pools {
        pools: Vec<PoolOut>,
    }
}

tfplugin::object! {
    /// The `gpu` attribute of a `fracgpu_nodepool` state.
    struct StateGpu {
        model: String,
        count: u32,
        memory_mb: u32,
    }
}

tfplugin::object! {
    /// What a `fracgpu_nodepool` state derives from the pool.
    struct Derived {
        gpu: StateGpu,
        resource_name: String,
        slices_per_node: u32,
        memory_per_slice_mb: u32,
        node_selector: BTreeMap<String, String>,
        tolerations: Vec<TolerationOut>,
        device_plugin_config_name: Option<String>,
    }
}

pub fn schema() -> Schema {
    let block = query_block(Block::new(
        "The node pools one AKS, GKE or EKS cluster already has, those no terraform made included, \
            with what a workload needs to run on each: its sharing, the extended resource and \
            slices, the node selector and tolerations. GPU pools only, unless `gpu_only = false`.",
    ))
    .attr(
        Attribute::nested("pools", Nesting::List, pool_attributes())
            .computed()
            .describe("The pools, ordered by name."),
    );
    Schema::new(0, block)
}

#[async_trait]
impl DataSource for NodePoolsDataSource {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value {
        let Some(query) = query_of(config, diags) else {
            return Value::Null;
        };
        let Some(found) = discovery::find(&self.state, &query, &AttrPath::root(), diags).await
        else {
            return Value::Null;
        };
        let pools = Pools {
            pools: found.iter().map(|f| pool_out(f, diags)).collect(),
        };
        let mut out = config.clone();
        merge(&mut out, &pools);
        out
    }
}

/// One pool's object: what the cloud reports, and what the provider derives from it (taken from
/// the state an import would give it, so both always agree).
fn pool_out(f: &Found, diags: &mut Diagnostics) -> PoolOut {
    let spec = &f.pool.spec;
    // The provider made this state itself: one that does not read is its bug.
    let derived = f
        .state
        .as_ref()
        .and_then(|s| Derived::from_value(s).or_report(diags));
    let (node_count, min_nodes, max_nodes) = match spec.scaling {
        Scaling::Fixed { nodes } => (Some(nodes), None, None),
        Scaling::Auto { min, max } => (None, Some(min), Some(max)),
    };
    let (mig_profile, replicas) = match &f.mode {
        Some(SharingMode::Mig { profile, .. }) => (Some(profile.clone()), None),
        Some(SharingMode::TimeSlicing { replicas, .. } | SharingMode::Mps { replicas, .. }) => {
            (None, Some(*replicas))
        }
        _ => (None, None),
    };
    let d = derived.as_ref();
    PoolOut {
        name: spec.name.clone(),
        id: f.pool.id.clone(),
        machine_type: spec.machine_type.clone(),
        status: f.pool.status.clone(),
        gpu_model: d.map(|d| d.gpu.model.clone()),
        gpu_count: d.map(|d| d.gpu.count),
        gpu_memory_mb: d.map(|d| d.gpu.memory_mb),
        node_count,
        min_nodes,
        max_nodes,
        spot: spec.spot,
        sharing: f.mode.as_ref().map(|m| m.name().to_string()),
        mig_profile,
        replicas,
        resource_name: d.map(|d| d.resource_name.clone()),
        slices_per_node: d.map(|d| d.slices_per_node),
        memory_per_slice_mb: d.map(|d| d.memory_per_slice_mb),
        node_selector: d.map(|d| d.node_selector.clone()),
        tolerations: d.map(|d| d.tolerations.clone()),
        device_plugin_config_name: d.and_then(|d| d.device_plugin_config_name.clone()),
        node_labels: spec.labels.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_name_what_the_schemas_declare() {
        let mut names: Vec<String> = pool_attributes().into_iter().map(|a| a.name).collect();
        names.sort_unstable();
        assert_eq!(PoolOut::attribute_names(), names);
        let pool = crate::resources::nodepool::schema().block;
        let state = pool.names();
        for n in Derived::attribute_names() {
            assert!(
                state.contains(&n),
                "{n} is not an attribute of a pool's state"
            );
        }
    }
}
