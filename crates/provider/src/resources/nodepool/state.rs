//! From a pool as the cloud reports it back to the state of `fracgpu_nodepool`
//! ([`state_from_pool`]), with what the cloud does not record taken from the prior state or plan;
//! and the state of a pool that was made but could not be read back ([`unread_pool`]).

use std::collections::BTreeMap;

use crate::cloud::registry::TargetBlock;
use crate::cloud::{self, Pool, PoolTaint, Scaling, Target};
use crate::model::{Sharing, TaintArgs, domain_diagnostic};
use crate::state::Settings;
use gpu::{DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, SHARING_LABEL};
use tfplugin::object::{Decoded, FromValue, Known, SingleBlock, merge};
use tfplugin::{Diagnostics, Value};

use super::model::{Args, AutoscalingArgs, Derived, Identity, NodeSetup, Reported, resolve};
use super::schema::schema;

/// The state value for a pool as the cloud reports it. `prior` (state or plan, null on import)
/// supplies what the cloud does not record: the spelling the user chose, GPU overrides, the
/// sharing the labels came from, timeouts.
pub(super) fn state_from_pool(
    pool: &Pool,
    prior: &Value,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Value> {
    // Null on import.
    let before = Option::<Args>::from_value(prior).or_report(diags).flatten();
    let spec = &pool.spec;
    let target = spec.location.target();
    let cloud = target.cloud();
    let (gpu_model, gpu_count) = gpu_overrides(target, spec, before.as_ref());
    // Sharing is read back from what the cloud holds, so a changed label shows as drift.
    let hardware =
        match gpu::resolve_hardware(cloud, &spec.machine_type, gpu_model.as_deref(), gpu_count) {
            Ok(h) => h,
            Err(errors) => {
                for e in &errors {
                    diags.push(domain_diagnostic(e, &[]));
                }
                return None;
            }
        };
    let observed = target.observed(spec, hardware.gpu);
    let prior_mode = before.as_ref().map(|a| a.sharing.mode());
    let mode = gpu::sharing_from_observed(&observed, prior_mode.as_ref());
    // The user's own labels: everything but what sharing sets; none stays null as written.
    let user = user_labels(&spec.labels);
    let labels_written = before.as_ref().is_some_and(|a| a.labels.is_some());
    let machine_type = before
        .as_ref()
        .map(|a| a.machine_type.clone())
        .filter(|m| m.eq_ignore_ascii_case(&spec.machine_type))
        .unwrap_or_else(|| spec.machine_type.clone());
    let (fixed, autoscaling) = reported_scaling(target, spec.scaling, before.as_ref());
    let args = Args {
        name: spec.name.clone(),
        machine_type,
        gpu_model,
        gpu_count,
        node_count: Known(fixed),
        spot: Known(Some(spec.spot)),
        disk_size_gb: Known(spec.disk_size_gb),
        labels: (!user.is_empty() || labels_written).then_some(user),
        taints: Some(reported_taints(target, &spec.taints, before.as_ref())),
        autoscaling: SingleBlock(autoscaling),
        sharing: Sharing::of(&mode),
        target: TargetBlock(Some((target, target.block_of(pool)))),
        // The name the nodes carry now: one a pool made before configs were named after their
        // pool is kept while its settings hold.
        device_plugin_config_name: Known(spec.labels.get(DEVICE_PLUGIN_CONFIG_LABEL).cloned()),
    };
    // Derived facts follow from the state as read, when it is a valid pool; else they stay as
    // they were.
    let derived =
        resolve(&args, settings, &mut Diagnostics::new()).map(|r| Derived::of(&r.derived));
    let mut v = if prior.is_null() {
        Value::null_object(&schema().ty())
    } else {
        prior.clone()
    };
    merge(
        &mut v,
        &Reported {
            timeouts: prior.get("timeouts").clone(),
            identity: Identity {
                id: pool.id.clone(),
                status: pool.status.clone(),
            },
            labels: NodeSetup {
                node_labels: spec.labels.clone(),
                autoscaler_node_template: spec.node_template.clone(),
            },
            args,
        },
    );
    if let Some(d) = derived {
        merge(&mut v, &d);
    }
    Some(v)
}

/// The GPU model and count a pool's state names beyond its machine type: the prior value's
/// (None on import). A machine type that names no GPU of its own (GKE's N1 with attached T4s,
/// V100s, P4s): with no override written (an import, a list), the pool is read through the
/// accelerator the cloud reports, and the state names it as the user writes it for such a
/// machine.
fn gpu_overrides(
    target: &dyn Target,
    spec: &cloud::PoolSpec,
    before: Option<&Args>,
) -> (Option<String>, Option<u32>) {
    let gpu_model = before.and_then(|a| a.gpu_model.clone());
    let gpu_count = before.and_then(|a| a.gpu_count);
    if gpu_model.is_none()
        && let Some(accelerator) = target.reported_gpu_model(spec)
        && gpu::resolve_hardware(target.cloud(), &spec.machine_type, None, gpu_count).is_err()
    {
        return (Some(accelerator), gpu_count.or(Some(spec.gpu_count)));
    }
    (gpu_model, gpu_count)
}

/// The labels of a pool that are the user's: all but those sharing sets.
fn user_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| {
            ![DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, SHARING_LABEL].contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The pool's size as the state records it: `node_count`, or the `autoscaling` block. Where the
/// cloud stores a scaling in another form that means the same (EKS), the state keeps the form
/// it was written in.
fn reported_scaling(
    target: &dyn Target,
    read: Scaling,
    before: Option<&Args>,
) -> (Option<u32>, Option<AutoscalingArgs>) {
    let written = before
        .and_then(|a| a.autoscaling.as_ref())
        .map(|a| Scaling::Auto {
            min: a.min_nodes,
            max: a.max_nodes,
        });
    let scaling = match written {
        Some(w) => target.recorded_scaling(w, read),
        None => read,
    };
    match scaling {
        Scaling::Fixed { nodes } => (Some(nodes), None),
        Scaling::Auto { min, max } => (
            None,
            Some(AutoscalingArgs {
                min_nodes: min,
                max_nodes: max,
            }),
        ),
    }
}

/// The taints to record for a pool. A taint the cloud puts on every GPU node itself (GKE's) is
/// never asked of it, so a read cannot tell whether the pool lists it: it does when the prior
/// value did, or when there is none (an import, whose configuration most likely leaves `taints`
/// to its default).
fn reported_taints(
    target: &dyn Target,
    read: &[PoolTaint],
    before: Option<&Args>,
) -> Vec<TaintArgs> {
    let mut out: Vec<TaintArgs> = read
        .iter()
        .map(|t| TaintArgs::of(&t.key, &t.value, &t.effect))
        .collect();
    let Some(own) = target.own_gpu_taint() else {
        return out;
    };
    let listed = |a: &Args| {
        a.taints
            .as_ref()
            .is_some_and(|t| t.iter().any(|t| t.taint().as_ref() == Some(&own)))
    };
    let own_args = TaintArgs::of(&own.key, &own.value, own.effect.as_str());
    if before.is_none_or(listed) && !out.contains(&own_args) {
        out.push(own_args);
    }
    out
}

/// The state of a pool whose create may have reached the cloud but that could not be read back:
/// the plan with its ID, and nothing unknown (terraform keeps unknowns out of state).
pub(super) fn unread_pool(planned: &Value, spec: &cloud::PoolSpec) -> Value {
    let mut v = planned.unknowns_as_null();
    merge(
        &mut v,
        &Identity {
            id: spec.location.pool_id(&spec.name),
            status: "Unknown".into(),
        },
    );
    v
}
