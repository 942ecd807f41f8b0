//! Node groups in the provider's neutral terms and back. What EKS fills in on its own reads as the
//! spec's defaults (diskSize 20 as None, `eks.amazonaws.com/*` labels, remoteAccess, versions,
//! tags, an autoscaled group's desiredSize), and [`canonical_spec`] folds what EKS cannot hold.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_eks::types::{
    Nodegroup, NodegroupScalingConfig, Taint, TaintEffect, UpdateLabelsPayload, UpdateTaintsPayload,
};

use crate::cloud::error::CloudError;
use crate::cloud::pool::{
    EksPoolFields, Location, Pool, PoolSpec, PoolTaint, Scaling, TargetFields,
};

/// The disk size EKS gives a Linux or Bottlerocket node group when the request has none.
pub(super) const DEFAULT_DISK_SIZE_GB: u32 = 20;
/// Node labels EKS manages itself; never part of a spec, never removed by an update.
const RESERVED_LABEL_PREFIX: &str = "eks.amazonaws.com/";

/// The import ID of a node group.
pub(crate) fn pool_id(cluster: &str, nodegroup: &str) -> String {
    format!("{cluster}:{nodegroup}")
}

/// The scaling config of a node group of `scaling`: (minSize, maxSize, desiredSize) as a create
/// sends it. maxSize must be at least 1 (the EKS API's Capacity shape; minSize and desiredSize are
/// ZeroCapacity), so a fixed zero is min 0, max 1, desired 0.
pub(super) fn scaling_config(scaling: Scaling) -> (u32, u32, u32) {
    match scaling {
        Scaling::Fixed { nodes: 0 } => (0, 1, 0),
        Scaling::Fixed { nodes } => (nodes, nodes, nodes),
        Scaling::Auto { min, max } => (min, max, min),
    }
}

/// The scaling of a node group's (minSize, maxSize, desiredSize): fixed when min equals max, and
/// a fixed zero for (0, 1, 0); autoscaling otherwise (desiredSize is then the autoscaler's).
fn scaling_of(min: u32, max: u32, desired: u32) -> Scaling {
    if min == max {
        Scaling::Fixed { nodes: max }
    } else if (min, max, desired) == (0, 1, 0) {
        Scaling::Fixed { nodes: 0 }
    } else {
        Scaling::Auto { min, max }
    }
}

/// How a node group created with `scaling` reads back: EKS has no autoscaling switch, so
/// `Auto {n, n}` reads as `Fixed {n}` and a fresh `Auto {0, 1}` (min 0, max 1, desired 0) as the
/// fixed zero it is stored like.
pub fn canonical_scaling(scaling: Scaling) -> Scaling {
    let (min, max, desired) = scaling_config(scaling);
    scaling_of(min, max, desired)
}

/// The spec as EKS can hold it, i.e. what `EksClient::get` returns for a node group created
/// from `spec`: taints sorted with Kubernetes effects, subnets sorted, diskSize 20 (EKS's default)
/// as None, the scaling as [`canonical_scaling`] reads it, no `eks.amazonaws.com/*` labels, and no
/// GPU or AKS fields (EKS has none: MIG and time-slicing are node labels).
pub fn canonical_spec(spec: &PoolSpec) -> PoolSpec {
    let mut s = spec.clone();
    s.scaling = canonical_scaling(s.scaling);
    if s.disk_size_gb == Some(DEFAULT_DISK_SIZE_GB) {
        s.disk_size_gb = None;
    }
    s.labels
        .retain(|k, _| !k.starts_with(RESERVED_LABEL_PREFIX));
    for t in &mut s.taints {
        t.effect = k8s_effect(&aws_effect(&t.effect)).to_string();
    }
    s.taints.sort();
    s.gpu_count = 0;
    s.eks_mut().subnet_ids.sort();
    s
}

