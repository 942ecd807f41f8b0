//! `fracgpu_workload`: before deploying, what a workload must request to land on a shared GPU
//! pool, and whether it fits at all.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::model::{self, Sharing, TaintArgs, TolerationOut, domain_diagnostic};
use gpu::{self, Cloud, Field, PoolSpec, WorkloadNeed};
use tfplugin::api::DataSource;
use tfplugin::object::{Decoded, FromValue, ToValue};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::{ExactlyOneOf, IntBetween, OneOf};
use tfplugin::{Diagnostic, Diagnostics, Value};

pub struct WorkloadDataSource;

/// Domain fields whose attribute has another name here.
const RENAME: &[(Field, &str)] = &[(Field::PoolName, "pool_name")];
/// Stands in for the pool name when none is given; its selector label is then left out.
const PLACEHOLDER_POOL: &str = "gpupool";

pub fn schema() -> Schema {
    let block = Block::new(
        "Answers, before anything is deployed, whether a workload fits a GPU pool shared by MIG, \
            time-slicing or MPS, and what it must put in its pod spec: the extended resource and \
            quantity, the memory it must stay under, the node selector and the tolerations.",
    )
    .attr(Attribute::string("cloud").required().describe("The cloud the machine type belongs to.").validate(OneOf(&crate::cloud::registry::BLOCK_NAMES)))
    .attr(Attribute::string("machine_type").optional().describe(
        "The pool's machine type, e.g. `Standard_NC24ads_A100_v4`. Give this or `gpu_model`."))
    .attr(Attribute::string("gpu_model").optional().describe(
        "The GPU model (e.g. `A100-40GB`, `nvidia-tesla-t4`), to override the catalog or describe \
        a machine type it lacks."))
    .attr(Attribute::number("gpu_count").optional().describe(
        "GPUs per node, to override the catalog. Default: the machine type's count, or 1.").validate(IntBetween(1, 16)))
    .attr(Attribute::string("pool_name").optional().describe(
        "The node pool's name; adds the pool's own label to the node selector."))
    .attr(model::taints_attribute("The pool's taints. Default: `nvidia.com/gpu=Present:NoSchedule`.").optional())
    .attr(Attribute::number("gpu_memory_mb").optional().describe(
        "GPU memory the workload needs, in MiB. Give this or `mig_profile`.").validate(IntBetween(1, 10_000_000)))
    .attr(Attribute::string("mig_profile").optional().describe(
        "The MIG instance the workload needs, e.g. `1g.10gb` (MIG pools)."))
    .attr(Attribute::bool("fits").computed().describe(
        "Whether the workload fits one node of the pool."))
    .attr(Attribute::string("reason").computed().describe(
        "Why it does not fit and what to change; null when it fits."))
    .attr(Attribute::string("resource_name").computed().describe(
        "The extended resource to request, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`."))
    .attr(Attribute::number("quantity").computed().describe("How many of that resource to request."))
    .attr(Attribute::number("memory_limit_mb").computed().describe(
        "The GPU memory (MiB) the workload must stay under: quantity x memory per slice."))
    .attr(Attribute::number("slices_per_node").computed().describe("Schedulable units per node."))
    .attr(Attribute::number("memory_per_slice_mb").computed().describe("GPU memory of one unit, in MiB."))
    .attr(Attribute::new("resources", tfplugin::Type::map(tfplugin::Type::String)).computed().describe(
        "A ready-to-use resource limits map, e.g. `{\"nvidia.com/gpu\" = \"3\"}`."))
    .attr(Attribute::new("node_selector", tfplugin::Type::map(tfplugin::Type::String)).computed().describe(
        "Labels that pin the workload to the pool's nodes."))
    .attr(model::tolerations_attribute("Tolerations for the pool's taints."))
    .attr(Attribute::string("device_plugin_config_name").computed().describe(
        "The NVIDIA device plugin config the pool's nodes select (AKS and EKS; null on GKE)."))
    .attr(Attribute::string("warning").computed().describe(
        "What nothing enforces, e.g. the memory limit under time-slicing; null when there is \
        nothing to say."))
    .validate(ExactlyOneOf(&["gpu_memory_mb", "mig_profile"]));
    Schema::new(0, model::sharing_blocks(block, false))
}

tfplugin::object! {
    /// The arguments.
    struct Args {
        cloud: String,
        machine_type: Option<String>,
        gpu_model: Option<String>,
        gpu_count: Option<u32>,
        pool_name: Option<String>,
        taints: Option<Vec<TaintArgs>>,
        gpu_memory_mb: Option<u64>,
        mig_profile: Option<String>,
    }
    flatten {
        sharing: Sharing,
    }
}

