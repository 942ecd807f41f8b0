//! `fracgpu_nodepools`: the GPU pools one cluster already has, with what a workload needs to pick
//! one (sharing, resource name, slices, node selector, tolerations). For modules, and for
//! terraform before 1.14, which has no `terraform query`.

use std::sync::Arc;

use async_trait::async_trait;

use crate::cloud::Scaling;
use crate::model;
use crate::resources::nodepool::discovery::{self, Found, query_block, query_of, sharing_name};
use crate::state::ProviderState;
use gpu::SharingMode;
use tfplugin::api::DataSource;
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
            "The extended resource workloads request, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`.",
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

pub fn schema() -> Schema {
    let block = query_block(Block::new(
        "The node pools one AKS, GKE or EKS cluster already has, those no terraform made included, with what a workload needs to run on each: its sharing, the extended resource and slices, the node selector and tolerations. GPU pools only, unless `gpu_only = false`.",
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
        let mut out = config.clone();
        if let Some(pools) = out.get_mut("pools") {
            *pools = Value::List(found.iter().map(pool_value).collect());
        }
        out
    }
}

/// One pool's object: what the cloud reports, and what the provider derives from it (taken from
/// the state an import would give it, so both always agree).
fn pool_value(f: &Found) -> Value {
    let spec = &f.pool.spec;
    let from_state = |k: &str| f.state.as_ref().map_or(Value::Null, |s| s.get(k).clone());
    let gpu = from_state("gpu");
    let (node_count, min, max) = match spec.scaling {
        Scaling::Fixed { nodes } => (Value::int(nodes.into()), Value::Null, Value::Null),
        Scaling::Auto { min, max } => (Value::Null, Value::int(min.into()), Value::int(max.into())),
    };
    let (mig_profile, replicas) = match &f.mode {
        Some(SharingMode::Mig { profile, .. }) => (Value::string(profile), Value::Null),
        Some(SharingMode::TimeSlicing { replicas, .. } | SharingMode::Mps { replicas }) => {
            (Value::Null, Value::int((*replicas).into()))
        }
        _ => (Value::Null, Value::Null),
    };
    Value::object([
        ("name", Value::string(&spec.name)),
        ("id", Value::string(&f.pool.id)),
        ("machine_type", Value::string(&spec.machine_type)),
        ("status", Value::string(&f.pool.status)),
        ("gpu_model", gpu.get("model").clone()),
        ("gpu_count", gpu.get("count").clone()),
        ("gpu_memory_mb", gpu.get("memory_mb").clone()),
        ("node_count", node_count),
        ("min_nodes", min),
        ("max_nodes", max),
        ("spot", Value::Bool(spec.spot)),
        (
            "sharing",
            Value::opt_string(f.mode.as_ref().map(sharing_name)),
        ),
        ("mig_profile", mig_profile),
        ("replicas", replicas),
        ("resource_name", from_state("resource_name")),
        ("slices_per_node", from_state("slices_per_node")),
        ("memory_per_slice_mb", from_state("memory_per_slice_mb")),
        ("node_selector", from_state("node_selector")),
        ("tolerations", from_state("tolerations")),
        (
            "device_plugin_config_name",
            from_state("device_plugin_config_name"),
        ),
        (
            "node_labels",
            Value::Map(
                spec.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::string(v)))
                    .collect(),
            ),
        ),
    ])
}
