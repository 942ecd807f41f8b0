//! NodePools in the provider's neutral terms and back. What GKE fills in on its own (driver
//! installation config, the default disk size, management defaults, its own labels and GPU taint)
//! is dropped on read, and [`canonical_spec`] folds a user's spec the same way before comparing.
//!
//! Counts: GKE's `initialNodeCount`, setSize's `nodeCount` and autoscaling's
//! `minNodeCount`/`maxNodeCount` are per zone of the pool ("In regional or multi-zonal clusters,
//! this is the number of nodes per zone", the google provider's initial_node_count), while the
//! provider's counts are the pool's totals, as gcloud's `--total-min-nodes`/`--total-max-nodes`.
//! So a fixed total is split evenly over the pool's zones ([`per_zone`]), autoscaling is sent as
//! GKE's total limits, and a read multiplies per-zone figures back by the zones.

use std::collections::{BTreeMap, HashMap};

use google_cloud_container_v1::model::{
    self as m, AcceleratorConfig, GPUDriverInstallationConfig, GPUSharingConfig, NodeConfig,
    NodeManagement, NodePool, NodePoolAutoscaling, NodeTaint,
};

use crate::cloud::error::CloudError;
use crate::cloud::pool::{
    GkePoolFields, GkeSharing, Location, PoolSpec, PoolTaint, Scaling, TargetFields,
};

/// GKE's boot disk size when `diskSizeGb` is not set.
const GKE_DEFAULT_DISK_GB: u32 = 100;
/// Label prefixes only GKE may set; they are GKE's, not the user's, when they show up on a read.
const GKE_LABEL_PREFIXES: &[&str] = &["cloud.google.com/", "node.kubernetes.io/"];

pub(super) fn gke_location(loc: &Location) -> Result<(&str, &str, &str), CloudError> {
    match loc {
        Location::Gke {
            project,
            location,
            cluster,
        } => Ok((project, location, cluster)),
        other => Err(CloudError::Api {
            status: 400,
            code: "INVALID_ARGUMENT".into(),
            message: format!(
                "the GKE client was handed a {} location; this is a provider bug",
                other.cloud()
            ),
        }),
    }
}

pub(super) fn cluster_path(loc: &Location) -> Result<String, CloudError> {
    let (p, l, c) = gke_location(loc)?;
    Ok(format!("projects/{p}/locations/{l}/clusters/{c}"))
}

/// The pool's ID, also its API name: `projects/P/locations/L/clusters/C/nodePools/N`.
pub(crate) fn pool_id(loc: &Location, name: &str) -> Result<String, CloudError> {
    Ok(format!("{}/nodePools/{name}", cluster_path(loc)?))
}

/// A spec as a read of the pool would report it: GKE's default disk size is None, GKE's own GPU
/// taint and labels are not the user's, the zones are sorted. Compare `canonical_spec(desired)`
/// (with its zones known) with `get`'s spec.
pub fn canonical_spec(spec: &PoolSpec) -> PoolSpec {
    let mut s = spec.clone();
    s.gke_mut().node_locations = zones_of(spec);
    if s.disk_size_gb == Some(GKE_DEFAULT_DISK_GB) {
        s.disk_size_gb = None;
    }
    s.taints
        .retain(|t| !is_gke_gpu_taint(&t.key, &t.value, &t.effect));
    s.labels.retain(|k, _| !is_gke_label(k));
    s
}

/// The taint GKE puts on every GPU node by itself (gpu::GKE_GPU_TAINT): GKE is never asked for it,
/// because the nodes could not carry it twice.
fn is_gke_gpu_taint(key: &str, value: &str, k8s_effect: &str) -> bool {
    let g = &gpu::GKE_GPU_TAINT;
    key == g.key && value == g.value && k8s_effect == g.effect.as_str()
}

fn is_gke_label(key: &str) -> bool {
    GKE_LABEL_PREFIXES.iter().any(|p| key.starts_with(p))
}

fn effect_to_gke(effect: &str) -> Result<m::node_taint::Effect, CloudError> {
    use m::node_taint::Effect;
    match effect {
        "NoSchedule" => Ok(Effect::NoSchedule),
        "PreferNoSchedule" => Ok(Effect::PreferNoSchedule),
        "NoExecute" => Ok(Effect::NoExecute),
        other => Err(CloudError::Api {
            status: 400,
            code: "INVALID_ARGUMENT".into(),
            message: format!(
                "taint effect {other:?} is not one of NoSchedule, PreferNoSchedule, NoExecute"
            ),
        }),
    }
}

fn effect_from_gke(effect: &m::node_taint::Effect) -> String {
    use m::node_taint::Effect;
    match effect {
        Effect::NoSchedule => "NoSchedule".into(),
        Effect::PreferNoSchedule => "PreferNoSchedule".into(),
        Effect::NoExecute => "NoExecute".into(),
        other => other.name().unwrap_or("EFFECT_UNSPECIFIED").to_string(),
    }
}

