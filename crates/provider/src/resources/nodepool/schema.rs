//! The schema of `fracgpu_nodepool` (version 0): what users write and read, with each
//! argument's default and whether a change applies in place or replaces the pool. Defaults that
//! do not depend on the provider's configuration are declared here, so the plan shows them.

use std::time::Duration;

use crate::cloud::registry::{self, TARGETS};
use crate::model::{self, TaintArgs};
use tfplugin::object::ToValue;
use tfplugin::plan::Timeouts;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::validators::{ConflictsWith, ExactlyOneOf, IntBetween};
use tfplugin::{Type, Value};

/// A create, update or delete waits for the cloud's operation; a read is one GET with retries,
/// and past its limit an API that does not answer fails the refresh.
pub(super) const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", Duration::from_secs(45 * 60)),
    ("read", Duration::from_secs(120)),
    ("update", Duration::from_secs(45 * 60)),
    ("delete", Duration::from_secs(45 * 60)),
]);
pub fn schema() -> Schema {
    let autoscaling = Block::new(
        "Let the cloud's autoscaler size the pool between two bounds (instead of `node_count`). \
            The bounds are the pool's totals on every cloud: on GKE, whose autoscaler counts per \
            zone, they are its total limits across the pool's zones (gcloud's `--total-min-nodes` \
            and `--total-max-nodes`).",
    )
    .attr(
        Attribute::number("min_nodes")
            .required()
            .describe("Fewest nodes in all; 0 lets an idle pool scale to zero.")
            .validate(IntBetween(0, 1000)),
    )
    .attr(
        Attribute::number("max_nodes")
            .required()
            .describe("Most nodes in all.")
            .validate(IntBetween(1, 1000)),
    );
    let gpu = vec![
        Attribute::string("model")
            .computed()
            .describe("GPU model id, e.g. `A100-80GB`."),
        Attribute::number("count")
            .computed()
            .describe("GPUs per node."),
        Attribute::number("memory_mb")
            .computed()
            .describe("Memory per GPU in MiB."),
    ];
    let block = Block::new(
        "A GPU node pool on AKS, GKE or EKS prepared for sharing its GPUs by MIG partitions, \
            time-slicing or MPS. Everything the provider's GPU catalog can check is checked at \
            plan time; the computed attributes tell workloads what to request and where to land.",
    )
    .attr(Attribute::string("id").computed().use_state_for_unknown().describe(
        "The cloud's ID: the ARM resource ID (AKS), \
        `projects/P/locations/L/clusters/C/nodePools/N` (GKE) or `cluster:nodegroup` (EKS)."))
    .attr(Attribute::string("name").required().requires_replace().describe(
        "Name of the pool (AKS: 1-12 lowercase letters and digits; GKE: 1-40 lowercase letters, \
        digits, `-`; EKS: 1-63)."))
    .attr(Attribute::string("machine_type").required().requires_replace().describe(
        "VM size, machine type or instance type with GPUs, e.g. `Standard_NC24ads_A100_v4`, \
        `a2-highgpu-1g`, `p4d.24xlarge`."))
    .attr(Attribute::string("gpu_model").optional().requires_replace().describe(
        "Overrides the catalog's GPU model (e.g. `nvidia-tesla-t4` for GKE n1 machine types). \
        Default: the catalog's model for `machine_type`."))
    .attr(Attribute::number("gpu_count").optional().requires_replace().describe(
        "Overrides the catalog's GPUs per node. Default: the catalog's count for `machine_type`.").validate(IntBetween(1, 16)))
    .attr(Attribute::number("node_count").optional().computed().use_state_for_unknown().describe(
        "Fixed number of nodes in all when `autoscaling` is not set; 0 keeps the pool with no \
        nodes (on EKS, whose maxSize cannot be 0, that is minSize 0, maxSize 1, desiredSize 0). \
        GKE counts nodes per zone (gcloud's `--num-nodes` is per zone); here the total is split \
        evenly over the pool's zones (`gke.node_locations`), so on GKE it must be a multiple of \
        their number. Default 1; on GKE, one node in each of the pool's zones. Changes in place.").validate(IntBetween(0, 1000)))
    .attr(Attribute::bool("spot").optional().computed().requires_replace().describe(
        "Spot / preemptible capacity. Default `false`.").default_value(Value::Bool(false)))
    .attr(Attribute::number("disk_size_gb").optional().computed().use_state_for_unknown().requires_replace().describe(
        "OS disk size in GB. Default: the cloud's (read back after create).").validate(IntBetween(10, 65536)))
    .attr(Attribute::new("labels", Type::map(Type::String)).optional().describe(
        "Node labels of your own. Default none. Changes in place."))
    .attr(
        model::taints_attribute("Node taints. Default: `nvidia.com/gpu=Present:NoSchedule` on AKS \
            and EKS, so only pods that tolerate it land on GPU nodes; on GKE, GKE's own \
            `nvidia.com/gpu=present:NoSchedule`, which GKE puts on every GPU node itself and is \
            therefore never asked for. Kubernetes refuses a node whose taints repeat a key and \
            effect, so any other `nvidia.com/gpu` NoSchedule taint is refused on GKE, and two \
            taints with one key and effect anywhere. Set `[]` for none of yours (GKE's own stays \
            on GKE nodes, and `tolerations` still covers it). Changes in place.")
            .optional()
            .computed()
            .default_value(vec![TaintArgs::of("nvidia.com/gpu", "Present", "NoSchedule")].to_value()),
    )
    .attr(Attribute::nested("gpu", Nesting::Single, gpu).computed().describe("The GPUs of each node."))
    .attr(Attribute::string("device_plugin_config_name").computed().describe(
        "The NVIDIA device plugin config the nodes select through the \
        `nvidia.com/device-plugin.config` label (AKS, EKS); null on GKE. A time-sliced or MPS \
        pool's config is its own, `fracgpu-<name>`, whatever its settings (they are in the \
        label `fracgpu.dev/sharing`), so that changing them never relabels the nodes; a pool \
        made while names said the settings (`time-sliced-10`) keeps that name until they \
        change. Plug it into `fracgpu_device_plugin_config`."))
    .attr(Attribute::string("device_plugin_config").computed().describe(
        "That config's YAML, as the device plugin reads it."))
    .attr(Attribute::string("resource_name").computed().describe(
        "The extended resource workloads request, e.g. `nvidia.com/gpu` or \
        `nvidia.com/mig-1g.10gb`."))
    .attr(Attribute::number("slices_per_node").computed().describe("Schedulable GPU units per node."))
    .attr(Attribute::number("memory_per_slice_mb").computed().describe(
        "GPU memory of one unit in MiB (enforced by MIG and MPS only)."))
    .attr(Attribute::new("node_selector", Type::map(Type::String)).computed().describe(
        "Labels that pin a workload to this pool's nodes."))
    .attr(model::tolerations_attribute("Tolerations for the pool's taints."))
    .attr(Attribute::new("node_labels", Type::map(Type::String)).computed().describe(
        "Every label the provider sets on the nodes: yours and the ones sharing needs."))
    .attr(Attribute::new("autoscaler_node_template", Type::map(Type::String)).computed().describe(
        "The tags from which the cluster autoscaler builds a node of this pool before one exists \
        (scale from zero): what a node offers once its device plugin runs (the shared resource, \
        `slices_per_node` of it), its labels and its taints. On AKS they are the agent pool's \
        tags, which AKS copies to the pool's scale set, named as cluster-autoscaler's Azure \
        provider reads them (`k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu`); on \
        EKS the tags of the node group's Auto Scaling group, which EKS does not copy from the \
        node group (`k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu`). Empty for a pool without `autoscaling`, and on GKE, whose autoscaler counts shared GPUs \
        by itself. A template changed outside Terraform shows as drift and is set back in \
        place."))
    .attr(Attribute::string("status").computed().describe(
        "The cloud's provisioning state (`Succeeded`, `RUNNING`, `ACTIVE`)."))
    ;
    let block = TARGETS
        .iter()
        .fold(block, |b, t| {
            b.single_block(t.cloud().as_str(), t.pool_block())
        })
        .single_block("autoscaling", autoscaling)
        .single_block("timeouts", TIMEOUTS.block())
        .validate(ExactlyOneOf(&registry::BLOCK_NAMES))
        .validate(ConflictsWith(&["node_count", "autoscaling"]));
    Schema::new(0, model::sharing_blocks(block, false))
}
