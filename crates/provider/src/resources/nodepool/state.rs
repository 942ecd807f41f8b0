//! From a pool as the cloud reports it back to the state of `fracgpu_nodepool`
//! ([`state_from_pool`]), with what the cloud does not record taken from the prior state or plan;
//! and the state of a pool that was made but could not be read back ([`unread_pool`]).

use std::collections::BTreeMap;

use crate::cloud::{self, Location, Pool, PoolTaint, Scaling};
use crate::model::{Sharing, TaintArgs, domain_diagnostic};
use crate::provider::Settings;
use gpu::{Cloud, DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL};
use tfplugin::object::{Decoded, FromValue, Known, SingleBlock, merge};
use tfplugin::{Diagnostics, Value};

use super::model::{
    AksArgs, Args, AutoscalingArgs, Derived, EksArgs, GkeArgs, Identity, NodeLabels, RENAME,
    Reported, cloud_of, resolve,
};
use super::schema::schema;

/// The state value for a pool as the cloud reports it. `prior` (state or plan, null on import)
/// supplies what the cloud does not record: the spelling the user chose, GPU overrides, the
/// sharing the labels came from, timeouts.
pub fn state_from_pool(
    pool: &Pool,
    prior: &Value,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Value> {
    // Null on import.
    let before = Option::<Args>::from_value(prior).or_report(diags).flatten();
    let spec = &pool.spec;
    let cloud = cloud_of(&spec.location);
    let mut gpu_model = before.as_ref().and_then(|a| a.gpu_model.clone());
    let mut gpu_count = before.as_ref().and_then(|a| a.gpu_count);
    // GKE machine types whose GPUs are attached separately (N1 with T4s, V100s, P4s) name no GPU
    // of their own: with no override written (an import, a list), the pool is read through the
    // accelerator GKE reports, and the state names it as the user writes it for such a machine.
    if gpu_model.is_none()
        && cloud == Cloud::Gke
        && let Some(accelerator) = &spec.gpu.gke_accelerator_type
        && gpu::resolve_hardware(cloud, &spec.machine_type, None, gpu_count).is_err()
    {
        gpu_model = Some(accelerator.clone());
        gpu_count = gpu_count.or(Some(spec.gpu.count));
    }
    // Sharing is read back from what the cloud holds, so a changed label shows as drift.
    let hardware =
        match gpu::resolve_hardware(cloud, &spec.machine_type, gpu_model.as_deref(), gpu_count) {
            Ok(h) => h,
            Err(errors) => {
                for e in &errors {
                    diags.push(domain_diagnostic(e, RENAME));
                }
                return None;
            }
        };
    let observed = gpu::Observed {
        cloud,
        gpu: hardware.gpu,
        labels: &spec.labels,
        aks_gpu_instance_profile: spec.gpu.aks_gpu_instance_profile.as_deref(),
        gke_partition_size: spec.gpu.gke_partition_size.as_deref(),
        gke_sharing: spec.gpu.gke_sharing.map(|s| match s {
            cloud::GkeSharing::TimeSharing { max_clients } => gpu::GkeSharing {
                strategy: gpu::GkeSharingStrategy::TimeSharing,
                max_clients,
            },
            cloud::GkeSharing::Mps { max_clients } => gpu::GkeSharing {
                strategy: gpu::GkeSharingStrategy::Mps,
                max_clients,
            },
        }),
    };
    let prior_mode = before.as_ref().map(|a| a.sharing.mode());
    let mode = gpu::sharing_from_observed(&observed, prior_mode.as_ref());
    // The user's own labels: everything but what sharing sets; none stays null as written.
    let user: BTreeMap<String, String> = spec
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != DEVICE_PLUGIN_CONFIG_LABEL && k.as_str() != MIG_CONFIG_LABEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let labels_written = before.as_ref().is_some_and(|a| a.labels.is_some());
    let machine_type = before
        .as_ref()
        .map(|a| a.machine_type.clone())
        .filter(|m| m.eq_ignore_ascii_case(&spec.machine_type))
        .unwrap_or_else(|| spec.machine_type.clone());
    // EKS has no autoscaling switch: autoscaling {n, n}, and {0, 1} while at zero, are stored as a
    // fixed count is. Such a pool keeps the form it was written in.
    let written = before
        .as_ref()
        .and_then(|a| a.autoscaling.as_ref())
        .map(|a| Scaling::Auto {
            min: a.min_nodes,
            max: a.max_nodes,
        });
    let scaling = match (&spec.location, written) {
        (Location::Eks { .. }, Some(w)) if cloud::eks::canonical_scaling(w) == spec.scaling => w,
        _ => spec.scaling,
    };
    let (fixed, autoscaling) = match scaling {
        Scaling::Fixed { nodes } => (Some(nodes), None),
        Scaling::Auto { min, max } => (
            None,
            Some(AutoscalingArgs {
                min_nodes: min,
                max_nodes: max,
            }),
        ),
    };
    let mut args = Args {
        name: spec.name.clone(),
        machine_type,
        gpu_model,
        gpu_count,
        node_count: Known(fixed),
        spot: Known(Some(spec.spot)),
        disk_size_gb: Known(spec.disk_size_gb),
        labels: (!user.is_empty() || labels_written).then_some(user),
        taints: Some(reported_taints(cloud, &spec.taints, before.as_ref())),
        autoscaling: SingleBlock(autoscaling),
        sharing: Sharing::of(&mode),
        ..Args::default()
    };
    match &spec.location {
        Location::Aks {
            subscription_id,
            resource_group,
            cluster,
        } => {
            args.aks = SingleBlock(Some(AksArgs {
                subscription_id: Some(subscription_id.clone()),
                resource_group: resource_group.clone(),
                cluster_name: cluster.clone(),
                os_sku: Known(spec.os_sku.clone()),
                gpu_driver: Known(spec.gpu.aks_gpu_driver.clone()),
            }))
        }
        Location::Gke {
            project,
            location,
            cluster,
        } => {
            args.gke = SingleBlock(Some(GkeArgs {
                project: Some(project.clone()),
                location: location.clone(),
                cluster: cluster.clone(),
                node_locations: Known(spec.gke.as_ref().map(|g| g.node_locations.clone())),
            }))
        }
        Location::Eks { region, cluster } => {
            let f = spec.eks.clone().unwrap_or_default();
            args.eks = SingleBlock(Some(EksArgs {
                region: Some(region.clone()),
                cluster_name: cluster.clone(),
                node_role_arn: f.node_role_arn,
                subnet_ids: f.subnet_ids,
                ami_type: Some(f.ami_type),
            }))
        }
    }
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
            labels: NodeLabels {
                node_labels: spec.labels.clone(),
            },
            args,
        },
    );
    if let Some(d) = derived {
        merge(&mut v, &d);
    }
    Some(v)
}

