//! The plan of a node pool beyond what the schema declares: the defaults that come from the
//! provider's configuration (subscription, project, region), the zones of a target whose pools
//! have zones of their own (GKE), the node count only a pool without autoscaling has, what the
//! domain derives, and the GPU settings a cloud cannot change in place. What differs between
//! targets is asked of their descriptors (`cloud::Target`).
//!
//! A zonal pool's default zones are its cluster's, and only the cloud knows them: the plan reads
//! them (one GET of the cluster per cluster, kept by the client for the life of the provider
//! process), because the plan must tell whether `node_count` splits evenly over the zones and show
//! where the nodes go. A pool that stays in its cluster keeps the zones in its state, so only a
//! create reads. When the cluster cannot be read at plan time the plan says so in a warning and
//! leaves the zones (and a defaulted `node_count`) to the apply, which reads them again.

use crate::cloud::OpCtx;
use crate::cloud::registry;
use crate::cloud::target::block_path;
use crate::model::{Sharing, TaintArgs};
use crate::state::{ProviderState, Settings};
use tfplugin::api::PlanRequest;
use tfplugin::object::{Decoded, FromValue, ToValue, merge};
use tfplugin::plan::Planned;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::model::{Args, Derived, NodeSetup, REIMPORT, resolve};
use super::schema::TIMEOUTS;

/// What the plan knows of a pool's zones.
#[derive(Debug, PartialEq)]
enum Zones {
    /// A pool without zones of its own.
    NotZonal,
    Known(Vec<String>),
    Unknown,
}

pub(super) async fn modify(
    req: &PlanRequest<'_>,
    planned: &mut Planned,
    state: &ProviderState,
    diags: &mut Diagnostics,
) {
    let settings = &state.settings();
    fill_provider_defaults(&mut planned.state, req.config, settings);
    let zones = plan_zones(req, &mut planned.state, state, diags).await;
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
        &NodeSetup {
            node_labels: new.spec.labels.clone(),
            autoscaler_node_template: new.spec.node_template.clone(),
        },
    );
    if req.prior.is_null() {
        return;
    }
    let old = Args::from_value(req.prior)
        .or_report_state(diags, REIMPORT)
        .and_then(|a| resolve(&a, settings, &mut Diagnostics::new()));
    warn_config_renamed(req.prior, &new.derived, diags);
    if let Some(old) = old {
        let target = new.spec.location.target();
        if target.gpu_change_replaces(&old.spec, &new.spec) {
            planned
                .requires_replace
                .extend(sharing_changes(req.prior, &planned.state));
        }
        planned
            .requires_replace
            .extend(target.replacements(&old.spec, &new.spec));
        // New nodes are partitioned from the start: only a change in place repartitions.
        if planned.requires_replace.is_empty() {
            warn_mig_relabel(req.prior, &new.spec.labels, diags);
        }
        // Nothing the cloud holds changes: keep the prior status rather than "known after apply".
        if old.spec == new.spec
            && let Some(slot) = planned.state.get_mut("status")
        {
            *slot = req.prior.get("status").clone();
        }
    }
}

/// A pool whose nodes are to carry another device plugin config name (a sharing mode of another
/// kind, or a pool made while config names said the settings moving to its own name): the cloud
/// relabels the nodes before `fracgpu_device_plugin_config` writes the new config in the same
/// apply, and in between NVIDIA's config-manager finds no such config.
fn warn_config_renamed(prior: &Value, new: &gpu::Derived, diags: &mut Diagnostics) {
    if prior.is_null() {
        return;
    }
    let before = prior.get("device_plugin_config_name").as_str();
    let Some(after) = new.device_plugin_config.as_ref().map(|c| c.name.as_str()) else {
        return;
    };
    if before == Some(after) {
        return;
    }
    let before = before.map_or("none".to_string(), |b| format!("{b:?}"));
    diags.push(
        Diagnostic::warning(
            "The pool's nodes move to another device plugin config",
            format!(
                "Its nodes' nvidia.com/device-plugin.config goes from {before} to {after:?}. \
                 The cloud relabels them first; until fracgpu_device_plugin_config holds a config \
                 named {after:?} (it writes it after this pool in the same apply), NVIDIA's \
                 config-manager finds no such config and the nodes serve no GPU. To move without \
                 that gap, first add `config {{ name = {after:?} yaml = ... }}` to \
                 fracgpu_device_plugin_config and apply, then apply this change. Once a pool's \
                 config has its own name ({after:?}), changing its time-slicing or MPS settings \
                 keeps the name."
            ),
        )
        .at(AttrPath::attr("device_plugin_config_name")),
    );
}

