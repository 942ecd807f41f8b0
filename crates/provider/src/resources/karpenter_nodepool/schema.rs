//! The schema of `fracgpu_karpenter_nodepool` (version 0). Every argument changes in place but
//! the name: Karpenter reads a changed NodePool or NodeOverlay at once, and nodes made under the
//! old template are replaced by its drift detection, not by Terraform.

use std::time::Duration;

use crate::model::{self, TaintArgs};
use tfplugin::object::ToValue;
use tfplugin::plan::Timeouts;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::validators::{ExactlyOneOf, IntBetween, Matches, OneOf};
use tfplugin::{Type, Value};

use super::provisioner::registry::{BLOCK_NAMES, PROVISIONERS};

/// A write is a few server-side applies; a delete waits for Karpenter's finalizers, which drain
/// and terminate the pool's nodes first.
pub(super) const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", Duration::from_secs(300)),
    ("read", Duration::from_secs(120)),
    ("update", Duration::from_secs(300)),
    ("delete", Duration::from_secs(30 * 60)),
]);

/// A NodePool's name is the value of its nodes' `karpenter.sh/nodepool` label.
pub(super) const NAME_RE: &str = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$";
pub(super) const CAPACITY_TYPES: &[&str] = &["on-demand", "spot", "reserved"];
pub(super) const DEFAULT_CAPACITY_TYPE: &str = "on-demand";
pub(super) const CONSOLIDATION_POLICIES: &[&str] = &["WhenEmptyOrUnderutilized", "WhenEmpty"];