/// The taints to record for a pool. GKE's own GPU taint is on every GKE GPU node but never asked of
/// GKE, so a read cannot tell whether the pool lists it: it does when the prior value did, or when
/// there is none (an import, whose configuration most likely leaves `taints` to its default).
fn reported_taints(cloud: Cloud, read: &[PoolTaint], before: Option<&Args>) -> Vec<TaintArgs> {
    let mut out: Vec<TaintArgs> = read
        .iter()
        .map(|t| TaintArgs::of(&t.key, &t.value, &t.effect))
        .collect();
    let gke_taint = || {
        let g = &gpu::GKE_GPU_TAINT;
        TaintArgs::of(&g.key, &g.value, g.effect.as_str())
    };
    let listed = |a: &Args| {
        a.taints.as_ref().is_some_and(|t| {
            t.iter()
                .any(|t| t.taint().as_ref() == Some(&gpu::GKE_GPU_TAINT))
        })
    };
    if cloud == Cloud::Gke && before.is_none_or(listed) && !out.contains(&gke_taint()) {
        out.push(gke_taint());
    }
    out
}

/// The state of a pool whose create may have reached the cloud but that could not be read back:
/// the plan with its ID, and nothing unknown (terraform keeps unknowns out of state).
pub fn unread_pool(planned: &Value, spec: &cloud::PoolSpec) -> Value {
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
