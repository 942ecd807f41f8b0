//! The plan of a node pool beyond what the schema declares: the defaults that come from the
//! provider's configuration (subscription, project, region), the node count only a pool without
//! autoscaling has, what the domain derives, and the GPU settings a cloud cannot change in place.

use crate::model::{Sharing, TaintArgs};
use crate::provider::Settings;
use gpu::Cloud;
use tfplugin::api::PlanRequest;
use tfplugin::object::{FromValue, ToValue, merge};
use tfplugin::plan::Planned;
use tfplugin::{AttrPath, Diagnostics, Value};

use super::model::{Args, Derived, NodeLabels, resolve};

pub fn modify(
    req: &PlanRequest<'_>,
    planned: &mut Planned,
    settings: &Settings,
    diags: &mut Diagnostics,
) {
    fill_provider_defaults(&mut planned.state, req.config, settings);
    let Some(new) = Args::from_value(&planned.state).and_then(|a| resolve(&a, settings, diags))
    else {
        return;
    };
    merge(&mut planned.state, &Derived::of(&new.derived));
    merge(
        &mut planned.state,
        &NodeLabels {
            node_labels: new.spec.labels.clone(),
        },
    );
    if req.prior.is_null() {
        return;
    }
    let old =
        Args::from_value(req.prior).and_then(|a| resolve(&a, settings, &mut Diagnostics::new()));
    if let Some(old) = old {
        planned.requires_replace.extend(gpu_replacement(
            new.cloud,
            &old.spec,
            &new.spec,
            req.prior,
            &planned.state,
        ));
        // Nothing the cloud holds changes: keep the prior status rather than "known after apply".
        if old.spec == new.spec
            && let Some(slot) = planned.state.get_mut("status")
        {
            *slot = req.prior.get("status").clone();
        }
    }
}

fn set(v: &mut Value, k: &str, new: Value) {
    if let Some(slot) = v.get_mut(k) {
        *slot = new;
    }
}

/// Defaults the schema cannot declare: they come from the provider's configuration (and its
/// environment), or depend on another argument. A default applies whenever the configuration
/// leaves the attribute null, so drift away from it is repaired.
fn fill_provider_defaults(v: &mut Value, config: &Value, settings: &Settings) {
    if config.get("node_count").is_null() {
        let fixed = v.get("autoscaling").elements().is_empty();
        let keep = v.get("node_count").is_known() && !v.get("node_count").is_null();
        if !fixed {
            set(v, "node_count", Value::Null);
        } else if !keep {
            set(v, "node_count", Value::int(1));
        }
    }
    // GKE taints its GPU nodes itself: there the default is GKE's own taint (see gpu::GKE_GPU_TAINT),
    // not the schema's, which a node could not carry beside GKE's.
    if config.get("taints").is_null() && !v.get("gke").elements().is_empty() {
        let g = &gpu::GKE_GPU_TAINT;
        set(
            v,
            "taints",
            vec![TaintArgs::of(&g.key, &g.value, g.effect.as_str())].to_value(),
        );
    }
    let cloud = &settings.cloud;
    for (block, k, default) in [
        (
            "aks",
            "subscription_id",
            cloud.azure.subscription_id.clone(),
        ),
        ("gke", "project", cloud.google.project.clone()),
        ("eks", "region", cloud.aws.region.clone()),
    ] {
        let unset = config
            .get(block)
            .elements()
            .first()
            .is_none_or(|b| b.get(k).is_null());
        if let Some(Value::List(items)) = v.get_mut(block)
            && let Some(b) = items.first_mut()
            && unset
        {
            set(b, k, Value::opt_string(default));
        }
    }
}

/// Per-cloud GPU settings that no cloud changes in place, as plan paths.
fn gpu_replacement(
    cloud: Cloud,
    old: &crate::cloud::PoolSpec,
    new: &crate::cloud::PoolSpec,
    prior: &Value,
    planned: &Value,
) -> Vec<AttrPath> {
    let immutable_changed = match cloud {
        Cloud::Aks => old.gpu.aks_gpu_instance_profile != new.gpu.aks_gpu_instance_profile,
        Cloud::Gke => old.gpu != new.gpu,
        // EKS expresses sharing with node labels only; all of it changes in place.
        Cloud::Eks => false,
    };
    if !immutable_changed {
        return Vec::new();
    }
    Sharing::attribute_names()
        .into_iter()
        .filter(|b| prior.get(b) != planned.get(b))
        .map(AttrPath::attr)
        .collect()
}

#[cfg(test)]
pub(super) fn fill_for_test(v: &mut Value, config: &Value, settings: &Settings) {
    fill_provider_defaults(v, config, settings);
}