pub fn schema() -> Schema {
    let budget = Block::new(
        "A disruption budget: how many of the pool's nodes Karpenter may disrupt at once, \
        optionally only during a cron window.",
    )
    .attr(
        Attribute::string("nodes")
            .required()
            .describe("A count (`1`) or a percentage (`10%`)."),
    )
    .attr(
        Attribute::string("schedule")
            .optional()
            .describe("Cron schedule of the window, e.g. `0 9 * * mon-fri`; needs `duration`."),
    )
    .attr(
        Attribute::string("duration")
            .optional()
            .describe("Length of the window, e.g. `8h`; needs `schedule`."),
    );
    let disruption = Block::new(
        "Karpenter's disruption settings, passed through to the NodePool. Consolidation works by \
        slices: the pool's NodeOverlays tell Karpenter what a node offers.",
    )
    .attr(
        Attribute::string("consolidation_policy")
            .optional()
            .computed()
            .describe("`WhenEmptyOrUnderutilized` (default) or `WhenEmpty`.")
            .validate(OneOf(CONSOLIDATION_POLICIES))
            .default_value(Value::string("WhenEmptyOrUnderutilized")),
    )
    .attr(
        Attribute::string("consolidate_after")
            .optional()
            .computed()
            .describe(
                "How long a node must be consolidatable before Karpenter acts, e.g. `5m`, or \
                `Never`. Default `0s`.",
            )
            .default_value(Value::string("0s")),
    )
    .block("budget", Nesting::List, budget);

    let block = Block::new(
        "A Karpenter `NodePool` whose nodes share their GPUs by MIG, time-slicing or MPS, with \
        one `NodeOverlay` per GPU count so that Karpenter provisions and consolidates by slices \
        (scale from zero included), and, when asked, the node class it launches with: on EKS \
        Karpenter, or on AKS node auto-provisioning. The objects are the provider's whole: a \
        hand edit is drift, set back by the next apply.",
    )
    .attr(
        Attribute::string("id")
            .computed()
            .use_state_for_unknown()
            .describe("The NodePool's name."),
    )
    .attr(
        Attribute::string("name")
            .required()
            .requires_replace()
            .describe(
                "Name of the NodePool (its nodes carry it in the label `karpenter.sh/nodepool`), \
                and of the node class and overlays it makes: 1 to 63 lowercase letters, digits \
                and `-`, starting with a letter.",
            )
            .validate(Matches::new(
                NAME_RE,
                "1 to 63 lowercase letters, digits and '-', starting with a letter and \
                ending with a letter or digit",
            )),
    )
    .attr(Attribute::string("gpu_model").required().describe(
        "The catalog's GPU model the pool's nodes carry, e.g. `T4`, `A10G`, `L4`, `A100-80GB` \
        (see `data.fracgpu_machine_type`).",
    ))
    .attr(
        Attribute::new("gpu_counts", Type::list(Type::Number))
            .required()
            .describe(
                "GPUs per node the pool may launch, e.g. `[1, 4]`; each must be a count some \
                instance type of that GPU has. One NodeOverlay each.",
            ),
    )
    .attr(
        Attribute::new("capacity_types", Type::list(Type::String))
            .optional()
            .computed()
            .describe("`on-demand`, `spot`, `reserved`. Default `[\"on-demand\"]`.")
            .default_value(Value::List(vec![Value::string(DEFAULT_CAPACITY_TYPE)])),
    )
    .attr(
        Attribute::number("limit_gpus")
            .optional()
            .describe(
                "The most physical GPUs the pool's nodes may hold together. Karpenter sums the \
                capacity of its nodes against the NodePool's limit: with its NodeOverlay gate on \
                that capacity counts slices, and the limit is this times the slices per GPU; \
                otherwise (`node_overlay_gate` off or unknown) an `nvidia.com/gpu` limit is this \
                many whole GPUs, so the pool never holds more GPUs than this either way. \
                Default: no limit.",
            )
            .validate(IntBetween(1, 100_000)),
    )
    .attr(
        Attribute::number("weight")
            .optional()
            .describe("Priority among NodePools that fit a pod, 1 to 100. Default none.")
            .validate(IntBetween(1, 100)),
    )
    .attr(
        Attribute::new("labels", Type::map(Type::String))
            .optional()
            .describe("Node labels of your own, on every node the pool makes."),
    )
    .attr(
        model::taints_attribute(
            "Node taints. Default `nvidia.com/gpu=Present:NoSchedule`, so only pods that \
            tolerate it land on the pool's nodes; `[]` for none.",
        )
        .optional()
        .computed()
        .default_value(vec![TaintArgs::of("nvidia.com/gpu", "Present", "NoSchedule")].to_value()),
    );
    // Each provisioner's block, in the registry's order.
    let block = PROVISIONERS
        .iter()
        .fold(block, |b, p| b.single_block(p.block_name(), p.block()))
        .single_block("disruption", disruption)
        .attr(Attribute::string("resource_name").computed().describe(
            "The extended resource workloads request, e.g. `nvidia.com/gpu` or \
        `nvidia.com/mig-1g.10gb`.",
        ))
        .attr(
            Attribute::number("slices_per_gpu")
                .computed()
                .describe("Units of `resource_name` each GPU offers."),
        )
        .attr(
            Attribute::number("memory_per_slice_mb")
                .computed()
                .describe("GPU memory of one unit in MiB (enforced by MIG and MPS only)."),
        )
        .attr(
            Attribute::new("node_capacity", Type::map(Type::Number))
                .computed()
                .describe(
                    "What a node offers of `resource_name`, per GPU count (`\"4\" = 40`): what the \
                NodeOverlays tell Karpenter.",
                ),
        )
        .attr(
            Attribute::new("limits", Type::map(Type::Number))
                .computed()
                .describe("The NodePool's `spec.limits`, translated from `limit_gpus`."),
        )
        .attr(Attribute::string("node_overlay_gate").computed().describe(
            "Whether the cluster's Karpenter reads NodeOverlays, as last read from its Deployment \
        (`--feature-gates` or `FEATURE_GATES`): `on`, `off`, or `unknown` when no Karpenter \
        Deployment can be read (EKS Auto Mode and AKS node auto-provisioning run Karpenter \
        outside the cluster). Only `on` lets Karpenter size nodes by slices; it decides the unit \
        of `limits`.",
        ))
        .attr(
            Attribute::new("node_selector", Type::map(Type::String))
                .computed()
                .describe("Labels that pin a workload to this pool's nodes."),
        )
        .attr(model::tolerations_attribute(
            "Tolerations for the pool's taints.",
        ))
        .attr(
            Attribute::new("node_labels", Type::map(Type::String))
                .computed()
                .describe(
                    "Every label the NodePool's template sets: yours and the ones sharing needs.",
                ),
        )
        .attr(
            Attribute::string("device_plugin_config_name")
                .computed()
                .describe(
                    "The NVIDIA device plugin config the nodes select through the \
        `nvidia.com/device-plugin.config` label; null on Bottlerocket, whose host device plugin \
        reads the node class's user data. A time-sliced or MPS pool's config is its own, \
        `fracgpu-<name>`, whatever its settings, so that changing them changes no NodePool \
        label (Karpenter would replace every node). Plug it into \
        `fracgpu_device_plugin_config`.",
                ),
        )
        .attr(
            Attribute::string("device_plugin_config")
                .computed()
                .describe("That config's YAML, as the device plugin reads it."),
        )
        .attr(
            Attribute::new("objects", Type::map(Type::String))
                .computed()
                .describe(
                    "The objects the pool owns, by `Kind/name`, as JSON of the fields the provider \
                sets. After a refresh they are what the cluster holds of those fields, so a hand \
                edit, or an object deleted, shows as a change to set back in place.",
                ),
        );
    let block = model::sharing_blocks(block, false)
        .single_block(
            "kubernetes",
            model::kubernetes_block(
                "How to reach the cluster; unset: the provider's `kubernetes` block, then \
                `KUBECONFIG`, `~/.kube/config`, in-cluster.",
            ),
        )
        .single_block("timeouts", TIMEOUTS.block())
        .validate(ExactlyOneOf(BLOCK_NAMES.as_slice()));
    Schema::new(0, block)
}