pub(super) fn gke_taints(taints: &[PoolTaint]) -> Result<Vec<NodeTaint>, CloudError> {
    taints
        .iter()
        .map(|t| {
            let mut nt = NodeTaint::default();
            nt.key = t.key.clone();
            nt.value = t.value.clone();
            nt.effect = effect_to_gke(&t.effect)?;
            Ok(nt)
        })
        .collect()
}

pub(super) fn gke_labels(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Autoscaling bounds are the pool's totals: GKE's total limits (mutually exclusive with the
/// per-zone ones), with GKE's default location policy.
pub(super) fn gke_autoscaling(scaling: Scaling) -> NodePoolAutoscaling {
    let mut a = NodePoolAutoscaling::default();
    if let Scaling::Auto { min, max } = scaling {
        a.enabled = true;
        a.total_min_node_count = clamp_i32(min);
        a.total_max_node_count = clamp_i32(max);
    }
    a
}

/// The pool's zones, sorted (GKE returns `locations` sorted; gcloud sends them so).
pub(super) fn zones_of(spec: &PoolSpec) -> Vec<String> {
    let mut z = spec.gke().node_locations.clone();
    z.sort();
    z.dedup();
    z
}

/// The nodes per zone of a fixed total: GKE runs the same number in every zone of a pool, so a
/// total the zones cannot split is refused (the plan refuses it first; this guards the client).
pub(super) fn per_zone(total: u32, zones: &[String], pool: &str) -> Result<u32, CloudError> {
    let n = u32::try_from(zones.len()).unwrap_or(u32::MAX).max(1);
    if !total.is_multiple_of(n) {
        return Err(CloudError::Api {
            status: 400,
            code: "INVALID_ARGUMENT".into(),
            message: format!(
                "node pool {pool}: {total} nodes cannot be split evenly over its {n} zones ({}); \
                    GKE runs the same number of nodes in every zone of a pool",
                zones.join(", ")
            ),
        });
    }
    Ok(total / n)
}

/// The per-zone `initialNodeCount` of an autoscaled pool: enough for the total minimum when the
/// total maximum allows it (GKE requires the initial size within the limits), else what fits.
fn initial_per_zone(min: u32, max: u32, zones: u32) -> u32 {
    let up = min.div_ceil(zones);
    if up.saturating_mul(zones) <= max {
        up
    } else {
        min / zones
    }
}

pub(super) fn clamp_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The NodePool a create sends; `spec`'s zones must be known (the client fills in the cluster's).
pub(super) fn node_pool_of(spec: &PoolSpec) -> Result<NodePool, CloudError> {
    let zones = zones_of(spec);
    let mut config = NodeConfig::default();
    config.machine_type = spec.machine_type.clone();
    config.disk_size_gb = spec.disk_size_gb.map_or(0, clamp_i32);
    config.labels = gke_labels(&spec.labels);
    config.taints = gke_taints(&canonical_spec(spec).taints)?;
    config.spot = spec.spot;
    if let Some(ty) = &spec.gke().accelerator_type {
        let mut a = AcceleratorConfig::default();
        a.accelerator_type = ty.clone();
        a.accelerator_count = i64::from(spec.gpu_count);
        a.gpu_partition_size = spec.gke().partition_size.clone().unwrap_or_default();
        if let Some(sharing) = spec.gke().sharing {
            let mut sc = GPUSharingConfig::default();
            let (strategy, max) = match sharing {
                GkeSharing::TimeSharing { max_clients } => (
                    m::gpu_sharing_config::GPUSharingStrategy::TimeSharing,
                    max_clients,
                ),
                GkeSharing::Mps { max_clients } => {
                    (m::gpu_sharing_config::GPUSharingStrategy::Mps, max_clients)
                }
            };
            sc.gpu_sharing_strategy = Some(strategy);
            sc.max_shared_clients_per_gpu = i64::from(max);
            a.gpu_sharing_config = Some(sc);
        }
        // Explicit, so GKE installs the driver the device plugin needs (DEFAULT is what GKE would
        // pick; a read ignores it either way).
        let mut d = GPUDriverInstallationConfig::default();
        d.gpu_driver_version = Some(m::gpu_driver_installation_config::GPUDriverVersion::Default);
        a.gpu_driver_installation_config = Some(d);
        config.accelerators = vec![a];
    }
    let mut np = NodePool::default();
    np.name = spec.name.clone();
    np.config = Some(config);
    np.locations = zones.clone();
    match spec.scaling {
        Scaling::Fixed { nodes } => {
            np.initial_node_count = clamp_i32(per_zone(nodes, &zones, &spec.name)?)
        }
        Scaling::Auto { min, max } => {
            // GKE accepts 0 with autoscaling (scale from zero).
            let n = u32::try_from(zones.len()).unwrap_or(1).max(1);
            np.initial_node_count = clamp_i32(initial_per_zone(min, max, n));
            np.autoscaling = Some(gke_autoscaling(spec.scaling));
        }
    }
    let mut mg = NodeManagement::default();
    // GKE's defaults, and required on release-channel clusters.
    mg.auto_repair = true;
    mg.auto_upgrade = true;
    np.management = Some(mg);
    Ok(np)
}

/// A NodePool read back in neutral terms; see the module docs on what is dropped. Counts are
/// totals: per-zone figures times the pool's zones. A fixed pool's size here is what create set
/// (`initialNodeCount` in every zone); its instance groups tell the current one (`pool_of`).
pub(super) fn spec_of(location: &Location, np: &NodePool) -> PoolSpec {
    let empty = NodeConfig::default();
    let config = np.config.as_ref().unwrap_or(&empty);
    let mut zones = np.locations.clone();
    zones.sort();
    let n = zones.len().max(1) as u32;
    let count = |c: i32| (c.max(0) as u32).saturating_mul(n);
    let scaling = match &np.autoscaling {
        Some(a) if a.enabled => {
            if a.min_node_count == 0 && a.max_node_count == 0 {
                Scaling::Auto {
                    min: a.total_min_node_count.max(0) as u32,
                    max: a.total_max_node_count.max(0) as u32,
                }
            } else {
                Scaling::Auto {
                    min: count(a.min_node_count),
                    max: count(a.max_node_count),
                }
            }
        }
        _ => Scaling::Fixed {
            nodes: count(np.initial_node_count),
        },
    };
    let disk = u32::try_from(config.disk_size_gb)
        .ok()
        .filter(|d| *d != 0 && *d != GKE_DEFAULT_DISK_GB);
    let labels = config
        .labels
        .iter()
        .filter(|(k, _)| !is_gke_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let taints = config
        .taints
        .iter()
        .map(|t| PoolTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect_from_gke(&t.effect),
        })
        .filter(|t| !is_gke_gpu_taint(&t.key, &t.value, &t.effect))
        .collect();
    let accelerator = config.accelerators.first();
    let gpu_count = accelerator.map_or(0, |a| u32::try_from(a.accelerator_count).unwrap_or(0));
    let fields = accelerator
        .map(|a| GkePoolFields {
            accelerator_type: Some(a.accelerator_type.clone()).filter(|t| !t.is_empty()),
            partition_size: Some(a.gpu_partition_size.clone()).filter(|p| !p.is_empty()),
            sharing: a.gpu_sharing_config.as_ref().and_then(|sc| {
                use m::gpu_sharing_config::GPUSharingStrategy as S;
                let max_clients = u32::try_from(sc.max_shared_clients_per_gpu).unwrap_or(0);
                match sc.gpu_sharing_strategy {
                    Some(S::TimeSharing) => Some(GkeSharing::TimeSharing { max_clients }),
                    Some(S::Mps) => Some(GkeSharing::Mps { max_clients }),
                    _ => None,
                }
            }),
            node_locations: Vec::new(),
        })
        .unwrap_or_default();
    PoolSpec {
        location: location.clone(),
        name: np.name.clone(),
        machine_type: config.machine_type.clone(),
        scaling,
        spot: config.spot,
        disk_size_gb: disk,
        labels,
        taints,
        gpu_count,
        node_template: BTreeMap::new(),
        target: TargetFields::Gke(GkePoolFields {
            node_locations: zones,
            ..fields
        }),
    }
}

/// Why a pool is in ERROR: the status message (deprecated in favour of conditions, still filled).
#[allow(deprecated)]
pub(super) fn pool_message(np: &NodePool) -> String {
    let mut parts: Vec<String> = np.conditions.iter().map(|c| c.message.clone()).collect();
    if !np.status_message.is_empty() {
        parts.insert(0, np.status_message.clone());
    }
    parts.join("; ")
}

pub(super) fn status_name(np: &NodePool) -> String {
    np.status.name().unwrap_or("STATUS_UNSPECIFIED").to_string()
}

/// Compute Engine's v1 API as GKE's instance group URLs name it.
pub(super) const COMPUTE_V1: &str = "https://www.googleapis.com/compute/v1";

/// Where to read an instance group manager. Credentials only ever go to Google's APIs or the
/// sandbox, whatever URL a response names.
pub(super) fn compute_url(sandbox: Option<&str>, url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let (host, path) = rest.split_once('/')?;
    if !(host == "googleapis.com" || host.ends_with(".googleapis.com")) {
        return None;
    }
    match sandbox {
        Some(base) => Some(format!("{base}/{path}")),
        None => Some(url.to_string()),
    }
}

/// The fields GKE can only change by replacing the pool.
pub(super) fn replacement_fields(a: &PoolSpec, b: &PoolSpec) -> Vec<&'static str> {
    let mut v = Vec::new();
    if a.machine_type != b.machine_type {
        v.push("machine_type");
    }
    if a.disk_size_gb != b.disk_size_gb {
        v.push("disk_size_gb");
    }
    if a.spot != b.spot {
        v.push("spot");
    }
    if gpu_settings(a) != gpu_settings(b) {
        v.push("gpu");
    }
    if a.name != b.name || a.location != b.location {
        v.push("name/location");
    }
    v
}

/// The GPU settings of a pool, all fixed at its creation: the count, accelerator, partitions and
/// sharing.
pub(super) fn gpu_settings(
    s: &PoolSpec,
) -> (u32, &Option<String>, &Option<String>, &Option<GkeSharing>) {
    let g = s.gke();
    (
        s.gpu_count,
        &g.accelerator_type,
        &g.partition_size,
        &g.sharing,
    )
}
