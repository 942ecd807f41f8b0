//! The plan of a node pool beyond what the schema declares: the defaults that come from the
//! provider's configuration (subscription, project, region), a GKE pool's zones, the node count
//! only a pool without autoscaling has, what the domain derives, and the GPU settings a cloud cannot
//! change in place.
//!
//! A GKE pool's default zones are its cluster's, and only GKE knows them: the plan reads them (one
//! GET of the cluster per cluster, kept by the GKE client for the life of the provider process),
//! because the plan must tell whether `node_count` splits evenly over the zones and show where the
//! nodes go. A pool that stays in its cluster keeps the zones in its state, so only a create reads.
//! When the cluster cannot be read at plan time the plan says so in a warning and leaves
//! `node_locations` (and a defaulted `node_count`) to the apply, which reads them again.

use crate::cloud::{Location, OpCtx, aks};
use crate::model::{Sharing, TaintArgs};
use crate::provider::{ProviderState, Settings};
use gpu::Cloud;
use tfplugin::api::PlanRequest;
use tfplugin::object::{Decoded, FromValue, ToValue, merge};
use tfplugin::plan::Planned;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::model::{Args, Derived, NodeLabels, resolve};
use super::schema::{DEFAULT_EKS_AMI, RETIRED_EKS_AMI, TIMEOUTS};

/// What the plan knows of a pool's zones.
#[derive(Debug, PartialEq)]
enum Zones {
    /// Not a GKE pool.
    NotGke,
    Known(Vec<String>),
    Unknown,
}

pub async fn modify(
    req: &PlanRequest<'_>,
    planned: &mut Planned,
    state: &ProviderState,
    diags: &mut Diagnostics,
) {
    let settings = &state.settings();
    fill_provider_defaults(&mut planned.state, req.config, settings);
    let zones = plan_gke_zones(req, &mut planned.state, state, diags).await;
    fill_node_count(&mut planned.state, req, &zones);
    let Some(new) = Args::from_value(&planned.state)
        .or_report_mismatch(diags)
        .and_then(|a| resolve(&a, settings, diags))
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
    let old = Args::from_value(req.prior)
        .or_report_state(diags, super::REIMPORT)
        .and_then(|a| resolve(&a, settings, &mut Diagnostics::new()));
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

/// The node count of a pool without autoscaling whose configuration names none: what it had, or
/// one node, or on GKE one in each zone (again whenever the zones change).
fn fill_node_count(v: &mut Value, req: &PlanRequest<'_>, zones: &Zones) {
    if !req.config.get("node_count").is_null() {
        return;
    }
    if !v.get("autoscaling").elements().is_empty() {
        set(v, "node_count", Value::Null);
        return;
    }
    let had = v.get("node_count").is_known() && !v.get("node_count").is_null();
    let default = match zones {
        Zones::NotGke if had => return,
        Zones::NotGke => Value::int(1),
        Zones::Known(z) => {
            let same_zones = gke_block(req.prior).map(|b| b.get("node_locations"))
                == gke_block(v).map(|b| b.get("node_locations"));
            if had && same_zones {
                return;
            }
            Value::int(z.len() as i64)
        }
        Zones::Unknown if had => return,
        Zones::Unknown => Value::UNKNOWN,
    };
    set(v, "node_count", default);
}

fn gke_block(v: &Value) -> Option<&Value> {
    v.get("gke").elements().first()
}

/// A GKE pool's zones: the configuration's, the state's while the pool stays in its cluster, else
/// the cluster's, read from GKE (see the module docs).
async fn plan_gke_zones(
    req: &PlanRequest<'_>,
    v: &mut Value,
    state: &ProviderState,
    diags: &mut Diagnostics,
) -> Zones {
    let Some(block) = gke_block(v) else {
        return Zones::NotGke;
    };
    let strings = |l: &Value| -> Vec<String> {
        l.elements()
            .iter()
            .filter_map(|z| z.as_str().map(str::to_string))
            .collect()
    };
    let configured = gke_block(req.config).map(|b| b.get("node_locations").clone());
    if let Some(c) = configured.filter(|c| !c.is_null()) {
        return if c.is_fully_known() {
            Zones::Known(strings(&c))
        } else {
            Zones::Unknown
        };
    }
    let cluster_of = |b: &Value| {
        ["project", "location", "cluster"].map(|k| b.get(k).as_str().map(str::to_string))
    };
    let here = cluster_of(block);
    if let Some(prior) = gke_block(req.prior)
        && cluster_of(prior) == here
        && prior.get("node_locations").is_fully_known()
        && !prior.get("node_locations").is_null()
    {
        let zones = prior.get("node_locations").clone();
        set_node_locations(v, zones.clone());
        return Zones::Known(strings(&zones));
    }
    let [Some(project), Some(location), Some(cluster)] = here else {
        set_node_locations(v, Value::UNKNOWN);
        return Zones::Unknown;
    };
    let loc = Location::Gke {
        project,
        location,
        cluster,
    };
    let ctx = OpCtx::new(TIMEOUTS.of(v, "read"), state.stop.clone());
    let read = match state.node_pools("gke").await {
        Ok(client) => client.default_zones(&loc, &ctx).await,
        Err(e) => Err(e),
    };
    match read {
        Ok(Some(zones)) => {
            set_node_locations(v, zones.to_value());
            Zones::Known(zones)
        }
        Ok(None) => {
            set_node_locations(v, Value::UNKNOWN);
            Zones::Unknown
        }
        Err(e) => {
            diags.push(
                Diagnostic::warning(
                    "GKE cluster zones unknown at plan time",
                    format!(
                        "Could not read the zones of GKE cluster {} to plan gke.node_locations: {e}. They are read again at apply; until then the plan cannot tell whether node_count splits evenly over them. Set gke.node_locations to plan without reading the cluster.",
                        loc.pool_id("").trim_end_matches("/nodePools/")
                    ),
                )
                .at(AttrPath::attr("gke").with_index(0).with_attr("node_locations")),
            );
            set_node_locations(v, Value::UNKNOWN);
            Zones::Unknown
        }
    }
}

fn set_node_locations(v: &mut Value, zones: Value) {
    if let Some(Value::List(items)) = v.get_mut("gke")
        && let Some(b) = items.first_mut()
    {
        set(b, "node_locations", zones);
    }
}

/// Defaults the schema cannot declare: they come from the provider's configuration (and its
/// environment), or depend on another argument. A default applies whenever the configuration
/// leaves the attribute null, so drift away from it is repaired.
fn fill_provider_defaults(v: &mut Value, config: &Value, settings: &Settings) {
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
    let req = PlanRequest {
        prior: &Value::Null,
        config,
    };
    fill_node_count(v, &req, &Zones::NotGke);
}
