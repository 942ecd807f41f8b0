//! The objects of a checked pool, as JSON the API server takes whole: the NodePool, whose
//! template carries the sharing, one NodeOverlay per GPU count, and the node class the pool
//! makes. What differs per provisioner (the requirements that pin the GPU, the node class) the
//! provisioner says; the rest is Karpenter's own API.

use std::collections::BTreeMap;

use gpu::Taint;
use serde_json::{Value, json};

use super::super::provisioner::node_class::{GpuChoice, NODE_OVERLAY, NODE_POOL, NodeClass, req};
use super::checks::strings;
use super::pool::{Disruption, KarpenterPool, NODEPOOL_LABEL, overlay_name};
use crate::cluster::delivery::FIELD_MANAGER;

/// The resource an instance type's GPUs are offered as, overlays or not.
pub(super) const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The label every object made here carries, as the ConfigMap's does.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Resource amounts as Kubernetes writes quantities: strings.
fn quantities(amounts: &BTreeMap<String, u32>) -> Value {
    Value::Object(
        amounts
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect(),
    )
}

fn taint_json(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    v
}

/// The labels of the NodePool's template: the user's and those the sharing needs.
pub(super) fn template_labels(
    p: &KarpenterPool,
    derived: &gpu::Derived,
) -> BTreeMap<String, String> {
    let mut labels = p.labels.clone();
    labels.extend(derived.node_labels.clone());
    // The settings' label serves reading a cloud's pool back; a NodePool is read back from the
    // objects the state holds, and a label of its template that changed with the replicas would
    // make Karpenter replace every node it launched (a NodePool template change is drift).
    labels.remove(gpu::SHARING_LABEL);
    if p.provisioner.host_device_plugin() {
        // The host's device plugin reads the node class's settings, and no MIG manager runs.
        labels.remove(gpu::DEVICE_PLUGIN_CONFIG_LABEL);
        labels.remove(gpu::MIG_CONFIG_LABEL);
    }
    labels
}

/// The NodePool's `spec.limits`: `limit_gpus` in the unit Karpenter counts the pool's nodes in.
pub(super) fn limits(p: &KarpenterPool, derived: &gpu::Derived) -> BTreeMap<String, u32> {
    let mut limits = BTreeMap::new();
    if let Some(gpus) = p.limit_gpus {
        // Karpenter sums the capacity of the pool's nodes. Through the overlays that counts
        // slices. Without them (the gate off, or not known to be on) an instance type offers its
        // GPUs as `nvidia.com/gpu`: a resource of that name is then counted in whole GPUs, and
        // a limit written in slices would let the pool launch that many physical GPUs (ten times
        // the limit at ten slices a GPU). A renamed resource (`nvidia.com/gpu.shared`,
        // `nvidia.com/mig-*`) no instance type offers without the overlays: its pods wait, and
        // its limit stays in slices.
        let counts_whole_gpus = !p.overlays_read && derived.resource_name == GPU_RESOURCE;
        let per_gpu = if counts_whole_gpus {
            1
        } else {
            derived.slices_per_gpu
        };
        limits.insert(derived.resource_name.clone(), gpus.saturating_mul(per_gpu));
    }
    limits
}

fn disruption_json(d: &Disruption) -> Value {
    let mut dj = json!({
        "consolidationPolicy": d.consolidation_policy,
        "consolidateAfter": d.consolidate_after,
    });
    if !d.budgets.is_empty() {
        dj["budgets"] = Value::Array(
            d.budgets
                .iter()
                .map(|b| {
                    let mut v = json!({"nodes": b.nodes});
                    if let Some(s) = &b.schedule {
                        v["schedule"] = json!(s);
                    }
                    if let Some(s) = &b.duration {
                        v["duration"] = json!(s);
                    }
                    v
                })
                .collect(),
        );
    }
    dj
}

/// What the NodePool's template says of its nodes beyond their labels.
pub(super) struct Template<'a> {
    pub(super) labels: &'a BTreeMap<String, String>,
    pub(super) choice: GpuChoice<'a>,
    pub(super) derived: &'a gpu::Derived,
    pub(super) limits: &'a BTreeMap<String, u32>,
}

/// The NodePool.
pub(super) fn node_pool(p: &KarpenterPool, t: &Template<'_>) -> Value {
    let provisioner = p.provisioner.as_ref();
    let mut requirements = provisioner.gpu_requirements(&t.choice);
    requirements.push(req(
        provisioner.gpu_count_label(),
        "In",
        &strings(t.choice.counts),
    ));
    requirements.push(req("karpenter.sh/capacity-type", "In", &p.capacity_types));
    requirements.push(req("kubernetes.io/os", "In", &["linux".into()]));
    let class = provisioner.node_class_api();
    // The node class the pool makes has the pool's name.
    let class_name = match provisioner.node_class(None) {
        NodeClass::Existing(n) => n,
        NodeClass::Made(_) => p.name.clone(),
    };
    let taints: Vec<Value> = t.derived.taints.iter().map(taint_json).collect();
    let mut template_spec = json!({
        "nodeClassRef": {"group": class.group(), "kind": class.kind, "name": class_name},
        "requirements": requirements,
    });
    if !taints.is_empty() {
        template_spec["taints"] = Value::Array(taints);
    }
    let mut spec = json!({
        "template": {"metadata": {"labels": t.labels}, "spec": template_spec},
    });
    if p.limit_gpus.is_some() {
        spec["limits"] = quantities(t.limits);
    }
    if let Some(d) = &p.disruption {
        spec["disruption"] = disruption_json(d);
    }
    if let Some(w) = p.weight {
        spec["weight"] = json!(w);
    }
    json!({
        "apiVersion": NODE_POOL.api_version,
        "kind": NODE_POOL.kind,
        "metadata": {"name": p.name, "labels": {MANAGED_BY: FIELD_MANAGER}},
        "spec": spec,
    })
}

/// One NodeOverlay per GPU count, scoped to the pool, with what a node of that count offers.
pub(super) fn overlays(
    p: &KarpenterPool,
    capacity: &BTreeMap<u32, BTreeMap<String, u32>>,
) -> Vec<Value> {
    let count_label = p.provisioner.gpu_count_label();
    capacity
        .iter()
        .map(|(count, resources)| {
            json!({
                "apiVersion": NODE_OVERLAY.api_version,
                "kind": NODE_OVERLAY.kind,
                "metadata": {"name": overlay_name(&p.name, *count),
                    "labels": {MANAGED_BY: FIELD_MANAGER, NODEPOOL_LABEL: p.name}},
                "spec": {
                    "requirements": [
                        req(NODEPOOL_LABEL, "In", std::slice::from_ref(&p.name)),
                        req(count_label, "In", &[count.to_string()]),
                    ],
                    "capacity": quantities(resources),
                },
            })
        })
        .collect()
}

/// The node class the pool makes, under its own name; None when it names one.
pub(super) fn node_class(p: &KarpenterPool, user_data: Option<&str>) -> Option<Value> {
    let api = p.provisioner.node_class_api();
    match p.provisioner.node_class(user_data) {
        NodeClass::Existing(_) => None,
        NodeClass::Made(spec) => Some(json!({
            "apiVersion": api.api_version,
            "kind": api.kind,
            "metadata": {"name": p.name, "labels": {MANAGED_BY: FIELD_MANAGER}},
            "spec": spec,
        })),
    }
}