/// The clientRequestToken of a create: a hash of everything the request says, so that a retried
/// create (same spec) is the same request and EKS answers it with the group it already made.
pub fn request_token(spec: &PoolSpec) -> String {
    let s = canonical_spec(spec);
    let mut text = format!(
        "{:?}|{}|{}|{:?}|{}|{:?}|{:?}",
        s.location,
        s.name,
        s.machine_type,
        s.scaling,
        s.spot,
        s.disk_size_gb,
        // As an Option, so that the token reads as it did when the fields were one.
        Some(s.eks())
    );
    for (k, v) in &s.labels {
        text.push_str(&format!("|l:{k}={v}"));
    }
    for t in &s.taints {
        text.push_str(&format!("|t:{}={}:{}", t.key, t.value, t.effect));
    }
    // Two FNV-1a passes with different offsets: 128 bits, stable across builds and platforms.
    let fnv = |seed: u64| {
        text.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "fracgpu-{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

pub(super) fn to_pool(region: &str, cluster: &str, ng: &Nodegroup) -> Pool {
    let spec = to_spec(region, cluster, ng);
    Pool {
        id: pool_id(cluster, &spec.name),
        spec,
        status: status_of(ng),
    }
}

pub(super) fn to_spec(region: &str, cluster: &str, ng: &Nodegroup) -> PoolSpec {
    let sc = ng.scaling_config();
    let size = |v: Option<i32>| v.unwrap_or(0).max(0) as u32;
    let scaling = scaling_of(
        size(sc.and_then(|s| s.min_size())),
        size(sc.and_then(|s| s.max_size())),
        size(sc.and_then(|s| s.desired_size())),
    );
    let mut labels: BTreeMap<String, String> = ng
        .labels()
        .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    labels.retain(|k, _| !k.starts_with(RESERVED_LABEL_PREFIX));
    let mut taints: Vec<PoolTaint> = ng
        .taints()
        .iter()
        .map(|t| PoolTaint {
            key: t.key().unwrap_or("").to_string(),
            value: t.value().unwrap_or("").to_string(),
            effect: k8s_effect(t.effect().map(|e| e.as_str()).unwrap_or("")).to_string(),
        })
        .collect();
    taints.sort();
    let mut subnet_ids = ng.subnets().to_vec();
    subnet_ids.sort();
    let disk = ng
        .disk_size()
        .map(|d| d.max(0) as u32)
        .filter(|d| *d != DEFAULT_DISK_SIZE_GB);
    PoolSpec {
        location: Location::Eks {
            region: region.to_string(),
            cluster: cluster.to_string(),
        },
        name: ng.nodegroup_name().unwrap_or("").to_string(),
        machine_type: ng.instance_types().first().cloned().unwrap_or_default(),
        scaling,
        spot: ng.capacity_type().map(|c| c.as_str()) == Some("SPOT"),
        disk_size_gb: disk,
        labels,
        taints,
        gpu_count: 0,
        node_template: BTreeMap::new(),
        target: TargetFields::Eks(EksPoolFields {
            node_role_arn: ng.node_role().unwrap_or("").to_string(),
            subnet_ids,
            ami_type: ng
                .ami_type()
                .map(|a| a.as_str().to_string())
                .unwrap_or_default(),
            bottlerocket_settings: None,
        }),
    }
}

/// Kubernetes taint effect -> EKS's enum; anything else is passed through for the API to judge.
fn aws_effect(effect: &str) -> String {
    match effect {
        "NoSchedule" => "NO_SCHEDULE",
        "PreferNoSchedule" => "PREFER_NO_SCHEDULE",
        "NoExecute" => "NO_EXECUTE",
        other => other,
    }
    .to_string()
}

fn k8s_effect(effect: &str) -> &str {
    match effect {
        "NO_SCHEDULE" => "NoSchedule",
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        "NO_EXECUTE" => "NoExecute",
        other => other,
    }
}

pub(super) fn to_sdk_taint(t: &PoolTaint) -> Taint {
    Taint::builder()
        .key(&t.key)
        .set_value((!t.value.is_empty()).then(|| t.value.clone()))
        .effect(TaintEffect::from(aws_effect(&t.effect).as_str()))
        .build()
}

pub(super) fn to_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What one UpdateNodegroupConfig must carry to bring a node group to a spec.
pub(super) struct ConfigChange {
    pub(super) labels: Option<UpdateLabelsPayload>,
    pub(super) taints: Option<UpdateTaintsPayload>,
    pub(super) scaling: Option<NodegroupScalingConfig>,
}

impl ConfigChange {
    pub(super) fn between(ng: &Nodegroup, spec: &PoolSpec) -> Option<ConfigChange> {
        let empty = HashMap::new();
        let have = ng.labels().unwrap_or(&empty);
        let want = &spec.labels;
        let add: HashMap<String, String> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut remove: Vec<String> = have
            .keys()
            .filter(|k| !want.contains_key(*k) && !k.starts_with(RESERVED_LABEL_PREFIX))
            .cloned()
            .collect();
        remove.sort();
        let labels = (!add.is_empty() || !remove.is_empty()).then(|| {
            UpdateLabelsPayload::builder()
                .set_add_or_update_labels((!add.is_empty()).then_some(add))
                .set_remove_labels((!remove.is_empty()).then_some(remove))
                .build()
        });

        // Kubernetes (and EKS) identify a taint by key and effect; a new value is an addOrUpdate.
        let have_t: Vec<(String, String, String)> = ng
            .taints()
            .iter()
            .map(|t| {
                (
                    t.key().unwrap_or("").to_string(),
                    t.value().unwrap_or("").to_string(),
                    t.effect().map(|e| e.as_str()).unwrap_or("").to_string(),
                )
            })
            .collect();
        let want_t: Vec<(String, String, String)> = spec
            .taints
            .iter()
            .map(|t| (t.key.clone(), t.value.clone(), aws_effect(&t.effect)))
            .collect();
        let to_taint = |(k, v, e): &(String, String, String)| {
            Taint::builder()
                .key(k)
                .set_value((!v.is_empty()).then(|| v.clone()))
                .effect(TaintEffect::from(e.as_str()))
                .build()
        };
        let add_t: Vec<Taint> = want_t
            .iter()
            .filter(|t| !have_t.contains(t))
            .map(to_taint)
            .collect();
        let remove_t: Vec<Taint> = have_t
            .iter()
            .filter(|(k, _, e)| !want_t.iter().any(|(wk, _, we)| wk == k && we == e))
            .map(to_taint)
            .collect();
        let taints = (!add_t.is_empty() || !remove_t.is_empty()).then(|| {
            UpdateTaintsPayload::builder()
                .set_add_or_update_taints((!add_t.is_empty()).then_some(add_t))
                .set_remove_taints((!remove_t.is_empty()).then_some(remove_t))
                .build()
        });

        let sc = ng.scaling_config();
        let cur = (
            sc.and_then(|s| s.min_size()).unwrap_or(0),
            sc.and_then(|s| s.max_size()).unwrap_or(0),
            sc.and_then(|s| s.desired_size()).unwrap_or(0),
        );
        let target = match spec.scaling {
            Scaling::Fixed { .. } => {
                let (min, max, desired) = scaling_config(spec.scaling);
                (to_i32(min), to_i32(max), to_i32(desired))
            }
            // Keep the autoscaler's desired size unless it falls outside the new bounds.
            Scaling::Auto { min, max } => {
                let (min, max) = (to_i32(min), to_i32(max));
                (min, max, cur.2.clamp(min, max.max(min)))
            }
        };
        let scaling = (cur != target).then(|| {
            NodegroupScalingConfig::builder()
                .min_size(target.0)
                .max_size(target.1)
                .desired_size(target.2)
                .build()
        });

        (labels.is_some() || taints.is_some() || scaling.is_some()).then_some(ConfigChange {
            labels,
            taints,
            scaling,
        })
    }
}

pub(super) fn eks_location(location: &Location) -> Result<(&str, &str), CloudError> {
    match location {
        Location::Eks { region, cluster } => Ok((region, cluster)),
        other => Err(CloudError::Api {
            status: 0,
            code: "InvalidSpec".into(),
            message: format!("the EKS client was handed a {} location", other.cloud()),
        }),
    }
}

pub(super) fn status_of(ng: &Nodegroup) -> String {
    ng.status()
        .map(|s| s.as_str().to_string())
        .unwrap_or_default()
}

pub(super) fn issues_suffix(ng: &Nodegroup) -> String {
    let issues = health_issues(ng);
    if issues.is_empty() {
        String::new()
    } else {
        format!(": {issues}")
    }
}

fn health_issues(ng: &Nodegroup) -> String {
    ng.health()
        .map(|h| {
            h.issues()
                .iter()
                .map(|i| {
                    format!(
                        "{}: {}",
                        i.code().map(|c| c.as_str()).unwrap_or("Unknown"),
                        i.message().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

pub(super) fn operation_failed(ng: &Nodegroup, status: &str) -> CloudError {
    let code = ng
        .health()
        .and_then(|h| h.issues().first())
        .and_then(|i| i.code())
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| status.to_string());
    let issues = health_issues(ng);
    CloudError::OperationFailed {
        code,
        message: format!(
            "node group {} is {status}{}",
            ng.nodegroup_name().unwrap_or(""),
            if issues.is_empty() {
                String::new()
            } else {
                format!(": {issues}")
            }
        ),
    }
}