tfplugin::object! {
    /// The whole data source: the arguments and the answer.
    struct Workload {
        fits: bool,
        reason: Option<String>,
        resource_name: String,
        quantity: u32,
        memory_limit_mb: u64,
        slices_per_node: u32,
        memory_per_slice_mb: u32,
        resources: BTreeMap<String, String>,
        node_selector: BTreeMap<String, String>,
        tolerations: Vec<TolerationOut>,
        device_plugin_config_name: Option<String>,
        warning: Option<String>,
    }
    flatten {
        args: Args,
    }
}

/// Everything the answer depends on, read from a fully known configuration.
struct Question {
    spec: PoolSpec,
    need: WorkloadNeed,
    pool_named: bool,
}

fn question(args: &Args, diags: &mut Diagnostics) -> Option<Question> {
    let cloud = Cloud::parse(&args.cloud).ok()?;
    let gpu_model = args.gpu_model.as_deref();
    // A GPU model alone describes a machine outside the catalog with one GPU unless told otherwise.
    let (machine, count) = match (args.machine_type.as_deref(), gpu_model) {
        (Some(m), _) => (m, args.gpu_count),
        (None, Some(_)) => ("custom", Some(args.gpu_count.unwrap_or(1))),
        (None, None) => {
            diags.push(
                Diagnostic::error(
                    "Missing machine type",
                    "Set machine_type (e.g. \"Standard_NC24ads_A100_v4\") or gpu_model (e.g. \
                    \"A100-40GB\") so the provider knows the pool's GPUs.",
                )
                .at(tfplugin::AttrPath::attr("machine_type")),
            );
            return None;
        }
    };
    let hardware = match gpu::resolve_hardware(cloud, machine, gpu_model, count) {
        Ok(h) => h,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, RENAME));
            }
            return None;
        }
    };
    let need = match (args.gpu_memory_mb, &args.mig_profile) {
        (Some(mib), _) => WorkloadNeed::GpuMemoryMib(mib),
        (None, Some(p)) => WorkloadNeed::MigProfile(p.clone()),
        _ => return None,
    };
    Some(Question {
        spec: PoolSpec {
            cloud,
            pool_name: args
                .pool_name
                .clone()
                .unwrap_or_else(|| PLACEHOLDER_POOL.to_string()),
            hardware,
            sharing: args.sharing.mode(),
            taints: model::taints(&args.taints),
            labels: BTreeMap::new(),
        },
        need,
        pool_named: args.pool_name.is_some(),
    })
}

/// The pool's own name label, which only a named pool can put in a selector.
const POOL_LABELS: &[&str] = &[
    "agentpool",
    "kubernetes.azure.com/agentpool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
];

fn answer(q: &Question, diags: &mut Diagnostics) -> Option<(gpu::Derived, gpu::WorkloadFit)> {
    let derived = match gpu::validate(&q.spec) {
        Ok(d) => d,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, RENAME));
            }
            return None;
        }
    };
    match gpu::workload_fit(&derived, &q.need) {
        Ok(fit) => Some((derived, fit)),
        Err(e) => {
            diags.push(domain_diagnostic(&e, RENAME));
            None
        }
    }
}

#[async_trait]
impl DataSource for WorkloadDataSource {
    fn type_name(&self) -> &'static str {
        "fracgpu_workload"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(q) = Args::from_value(config)
            .or_report_mismatch(diags)
            .and_then(|a| question(&a, diags))
        {
            answer(&q, diags);
        }
    }

    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value {
        let Some(args) = Args::from_value(config).or_report(diags) else {
            return Value::Null;
        };
        let Some(q) = question(&args, diags) else {
            return Value::Null;
        };
        let Some((derived, fit)) = answer(&q, diags) else {
            return Value::Null;
        };
        let mut node_selector = derived.node_selector.clone();
        if !q.pool_named {
            node_selector.retain(|k, _| !POOL_LABELS.contains(&k.as_str()));
        }
        if fit.fits && fit.quantity > 1 && fit.warning.is_some() {
            diags.push(
                Diagnostic::warning(
                    "Workload memory is not isolated",
                    format!(
                        "The workload needs {} slices of a time-sliced GPU. {}",
                        fit.quantity,
                        fit.warning.clone().unwrap_or_default()
                    ),
                )
                .at(tfplugin::AttrPath::attr("gpu_memory_mb")),
            );
        }
        Workload {
            fits: fit.fits,
            reason: fit.reason,
            resources: [(fit.resource_name.clone(), fit.quantity.to_string())].into(),
            resource_name: fit.resource_name,
            quantity: fit.quantity,
            memory_limit_mb: fit.memory_limit_mib,
            slices_per_node: derived.slices_per_node,
            memory_per_slice_mb: derived.memory_per_slice_mib,
            node_selector,
            tolerations: TolerationOut::all(&derived.tolerations),
            device_plugin_config_name: derived.device_plugin_config.map(|c| c.name),
            warning: fit.warning,
            args,
        }
        .to_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_names_what_the_schema_declares() {
        assert_eq!(Workload::attribute_names(), schema().block.names());
    }
}
