//! The plan of a node pool beyond what the schema declares: the defaults that come from the
//! provider's configuration (subscription, project, region), the node count only a pool without
//! autoscaling has, what the domain derives, and the GPU settings a cloud cannot change in place.

use crate::cloud::aks;
use crate::model::Sharing;
use crate::provider::Settings;
use gpu::Cloud;
use tfplugin::api::PlanRequest;
use tfplugin::object::{FromValue, merge};
use tfplugin::plan::Planned;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::model::{Args, Derived, NodeLabels, resolve};
use super::schema::{DEFAULT_EKS_AMI, RETIRED_EKS_AMI};

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
        if new.cloud == Cloud::Aks
            && !aks::os_sku_changes_in_place(old.spec.os_sku.as_deref(), new.spec.os_sku.as_deref())
        {
            planned
                .requires_replace
                .push(AttrPath::attr("aks").with_index(0).with_attr("os_sku"));
        }
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

/// A warning on an AMI type EKS no longer publishes for current Kubernetes versions: Amazon Linux 2
/// reached end of support on 2025-11-26, and EKS has no AL2 AMIs for Kubernetes 1.33 and later
/// (awslabs/amazon-eks-ami), so a create on such a cluster fails. Older clusters still take it.
pub fn warn_retired_ami(config: &Value, diags: &mut Diagnostics) {
    let Some(eks) = config.get("eks").elements().first() else {
        return;
    };
    if eks.get("ami_type").as_str() != Some(RETIRED_EKS_AMI) {
        return;
    }
    diags.push(
        Diagnostic::warning(
            "Amazon Linux 2 GPU AMI is retired",
            format!(
                "{RETIRED_EKS_AMI} reached end of support on 2025-11-26 and EKS publishes no AL2 AMIs for Kubernetes 1.33 and later: creating this node group on such a cluster fails. Use ami_type = \"{DEFAULT_EKS_AMI}\" (the default), whose AMIs carry the NVIDIA driver; changing the AMI type replaces the node group."
            ),
        )
        .at(AttrPath::attr("eks").with_index(0).with_attr("ami_type")),
    );
}

#[cfg(test)]
pub(super) fn fill_for_test(v: &mut Value, config: &Value, settings: &Settings) {
    fill_provider_defaults(v, config, settings);
}