/// A pool whose nodes are to carry another `nvidia.com/mig.config` in place (EKS, where the label
/// is what partitions): the GPU operator's MIG manager repartitions each node when the label
/// changes, and fails on a node whose GPUs pods use (mig-parted cannot reset a GPU in use); it
/// tries again only when the label changes again.
fn warn_mig_relabel(
    prior: &Value,
    labels: &std::collections::BTreeMap<String, String>,
    diags: &mut Diagnostics,
) {
    let before = prior
        .get("node_labels")
        .entries()
        .and_then(|m| m.get(gpu::MIG_CONFIG_LABEL))
        .and_then(Value::as_str);
    let (Some(before), Some(after)) = (before, labels.get(gpu::MIG_CONFIG_LABEL)) else {
        return;
    };
    if before == after {
        return;
    }
    diags.push(
        Diagnostic::warning(
            "The pool's nodes are repartitioned in place",
            format!(
                "Their nvidia.com/mig.config goes from {before:?} to {after:?}: the GPU \
                 operator's MIG manager repartitions each node, and refuses on a node whose GPUs \
                 pods are using (the node then reads nvidia.com/mig.config.state=failed and keeps \
                 its partitions until the label changes again). Drain the nodes first, or change \
                 the geometry with the fracgpu_mig_reconfigure action, which drains them node by \
                 node."
            ),
        )
        .at(AttrPath::attr("mig")),
    );
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
        Zones::NotZonal if had => return,
        Zones::NotZonal => Value::int(1),
        Zones::Known(z) => {
            let zones_of = |v: &Value| {
                let (t, b) = registry::target_block(v)?;
                Some(b.get(t.zones_attr()?).clone())
            };
            let same_zones = zones_of(req.prior) == zones_of(v);
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

/// A zonal pool's zones: the configuration's, the state's while the pool stays in its cluster,
/// else the cluster's, read from the cloud (see the module docs).
async fn plan_zones(
    req: &PlanRequest<'_>,
    v: &mut Value,
    state: &ProviderState,
    diags: &mut Diagnostics,
) -> Zones {
    let Some((target, block)) = registry::target_block(v) else {
        return Zones::NotZonal;
    };
    let Some(attr) = target.zones_attr() else {
        return Zones::NotZonal;
    };
    let strings = |l: &Value| -> Vec<String> {
        l.elements()
            .iter()
            .filter_map(|z| z.as_str().map(str::to_string))
            .collect()
    };
    let configured = registry::target_block(req.config).map(|(_, b)| b.get(attr).clone());
    if let Some(c) = configured.filter(|c| !c.is_null()) {
        return if c.is_fully_known() {
            Zones::Known(strings(&c))
        } else {
            Zones::Unknown
        };
    }
    // The cluster a block names: its scope, coordinates and name, as written.
    let cluster_of = |b: &Value| -> Vec<Option<String>> {
        std::iter::once(target.scope().attr)
            .chain(target.coordinates().iter().map(|c| c.attr))
            .chain([target.cluster_attr()])
            .map(|k| b.get(k).as_str().map(str::to_string))
            .collect()
    };
    let here = cluster_of(block);
    if let Some((_, prior)) = registry::target_block(req.prior)
        && cluster_of(prior) == here
        && prior.get(attr).is_fully_known()
        && !prior.get(attr).is_null()
    {
        let zones = prior.get(attr).clone();
        set_zones(v, attr, zones.clone());
        return Zones::Known(strings(&zones));
    }
    let Some(mut parts) = here.into_iter().collect::<Option<Vec<String>>>() else {
        set_zones(v, attr, Value::UNKNOWN);
        return Zones::Unknown;
    };
    let cluster = parts.pop().unwrap_or_default();
    let scope = parts.remove(0);
    let loc = target.locate(scope, parts, cluster);
    let ctx = OpCtx::new(TIMEOUTS.of(v, "read"), state.stop.clone());
    let read = match state.node_pools(target.cloud()).await {
        Ok(client) => client.default_zones(&loc, &ctx).await,
        Err(e) => Err(e),
    };
    match read {
        Ok(Some(zones)) => {
            set_zones(v, attr, zones.to_value());
            Zones::Known(zones)
        }
        Ok(None) => {
            set_zones(v, attr, Value::UNKNOWN);
            Zones::Unknown
        }
        Err(e) => {
            let block = target.cloud().as_str();
            diags.push(
                Diagnostic::warning(
                    format!("{} cluster zones unknown at plan time", target.title()),
                    format!(
                        "Could not read the zones of {} to plan {block}.{attr}: {e}. They are read \
                            again at apply; until then the plan cannot tell whether node_count \
                            splits evenly over them. Set {block}.{attr} to plan without reading \
                            the cluster.",
                        loc.describe()
                    ),
                )
                .at(block_path(target, attr)),
            );
            set_zones(v, attr, Value::UNKNOWN);
            Zones::Unknown
        }
    }
}

fn set_zones(v: &mut Value, attr: &str, zones: Value) {
    let Some((target, _)) = registry::target_block(v) else {
        return;
    };
    if let Some(Value::List(items)) = v.get_mut(target.cloud().as_str())
        && let Some(b) = items.first_mut()
    {
        set(b, attr, zones);
    }
}

/// Defaults the schema cannot declare: they come from the provider's configuration (and its
/// environment), or depend on another argument. A default applies whenever the configuration
/// leaves the attribute null, so drift away from it is repaired.
fn fill_provider_defaults(v: &mut Value, config: &Value, settings: &Settings) {
    // A cloud that taints its GPU nodes itself (GKE, see gpu::GKE_GPU_TAINT): there the default
    // is its own taint, not the schema's, which a node could not carry beside it.
    if config.get("taints").is_null()
        && let Some(own) = registry::target_block(v).and_then(|(t, _)| t.own_gpu_taint())
    {
        set(
            v,
            "taints",
            vec![TaintArgs::of(&own.key, &own.value, own.effect.as_str())].to_value(),
        );
    }
    for (target, scope) in registry::scopes() {
        let (block, k) = (target.cloud().as_str(), scope.attr);
        let default = settings.cloud.default_scope(target.cloud());
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

/// The sharing blocks that changed, as plan paths: where the target cannot change the GPU
/// settings they map to in place, they replace the pool.
fn sharing_changes(prior: &Value, planned: &Value) -> Vec<AttrPath> {
    Sharing::attribute_names()
        .into_iter()
        .filter(|b| prior.get(b) != planned.get(b))
        .map(AttrPath::attr)
        .collect()
}

/// The target's warnings on a configuration (EKS's retired AMI type).
pub(super) fn warn_on_target(config: &Value, diags: &mut Diagnostics) {
    if let Some((target, block)) = registry::target_block(config) {
        diags.0.extend(target.warnings(block));
    }
}

#[cfg(test)]
pub(super) fn fill_for_test(v: &mut Value, config: &Value, settings: &Settings) {
    fill_provider_defaults(v, config, settings);
    let req = PlanRequest {
        prior: &Value::Null,
        config,
    };
    fill_node_count(v, &req, &Zones::NotZonal);
}
