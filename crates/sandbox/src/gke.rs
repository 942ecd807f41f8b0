//! GKE v1 (container.googleapis.com): clusters (GET, with nodePools), nodePools (create, get, list,
//! update, setSize, setAutoscaling, setManagement, delete) and the Operations they return.
//!
//! Written from the GKE v1 REST reference. The official Rust client sends `$alt=json;enum-encoding=int`
//! (enums as integers, int64 as strings) and gcloud sends string enums, so every enum accepts both
//! forms and every integer accepts a number or a decimal string. Responses always use string enums.
//! Errors are google.rpc statuses: `{"error": {"code", "message", "status"}}`.
//!
//! The sandbox cluster has one node location (`{location}-a`), so a pool's node count is its count,
//! not count times three zones as in a default regional cluster.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::catalog;
use super::dates::rfc3339_millis;
use super::nodes::{NodeEvent, PoolNodes, k8s_effect};
use super::util::{base_url, json_response, segments};
use super::{Ctx, Sandbox, World};

pub const GKE_VERSION: &str = "1.33.5-gke.1080000";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct GkeWorld {
    /// Keyed by "project/location/cluster".
    pub clusters: BTreeMap<String, GkeCluster>,
    pub ops: BTreeMap<String, GkeOp>,
    /// Unfinished operations by (deadline, name), so settling looks only at what is due.
    #[serde(default)]
    pub pending: std::collections::BTreeSet<(u64, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GkeCluster {
    pub project: String,
    pub location: String,
    pub name: String,
    pub pools: BTreeMap<String, NodePool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodePool {
    pub name: String,
    pub spec: PoolSpec,
    /// PROVISIONING | RUNNING | RECONCILING | STOPPING | ERROR | RUNNING_WITH_ERROR
    pub status: String,
    pub pending: Option<Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub op: String,
    pub kind: Kind,
    pub deadline: u64,
    pub fail: bool,
    /// The spec before an update, restored when the update fails.
    pub previous: Option<Box<PoolSpec>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolSpec {
    pub machine_type: String,
    pub disk_size_gb: i64,
    pub disk_type: String,
    pub image_type: String,
    pub labels: BTreeMap<String, String>,
    /// (key, value, NO_SCHEDULE | PREFER_NO_SCHEDULE | NO_EXECUTE)
    pub taints: Vec<(String, String, String)>,
    pub spot: bool,
    pub accelerators: Vec<Accelerator>,
    pub initial_node_count: i64,
    /// The pool's current size (changed by setSize); not a field of the v1 NodePool resource.
    pub node_count: i64,
    pub autoscaling: Option<Autoscaling>,
    pub auto_repair: bool,
    pub auto_upgrade: bool,
    pub version: String,
    #[serde(default)]
    pub oauth_scopes: Vec<String>,
    #[serde(default)]
    pub service_account: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accelerator {
    pub count: i64,
    pub accelerator_type: String,
    pub gpu_partition_size: Option<String>,
    /// (TIME_SHARING | MPS, maxSharedClientsPerGpu)
    pub sharing: Option<(String, i64)>,
    pub driver_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Autoscaling {
    pub enabled: bool,
    pub min_node_count: i64,
    pub max_node_count: i64,
    pub total_min_node_count: i64,
    pub total_max_node_count: i64,
    pub location_policy: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GkeOp {
    pub name: String,
    pub op_type: String,
    pub status: String,
    pub project: String,
    pub location: String,
    /// Path of the target below /v1/ (cluster or node pool).
    pub target: String,
    pub cluster: String,
    pub pool: Option<String>,
    pub start: u64,
    pub end: Option<u64>,
    pub deadline: u64,
    pub error: Option<(i32, String)>,
}

impl GkeWorld {
    pub fn add_cluster(&mut self, project: &str, location: &str, name: &str) {
        let c = GkeCluster {
            project: project.into(),
            location: location.into(),
            name: name.into(),
            pools: BTreeMap::new(),
        };
        self.clusters
            .insert(format!("{project}/{location}/{name}"), c);
    }

    pub(crate) fn settle(&mut self, now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let mut changed = false;
        while let Some((deadline, name)) = self.pending.first().cloned() {
            if deadline > now {
                break;
            }
            self.pending.pop_first();
            let Some(op) = self.ops.get_mut(&name) else {
                continue;
            };
            if op.end.is_some() {
                continue;
            }
            changed = true;
            op.end = Some(now);
            op.status = "DONE".into();
            let key = format!("{}/{}/{}", op.project, op.location, op.cluster);
            let (Some(cluster), Some(pool_name)) = (self.clusters.get_mut(&key), op.pool.clone())
            else {
                continue;
            };
            let Some(pool) = cluster.pools.get_mut(&pool_name) else {
                continue;
            };
            let Some(p) = pool.pending.take_if(|p| p.op == op.name) else {
                continue;
            };
            if p.fail {
                op.error = Some((
                    8,
                    format!(
                        "Insufficient quota to satisfy the request: ZONE_RESOURCE_POOL_EXHAUSTED for {} in {}-a (sandbox fault injection).",
                        pool.spec.machine_type, op.location
                    ),
                ));
                match p.kind {
                    Kind::Create => pool.status = "ERROR".into(),
                    Kind::Update => {
                        if let Some(prev) = p.previous {
                            pool.spec = *prev;
                        }
                        pool.status = "RUNNING".into();
                    }
                    Kind::Delete => pool.status = "RUNNING".into(),
                }
                continue;
            }
            if p.kind == Kind::Delete {
                cluster.pools.remove(&pool_name);
                events.push(NodeEvent::Deleted {
                    cloud: "gke",
                    cluster: cluster.name.clone(),
                    pool: pool_name,
                });
            } else {
                pool.status = "RUNNING".into();
                events.push(NodeEvent::Changed(pool_nodes(&cluster.name, pool)));
            }
        }
        changed
    }
}

/// The nodes GKE creates for a pool, with GKE's node labels.
pub fn pool_nodes(cluster: &str, pool: &NodePool) -> PoolNodes {
    let s = &pool.spec;
    let mut labels = BTreeMap::new();
    labels.insert(
        "cloud.google.com/gke-nodepool".to_string(),
        pool.name.clone(),
    );
    labels.insert(
        "cloud.google.com/machine-family".to_string(),
        s.machine_type.split('-').next().unwrap_or("").to_string(),
    );
    labels.insert(
        "cloud.google.com/gke-os-distribution".to_string(),
        "cos".to_string(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        s.machine_type.clone(),
    );
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    if s.spot {
        labels.insert("cloud.google.com/gke-spot".to_string(), "true".to_string());
    }
    let acc = s.accelerators.first();
    let machine_gpu = catalog::gcp_machine_type(&s.machine_type).and_then(|m| m.gpu);
    let acc_info = acc.and_then(|a| catalog::gke_accelerator(&a.accelerator_type));
    let gpu = acc_info.map(|a| a.gpu).or(machine_gpu.map(|(g, _)| g));
    let gpus = acc
        .map(|a| a.count as u32)
        .or(machine_gpu.map(|(_, n)| n))
        .unwrap_or(0);
    let mut mig = None;
    let mut sharing = None;
    if let Some(a) = acc {
        labels.insert(
            "cloud.google.com/gke-accelerator".to_string(),
            a.accelerator_type.clone(),
        );
        labels.insert(
            "cloud.google.com/gke-accelerator-count".to_string(),
            a.count.to_string(),
        );
        if let Some(d) = &a.driver_version {
            labels.insert(
                "cloud.google.com/gke-gpu-driver-version".to_string(),
                d.to_ascii_lowercase(),
            );
        }
        if let (Some(p), Some(info)) = (&a.gpu_partition_size, acc_info) {
            labels.insert(
                "cloud.google.com/gke-gpu-partition-size".to_string(),
                p.clone(),
            );
            mig = catalog::gke_partition(info, p);
        }
        if let Some((strategy, max)) = &a.sharing {
            labels.insert(
                "cloud.google.com/gke-gpu-sharing-strategy".to_string(),
                strategy.to_ascii_lowercase().replace('_', "-"),
            );
            labels.insert(
                "cloud.google.com/gke-max-shared-clients-per-gpu".to_string(),
                max.to_string(),
            );
            sharing = Some((strategy.clone(), *max as u32));
        }
    }
    for (k, v) in &s.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut taints: Vec<(String, String, String)> = s
        .taints
        .iter()
        .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string()))
        .collect();
    if gpus > 0 {
        // GKE taints every GPU node so that only pods asking for GPUs land there.
        taints.push((
            "nvidia.com/gpu".into(),
            "present".into(),
            "NoSchedule".into(),
        ));
    }
    let count = match &s.autoscaling {
        Some(a) if a.enabled => a.min_node_count.max(a.total_min_node_count),
        _ => s.node_count,
    };
    PoolNodes {
        cloud: "gke",
        cluster: cluster.to_string(),
        pool: pool.name.clone(),
        node_count: (count.max(1)) as u32,
        labels,
        taints,
        gpu_product: gpu.map(|g| g.product.to_string()),
        gpus_per_node: gpus,
        gpu_memory_mib: gpu.map_or(0, |g| g.memory_mib),
        mig_profile: mig.map(|(p, _)| p.to_string()),
        mig_instances_per_gpu: mig.map_or(0, |(_, n)| n),
        gke_sharing: sharing,
    }
}

// ---------------------------------------------------------------- errors

pub struct GError {
    code: u16,
    message: String,
}

fn gerr(code: u16, message: impl Into<String>) -> GError {
    GError {
        code,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> GError {
    gerr(400, message)
}

fn status_name(code: u16, message: &str) -> &'static str {
    match code {
        400 if message.contains(" is currently ") => "FAILED_PRECONDITION",
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

impl GError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let s = status_name(self.code, &self.message);
        json_response(
            status,
            &json!({"error": {"code": self.code, "message": self.message, "status": s}}),
        )
    }
}

// ---------------------------------------------------------------- JSON reading (int and string enums)

/// An int64 field sent as a number or as a decimal string.
fn int(o: &Map<String, Value>, field: &str) -> Result<Option<i64>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| {
            invalid(format!(
                "Invalid value at '{field}': {n} is not an integer."
            ))
        }),
        Some(Value::String(s)) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(format!("Invalid value at '{field}' (TYPE_INT64), \"{s}\""))),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_INT64), {v}"
        ))),
    }
}

fn boolean(o: &Map<String, Value>, field: &str) -> Result<Option<bool>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_BOOL), {v}"
        ))),
    }
}

fn string<'a>(o: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_STRING), {v}"
        ))),
    }
}

fn object<'a>(
    o: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(invalid(format!(
            "Invalid JSON payload received. '{field}' must be an object, got {v}."
        ))),
    }
}

/// An enum sent as its name or as its number (`enum-encoding=int`); `values[i]` is the name of number i.
/// The UNSPECIFIED value (0) reads as absent, as proto3 does.
fn enumv(
    o: &Map<String, Value>,
    field: &str,
    values: &[&'static str],
) -> Result<Option<&'static str>, GError> {
    let bad = |v: &Value| {
        invalid(format!(
            "Invalid value at '{field}' (type.googleapis.com/{field}), {v}"
        ))
    };
    let i = match o.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|i| i as usize)
            .ok_or_else(|| bad(&Value::Number(n.clone())))?,
        Some(Value::String(s)) => values
            .iter()
            .position(|v| v == s)
            .ok_or_else(|| bad(&Value::String(s.clone())))?,
        Some(v) => return Err(bad(v)),
    };
    match values.get(i) {
        Some(_) if i == 0 => Ok(None),
        Some(v) => Ok(Some(v)),
        None => Err(bad(&json!(i))),
    }
}

const SHARING: &[&str] = &["GPU_SHARING_STRATEGY_UNSPECIFIED", "TIME_SHARING", "MPS"];
const DRIVER: &[&str] = &[
    "GPU_DRIVER_VERSION_UNSPECIFIED",
    "INSTALLATION_DISABLED",
    "DEFAULT",
    "LATEST",
];
const EFFECT: &[&str] = &[
    "EFFECT_UNSPECIFIED",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NO_EXECUTE",
];
const LOCATION_POLICY: &[&str] = &["LOCATION_POLICY_UNSPECIFIED", "BALANCED", "ANY"];

fn parse_body(body: &[u8]) -> Result<Map<String, Value>, GError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(invalid(
            "Invalid JSON payload received. Expected an object.",
        )),
        Err(e) => Err(invalid(format!("Invalid JSON payload received. {e}"))),
    }
}

fn valid_pool_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn parse_labels(o: &Map<String, Value>, field: &str) -> Result<BTreeMap<String, String>, GError> {
    let Some(m) = object(o, field)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let Some(v) = v.as_str() else {
            return Err(invalid(format!(
                "Invalid value at '{field}[{k}]': expected a string."
            )));
        };
        if !super::arm::valid_label_key(k) || !super::arm::valid_label_value(v) {
            return Err(invalid(format!(
                "Invalid node label \"{k}={v}\": keys and values must be valid Kubernetes labels."
            )));
        }
        out.insert(k.clone(), v.to_string());
    }
    Ok(out)
}

fn parse_taints(v: Option<&Value>) -> Result<Vec<(String, String, String)>, GError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(a) = v.as_array() else {
        return Err(invalid("Invalid value at 'taints': expected a list."));
    };
    let mut out = Vec::new();
    for t in a {
        let Some(t) = t.as_object() else {
            return Err(invalid("Invalid value at 'taints': expected objects."));
        };
        let key = string(t, "key")?.unwrap_or("");
        let value = string(t, "value")?.unwrap_or("");
        let Some(effect) = enumv(t, "effect", EFFECT)? else {
            return Err(invalid(format!(
                "Taint \"{key}\" must have an effect: NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE."
            )));
        };
        if !super::arm::valid_label_key(key) || !super::arm::valid_label_value(value) {
            return Err(invalid(format!(
                "Invalid taint \"{key}={value}\": key and value must be valid Kubernetes label key and value."
            )));
        }
        out.push((key.to_string(), value.to_string(), effect.to_string()));
    }
    Ok(out)
}

fn parse_autoscaling(a: &Map<String, Value>) -> Result<Option<Autoscaling>, GError> {
    let enabled = boolean(a, "enabled")?.unwrap_or(false);
    let min = int(a, "minNodeCount")?;
    let max = int(a, "maxNodeCount")?;
    let tmin = int(a, "totalMinNodeCount")?;
    let tmax = int(a, "totalMaxNodeCount")?;
    let policy = enumv(a, "locationPolicy", LOCATION_POLICY)?.map(str::to_string);
    if !enabled {
        return Ok(None);
    }
    let per_zone = min.is_some() || max.is_some();
    let total = tmin.is_some() || tmax.is_some();
    if per_zone && total {
        return Err(invalid(
            "Autoscaling config can have either per-zone limits (minNodeCount, maxNodeCount) or total limits (totalMinNodeCount, totalMaxNodeCount), not both.",
        ));
    }
    let (lo, hi) = if total {
        (tmin.unwrap_or(0), tmax.unwrap_or(0))
    } else {
        (min.unwrap_or(0), max.unwrap_or(0))
    };
    if lo < 0 || !(1..=1000).contains(&hi) {
        return Err(invalid(format!(
            "Autoscaling max node count must be between 1 and 1000 and min node count must not be negative (got min {lo}, max {hi})."
        )));
    }
    if lo > hi {
        return Err(invalid(format!(
            "Autoscaling min node count {lo} must not be greater than max node count {hi}."
        )));
    }
    Ok(Some(Autoscaling {
        enabled,
        min_node_count: if total { 0 } else { lo },
        max_node_count: if total { 0 } else { hi },
        total_min_node_count: if total { lo } else { 0 },
        total_max_node_count: if total { hi } else { 0 },
        location_policy: policy.or(Some("BALANCED".into())),
    }))
}

fn parse_accelerators(v: Option<&Value>, machine_type: &str) -> Result<Vec<Accelerator>, GError> {
    let list = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(invalid("Invalid value at 'accelerators': expected a list.")),
    };
    let builtin = catalog::gke_builtin_accelerator(machine_type);
    let machine_gpus = catalog::gcp_machine_type(machine_type)
        .and_then(|m| m.gpu)
        .map_or(0, |g| g.1 as i64);
    if list.len() > 1 {
        return Err(invalid(
            "Only one accelerator type per node pool is supported.",
        ));
    }
    let mut out = Vec::new();
    for a in &list {
        let Some(a) = a.as_object() else {
            return Err(invalid(
                "Invalid value at 'accelerators': expected objects.",
            ));
        };
        let ty = string(a, "acceleratorType")?.unwrap_or("");
        let Some(info) = catalog::gke_accelerator(ty) else {
            return Err(invalid(format!(
                "Accelerator type \"{ty}\" does not exist in zone us-central1-a."
            )));
        };
        let count = int(a, "acceleratorCount")?.unwrap_or(0);
        if count < 1 {
            return Err(invalid(format!(
                "Accelerator count must be at least 1 (got {count})."
            )));
        }
        match builtin {
            Some(b) => {
                if b.name != ty || count != machine_gpus {
                    return Err(invalid(format!(
                        "Machine type {machine_type} comes with {machine_gpus} {} GPUs; accelerator {count} x {ty} does not match.",
                        b.name
                    )));
                }
            }
            None => {
                if !machine_type.starts_with(info.machine_prefix) {
                    return Err(invalid(format!(
                        "Accelerator type {ty} cannot be attached to machine type {machine_type}."
                    )));
                }
                if ![1, 2, 4, 8].contains(&count) {
                    return Err(invalid(format!(
                        "{count} x {ty} is not a supported accelerator count for {machine_type}: use 1, 2, 4 or 8."
                    )));
                }
            }
        }
        let partition = string(a, "gpuPartitionSize")?
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        if let Some(p) = &partition
            && catalog::gke_partition(info, p).is_none()
        {
            let valid = if info.partitions.is_empty() {
                "none (the GPU does not support MIG)".to_string()
            } else {
                info.partitions.join(", ")
            };
            return Err(invalid(format!(
                "GPU partition size \"{p}\" is not valid for accelerator {ty}. Valid sizes: {valid}."
            )));
        }
        let sharing = match object(a, "gpuSharingConfig")? {
            None => None,
            Some(sc) => {
                let strategy = enumv(sc, "gpuSharingStrategy", SHARING)?;
                let max = int(sc, "maxSharedClientsPerGpu")?.unwrap_or(0);
                match strategy {
                    None if max == 0 => None,
                    None => {
                        return Err(invalid(
                            "gpuSharingConfig.gpuSharingStrategy must be TIME_SHARING or MPS when maxSharedClientsPerGpu is set.",
                        ));
                    }
                    Some(s) => {
                        if !(1..=48).contains(&max) {
                            return Err(invalid(format!(
                                "maxSharedClientsPerGpu must be between 1 and 48 (got {max})."
                            )));
                        }
                        if s == "MPS" && partition.is_some() {
                            return Err(invalid(
                                "The MPS GPU sharing strategy cannot be combined with GPU partitions.",
                            ));
                        }
                        Some((s.to_string(), max))
                    }
                }
            }
        };
        let driver = match object(a, "gpuDriverInstallationConfig")? {
            None => None,
            Some(d) => enumv(d, "gpuDriverVersion", DRIVER)?.map(str::to_string),
        };
        out.push(Accelerator {
            count,
            accelerator_type: ty.to_string(),
            gpu_partition_size: partition,
            sharing,
            driver_version: driver,
        });
    }
    Ok(out)
}

fn parse_pool(np: &Map<String, Value>) -> Result<(String, PoolSpec), GError> {
    let name = string(np, "name")?.unwrap_or("");
    if !valid_pool_name(name) {
        return Err(invalid(format!(
            "Invalid node pool name \"{name}\": it must be 1-40 characters, start with a lowercase letter, contain only lowercase letters, digits and hyphens, and end with a letter or digit."
        )));
    }
    let empty = Map::new();
    let config = object(np, "config")?.unwrap_or(&empty);
    let machine_type = string(config, "machineType")?
        .filter(|m| !m.is_empty())
        .unwrap_or("e2-medium")
        .to_string();
    if catalog::gcp_machine_type(&machine_type).is_none() {
        return Err(invalid(format!(
            "Machine type \"{machine_type}\" does not exist in zone us-central1-a."
        )));
    }
    let disk_size_gb = int(config, "diskSizeGb")?.unwrap_or(0);
    if disk_size_gb != 0 && !(10..=65536).contains(&disk_size_gb) {
        return Err(invalid(format!(
            "Disk size {disk_size_gb} GB is invalid: it must be between 10 and 65536 GB."
        )));
    }
    let mut accelerators = parse_accelerators(config.get("accelerators"), &machine_type)?;
    if accelerators.is_empty() {
        // GKE fills in the GPUs that come with a2/a3/a4/g2 machine types.
        if let (Some(b), Some(m)) = (
            catalog::gke_builtin_accelerator(&machine_type),
            catalog::gcp_machine_type(&machine_type),
        ) {
            accelerators.push(Accelerator {
                count: m.gpu.map_or(0, |g| g.1 as i64),
                accelerator_type: b.name.to_string(),
                gpu_partition_size: None,
                sharing: None,
                driver_version: None,
            });
        }
    }
    let initial = int(np, "initialNodeCount")?.unwrap_or(0);
    if !(0..=1000).contains(&initial) {
        return Err(invalid(format!(
            "initialNodeCount must be between 0 and 1000 (got {initial})."
        )));
    }
    let autoscaling = match object(np, "autoscaling")? {
        Some(a) => parse_autoscaling(a)?,
        None => None,
    };
    if initial == 0 && autoscaling.is_none() {
        return Err(invalid(
            "Node pool must have initialNodeCount greater than 0, or autoscaling enabled.",
        ));
    }
    let mgmt = object(np, "management")?;
    let auto_repair = mgmt
        .map(|m| boolean(m, "autoRepair"))
        .transpose()?
        .flatten()
        .unwrap_or(true);
    let auto_upgrade = mgmt
        .map(|m| boolean(m, "autoUpgrade"))
        .transpose()?
        .flatten()
        .unwrap_or(true);
    let version = string(np, "version")?
        .filter(|v| !v.is_empty() && *v != "-")
        .unwrap_or(GKE_VERSION)
        .to_string();
    Ok((
        name.to_string(),
        PoolSpec {
            machine_type,
            disk_size_gb: if disk_size_gb == 0 { 100 } else { disk_size_gb },
            disk_type: string(config, "diskType")?
                .filter(|d| !d.is_empty())
                .unwrap_or("pd-balanced")
                .to_string(),
            image_type: string(config, "imageType")?
                .filter(|d| !d.is_empty())
                .unwrap_or("COS_CONTAINERD")
                .to_string(),
            labels: parse_labels(config, "labels")?,
            taints: parse_taints(config.get("taints"))?,
            spot: boolean(config, "spot")?.unwrap_or(false),
            accelerators,
            initial_node_count: initial,
            node_count: initial,
            autoscaling,
            auto_repair,
            auto_upgrade,
            version,
            oauth_scopes: match config.get("oauthScopes") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            invalid("Invalid value at 'oauthScopes': expected strings.")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(invalid("Invalid value at 'oauthScopes': expected a list.")),
            },
            service_account: string(config, "serviceAccount")?.unwrap_or("").to_string(),
        },
    ))
}

// ---------------------------------------------------------------- documents

fn cluster_path(c: &GkeCluster) -> String {
    format!(
        "projects/{}/locations/{}/clusters/{}",
        c.project, c.location, c.name
    )
}

pub fn pool_json(c: &GkeCluster, p: &NodePool) -> Value {
    let s = &p.spec;
    let accelerators: Vec<Value> = s
        .accelerators
        .iter()
        .map(|a| {
            let mut v = json!({"acceleratorCount": a.count.to_string(), "acceleratorType": a.accelerator_type});
            if let Some(ps) = &a.gpu_partition_size {
                v["gpuPartitionSize"] = json!(ps);
            }
            if let Some((st, max)) = &a.sharing {
                v["gpuSharingConfig"] = json!({"gpuSharingStrategy": st, "maxSharedClientsPerGpu": max.to_string()});
            }
            if let Some(d) = &a.driver_version {
                v["gpuDriverInstallationConfig"] = json!({"gpuDriverVersion": d});
            }
            v
        })
        .collect();
    let mut config = json!({
        "machineType": s.machine_type, "diskSizeGb": s.disk_size_gb, "diskType": s.disk_type, "imageType": s.image_type,
        "oauthScopes": if s.oauth_scopes.is_empty() { vec![
            // GKE's default scopes when the request names none.
            "https://www.googleapis.com/auth/devstorage.read_only".to_string(),
            "https://www.googleapis.com/auth/logging.write".to_string(),
            "https://www.googleapis.com/auth/monitoring".to_string(),
            "https://www.googleapis.com/auth/service.management.readonly".to_string(),
            "https://www.googleapis.com/auth/servicecontrol".to_string(),
            "https://www.googleapis.com/auth/trace.append".to_string(),
        ] } else { s.oauth_scopes.clone() },
        "serviceAccount": if s.service_account.is_empty() { "default" } else { s.service_account.as_str() },
        "metadata": {"disable-legacy-endpoints": "true"},
    });
    if !s.labels.is_empty() {
        config["labels"] = json!(s.labels);
    }
    if !s.taints.is_empty() {
        config["taints"] = json!(
            s.taints
                .iter()
                .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
                .collect::<Vec<_>>()
        );
    }
    if s.spot {
        config["spot"] = json!(true);
    }
    if !accelerators.is_empty() {
        config["accelerators"] = json!(accelerators);
    }
    let path = format!("{}/nodePools/{}", cluster_path(c), p.name);
    let mut v = json!({
        "name": p.name,
        "config": config,
        "initialNodeCount": s.initial_node_count,
        "locations": [format!("{}-a", c.location)],
        "selfLink": format!("https://container.googleapis.com/v1/{path}"),
        "version": s.version,
        "instanceGroupUrls": [format!("https://www.googleapis.com/compute/v1/projects/{}/zones/{}-a/instanceGroupManagers/gke-{}-{}-grp", c.project, c.location, c.name, p.name)],
        "status": p.status,
        "management": {"autoUpgrade": s.auto_upgrade, "autoRepair": s.auto_repair},
        "podIpv4CidrSize": 24,
        "upgradeSettings": {"maxSurge": 1, "strategy": "SURGE"},
        "etag": format!("{:x}", fxhash(&path, s)),
    });
    if let Some(a) = &s.autoscaling {
        let mut av = json!({"enabled": a.enabled});
        if a.total_max_node_count > 0 {
            av["totalMinNodeCount"] = json!(a.total_min_node_count);
            av["totalMaxNodeCount"] = json!(a.total_max_node_count);
        } else {
            av["minNodeCount"] = json!(a.min_node_count);
            av["maxNodeCount"] = json!(a.max_node_count);
        }
        if let Some(lp) = &a.location_policy {
            av["locationPolicy"] = json!(lp);
        }
        v["autoscaling"] = av;
    }
    v
}

fn fxhash(path: &str, s: &PoolSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    format!("{s:?}").hash(&mut h);
    h.finish()
}

fn cluster_json(c: &GkeCluster) -> Value {
    let pools: Vec<Value> = c.pools.values().map(|p| pool_json(c, p)).collect();
    let nodes: i64 = c.pools.values().map(|p| p.spec.node_count).sum();
    json!({
        "name": c.name,
        "location": c.location,
        "zone": c.location,
        "locations": [format!("{}-a", c.location)],
        "status": "RUNNING",
        "currentMasterVersion": GKE_VERSION,
        "currentNodeVersion": GKE_VERSION,
        "initialClusterVersion": GKE_VERSION,
        "currentNodeCount": nodes,
        "endpoint": "127.0.0.1",
        "selfLink": format!("https://container.googleapis.com/v1/{}", cluster_path(c)),
        "network": "default",
        "subnetwork": "default",
        "nodePools": pools,
        "releaseChannel": {"channel": "REGULAR"},
        "masterAuth": {"clusterCaCertificate": ""},
    })
}

fn op_json(base: &str, op: &GkeOp) -> Value {
    let mut v = json!({
        "name": op.name,
        "zone": op.location,
        "operationType": op.op_type,
        "status": op.status,
        "selfLink": format!("{base}/v1/projects/{}/locations/{}/operations/{}", op.project, op.location, op.name),
        "targetLink": format!("{base}/v1/{}", op.target),
        "startTime": rfc3339_millis(op.start),
    });
    if let Some(e) = op.end {
        v["endTime"] = json!(rfc3339_millis(e));
    }
    if let Some((code, msg)) = &op.error {
        v["error"] = json!({"code": code, "message": msg});
        v["statusMessage"] = json!(msg);
    }
    v
}

// ---------------------------------------------------------------- dispatch

pub async fn handle(
    State(sb): State<Sandbox>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    fail: Option<axum::Extension<super::faults::FailOperation>>,
    body: Bytes,
) -> Response {
    let base = base_url(&headers);
    match dispatch(&sb, &method, &uri, &base, fail.is_some(), &body) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn dispatch(
    sb: &Sandbox,
    method: &Method,
    uri: &Uri,
    base: &str,
    fail: bool,
    body: &[u8],
) -> Result<Response, GError> {
    let segs = segments(uri.path());
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let not_found = || gerr(404, format!("Not found: {}.", uri.path()));
    match s.as_slice() {
        ["v1", "projects", p, "locations", l, "clusters"] if method == Method::GET => sb
            .with_world(|w, _| {
                let list: Vec<Value> = w
                    .gke
                    .clusters
                    .values()
                    .filter(|c| c.project == *p && (c.location == *l || *l == "-"))
                    .map(cluster_json)
                    .collect();
                Ok(json_response(StatusCode::OK, &json!({ "clusters": list })))
            }),
        ["v1", "projects", p, "locations", l, "clusters", c] => {
            let (cname, verb) = split_verb(c);
            match (method, verb) {
                (&Method::GET, None) => sb.with_world(|w, _| {
                    Ok(json_response(
                        StatusCode::OK,
                        &cluster_json(cluster(w, p, l, cname)?),
                    ))
                }),
                (&Method::PUT, None) => update_cluster(sb, p, l, cname, body, base, fail),
                _ => Err(gerr(
                    405,
                    format!("Method {method} is not supported on {}.", uri.path()),
                )),
            }
        }
        [
            "v1",
            "projects",
            p,
            "locations",
            l,
            "clusters",
            c,
            "nodePools",
        ] => match *method {
            Method::GET => sb.with_world(|w, _| {
                let c = cluster(w, p, l, c)?;
                let list: Vec<Value> = c.pools.values().map(|np| pool_json(c, np)).collect();
                Ok(json_response(StatusCode::OK, &json!({ "nodePools": list })))
            }),
            Method::POST => create(sb, p, l, c, body, base, fail),
            _ => Err(gerr(
                405,
                format!("Method {method} is not supported on {}.", uri.path()),
            )),
        },
        [
            "v1",
            "projects",
            p,
            "locations",
            l,
            "clusters",
            c,
            "nodePools",
            np,
        ] => {
            let (name, verb) = split_verb(np);
            match (method, verb) {
                (&Method::GET, None) => sb.with_world(|w, _| {
                    let c = cluster(w, p, l, c)?;
                    let pool = c.pools.get(name).ok_or_else(|| pool_missing(c, name))?;
                    Ok(json_response(StatusCode::OK, &pool_json(c, pool)))
                }),
                (&Method::PUT, None) => {
                    mutate(sb, p, l, c, name, body, base, fail, Mutation::Update)
                }
                (&Method::DELETE, None) => {
                    mutate(sb, p, l, c, name, body, base, fail, Mutation::Delete)
                }
                (&Method::POST, Some("setSize")) => {
                    mutate(sb, p, l, c, name, body, base, fail, Mutation::SetSize)
                }
                (&Method::POST, Some("setAutoscaling")) => mutate(
                    sb,
                    p,
                    l,
                    c,
                    name,
                    body,
                    base,
                    fail,
                    Mutation::SetAutoscaling,
                ),
                (&Method::POST, Some("setManagement")) => {
                    mutate(sb, p, l, c, name, body, base, fail, Mutation::SetManagement)
                }
                _ => Err(gerr(
                    405,
                    format!("Method {method} is not supported on {}.", uri.path()),
                )),
            }
        }
        ["v1", "projects", p, "locations", l, "operations"] if method == Method::GET => sb
            .with_world(|w, _| {
                let ops: Vec<Value> = w
                    .gke
                    .ops
                    .values()
                    .filter(|o| o.project == *p && (o.location == *l || *l == "-"))
                    .map(|o| op_json(base, o))
                    .collect();
                Ok(json_response(StatusCode::OK, &json!({ "operations": ops })))
            }),
        ["v1", "projects", p, "locations", l, "operations", op] if method == Method::GET => sb
            .with_world(|w, _| {
                let o = w
                    .gke
                    .ops
                    .get(*op)
                    .filter(|o| o.project == *p && o.location == *l)
                    .ok_or_else(|| gerr(404, format!("Not found: operation {op}.")))?;
                Ok(json_response(StatusCode::OK, &op_json(base, o)))
            }),
        _ => Err(not_found()),
    }
}

/// `name:verb` custom methods share the resource's path segment.
fn split_verb(seg: &str) -> (&str, Option<&str>) {
    match seg.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (seg, None),
    }
}

fn cluster<'a>(w: &'a World, p: &str, l: &str, c: &str) -> Result<&'a GkeCluster, GError> {
    w.gke.clusters.get(&format!("{p}/{l}/{c}")).ok_or_else(|| {
        gerr(
            404,
            format!("Not found: projects/{p}/locations/{l}/clusters/{c}."),
        )
    })
}

fn pool_missing(c: &GkeCluster, name: &str) -> GError {
    gerr(
        404,
        format!("Not found: {}/nodePools/{name}.", cluster_path(c)),
    )
}

/// GKE runs at most this many operations on one cluster at a time.
pub const MAX_CONCURRENT_OPS: usize = 5;

/// The cluster's concurrent-operations quota: a sixth running operation is refused with 429.
fn check_concurrent_ops(w: &World, c: &GkeCluster) -> Result<(), GError> {
    let running = w
        .gke
        .pending
        .iter()
        .filter_map(|(_, name)| w.gke.ops.get(name))
        .filter(|o| {
            o.end.is_none()
                && o.project == c.project
                && o.location == c.location
                && o.cluster == c.name
        })
        .count();
    if running >= MAX_CONCURRENT_OPS {
        return Err(gerr(
            429,
            format!(
                "Too many operations: cluster \"{}\" hits the concurrent operations quota {MAX_CONCURRENT_OPS}, please try again later.",
                c.name
            ),
        ));
    }
    Ok(())
}

fn new_op(
    w: &mut World,
    ctx: &mut Ctx,
    c: &GkeCluster,
    pool: Option<&str>,
    op_type: &str,
) -> GkeOp {
    let id = ctx.new_id() as u32 ^ fastrand::u32(..);
    let name = format!("operation-{}-{id:08x}", ctx.now);
    let target = match pool {
        Some(p) => format!("{}/nodePools/{p}", cluster_path(c)),
        None => cluster_path(c),
    };
    let deadline = ctx.deadline();
    let op = GkeOp {
        name: name.clone(),
        op_type: op_type.into(),
        status: "RUNNING".into(),
        project: c.project.clone(),
        location: c.location.clone(),
        target,
        cluster: c.name.clone(),
        pool: pool.map(str::to_string),
        start: ctx.now,
        end: None,
        deadline,
        error: None,
    };
    w.gke.pending.insert((deadline, name.clone()));
    w.gke.ops.insert(name, op.clone());
    ctx.schedule(deadline);
    op
}

fn create(
    sb: &Sandbox,
    p: &str,
    l: &str,
    c: &str,
    body: &[u8],
    base: &str,
    fail: bool,
) -> Result<Response, GError> {
    let req = parse_body(body)?;
    let Some(np) = object(&req, "nodePool")? else {
        return Err(invalid(
            "Invalid JSON payload received. Required field 'nodePool' is missing.",
        ));
    };
    let (name, spec) = parse_pool(np)?;
    sb.with_world_opts(fail, |w, ctx| {
        let full = cluster(w, p, l, c)?;
        let cluster_name = full.name.clone();
        w.count_create_request("gke", &cluster_name, &name);
        let full = cluster(w, p, l, c)?;
        if full.pools.contains_key(&name) {
            return Err(gerr(
                409,
                format!("Already exists: {}/nodePools/{name}.", cluster_path(full)),
            ));
        }
        let cl = full.clone_shallow();
        check_concurrent_ops(w, &cl)?;
        let op = new_op(w, ctx, &cl, Some(&name), "CREATE_NODE_POOL");
        let key = format!("{p}/{l}/{c}");
        let pool = NodePool {
            name: name.clone(),
            spec,
            status: "PROVISIONING".into(),
            pending: Some(Pending {
                op: op.name.clone(),
                kind: Kind::Create,
                deadline: op.deadline,
                fail: ctx.fail_operation,
                previous: None,
            }),
        };
        w.count_create("gke", &cl.name, &name);
        if let Some(cm) = w.gke.clusters.get_mut(&key) {
            cm.pools.insert(name, pool);
        }
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}

impl GkeCluster {
    /// The cluster's identity without its pools (enough for paths and operations).
    fn clone_shallow(&self) -> GkeCluster {
        GkeCluster {
            project: self.project.clone(),
            location: self.location.clone(),
            name: self.name.clone(),
            pools: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mutation {
    Update,
    Delete,
    SetSize,
    SetAutoscaling,
    /// clusters.update with desiredNodePoolAutoscaling: the same change, reported as UPDATE_CLUSTER.
    ClusterAutoscaling,
    SetManagement,
}

/// Apply an update request body to a spec, as nodePools.update does: each group present replaces
/// the current value; accelerator type, count and partition size cannot change in place.
fn apply_update(spec: &mut PoolSpec, req: &Map<String, Value>) -> Result<(), GError> {
    if let Some(mt) = string(req, "machineType")?.filter(|m| !m.is_empty()) {
        if catalog::gcp_machine_type(mt).is_none() {
            return Err(invalid(format!(
                "Machine type \"{mt}\" does not exist in zone us-central1-a."
            )));
        }
        spec.machine_type = mt.to_string();
    }
    if let Some(d) = int(req, "diskSizeGb")?.filter(|d| *d != 0) {
        if !(10..=65536).contains(&d) {
            return Err(invalid(format!(
                "Disk size {d} GB is invalid: it must be between 10 and 65536 GB."
            )));
        }
        spec.disk_size_gb = d;
    }
    if let Some(l) = object(req, "labels")? {
        spec.labels = parse_labels(l, "labels")?;
    }
    if let Some(t) = object(req, "taints")? {
        spec.taints = parse_taints(t.get("taints"))?;
    }
    if let Some(v) = string(req, "nodeVersion")?.filter(|v| !v.is_empty() && *v != "-") {
        spec.version = v.to_string();
    }
    if let Some(accs) = req.get("accelerators").filter(|v| !v.is_null()) {
        let new = parse_accelerators(Some(accs), &spec.machine_type)?;
        let fixed = |a: &Accelerator| {
            (
                a.accelerator_type.clone(),
                a.count,
                a.gpu_partition_size.clone(),
            )
        };
        if new
            .iter()
            .map(fixed)
            .ne(spec.accelerators.iter().map(fixed))
        {
            return Err(invalid(
                "Accelerator type, count and GPU partition size of a node pool cannot be updated; create a new node pool.",
            ));
        }
        spec.accelerators = new;
    } else if let Some(b) = catalog::gke_builtin_accelerator(&spec.machine_type) {
        // A machine type change carries its built-in GPUs along.
        if spec
            .accelerators
            .first()
            .is_none_or(|a| a.accelerator_type != b.name)
        {
            let n = catalog::gcp_machine_type(&spec.machine_type)
                .and_then(|m| m.gpu)
                .map_or(0, |g| g.1 as i64);
            spec.accelerators = vec![Accelerator {
                count: n,
                accelerator_type: b.name.into(),
                gpu_partition_size: None,
                sharing: None,
                driver_version: None,
            }];
        }
    } else if let Some(a) = spec.accelerators.first()
        && !spec.machine_type.starts_with(
            catalog::gke_accelerator(&a.accelerator_type).map_or("", |i| i.machine_prefix),
        )
    {
        return Err(invalid(format!(
            "Accelerator type {} cannot be attached to machine type {}.",
            a.accelerator_type, spec.machine_type
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn mutate(
    sb: &Sandbox,
    p: &str,
    l: &str,
    c: &str,
    name: &str,
    body: &[u8],
    base: &str,
    fail: bool,
    m: Mutation,
) -> Result<Response, GError> {
    let req = if m == Mutation::Delete || body.is_empty() {
        Map::new()
    } else {
        parse_body(body)?
    };
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(w, p, l, c)?;
        let pool = cl.pools.get(name).ok_or_else(|| pool_missing(cl, name))?;
        if let Some(pending) = &pool.pending {
            return Err(gerr(
                400,
                format!(
                    "Operation {} is currently {} a node pool for cluster {c}. Please wait and try again once it is done.",
                    pending.op,
                    match pending.kind {
                        Kind::Create => "creating",
                        Kind::Update => "updating",
                        Kind::Delete => "deleting",
                    }
                ),
            ));
        }
        let mut spec = pool.spec.clone();
        let (op_type, kind) = match m {
            Mutation::Delete => ("DELETE_NODE_POOL", Kind::Delete),
            Mutation::Update => {
                apply_update(&mut spec, &req)?;
                ("UPGRADE_NODES", Kind::Update)
            }
            Mutation::SetSize => {
                let n = int(&req, "nodeCount")?.ok_or_else(|| invalid("Required field 'nodeCount' is missing."))?;
                if !(0..=1000).contains(&n) {
                    return Err(invalid(format!("nodeCount must be between 0 and 1000 (got {n}).")));
                }
                spec.node_count = n;
                ("SET_NODE_POOL_SIZE", Kind::Update)
            }
            Mutation::SetAutoscaling | Mutation::ClusterAutoscaling => {
                let a = object(&req, "autoscaling")?.ok_or_else(|| invalid("Required field 'autoscaling' is missing."))?;
                spec.autoscaling = parse_autoscaling(a)?;
                let t = if m == Mutation::ClusterAutoscaling { "UPDATE_CLUSTER" } else { "SET_NODE_POOL_AUTOSCALING" };
                (t, Kind::Update)
            }
            Mutation::SetManagement => {
                let mg = object(&req, "management")?.ok_or_else(|| invalid("Required field 'management' is missing."))?;
                spec.auto_repair = boolean(mg, "autoRepair")?.unwrap_or(false);
                spec.auto_upgrade = boolean(mg, "autoUpgrade")?.unwrap_or(false);
                ("SET_NODE_POOL_MANAGEMENT", Kind::Update)
            }
        };
        let shallow = cl.clone_shallow();
        check_concurrent_ops(w, &shallow)?;
        let op = new_op(w, ctx, &shallow, Some(name), op_type);
        let cm = w.gke.clusters.get_mut(&format!("{p}/{l}/{c}")).expect("found above");
        let pool = cm.pools.get_mut(name).expect("found above");
        let previous = (kind == Kind::Update).then(|| Box::new(pool.spec.clone()));
        pool.spec = spec;
        pool.status = if kind == Kind::Delete { "STOPPING" } else { "RECONCILING" }.into();
        pool.pending = Some(Pending { op: op.name.clone(), kind, deadline: op.deadline, fail: ctx.fail_operation, previous });
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}

/// clusters.update: only `desiredNodePoolId` + `desiredNodePoolAutoscaling` touch node pools (that is
/// how `gcloud container node-pools update --enable-autoscaling` changes autoscaling).
fn update_cluster(
    sb: &Sandbox,
    p: &str,
    l: &str,
    c: &str,
    body: &[u8],
    base: &str,
    fail: bool,
) -> Result<Response, GError> {
    let req = parse_body(body)?;
    let Some(update) = object(&req, "update")? else {
        return Err(invalid("Required field 'update' is missing."));
    };
    if let Some(a) = object(update, "desiredNodePoolAutoscaling")? {
        let pool = string(update, "desiredNodePoolId")?.ok_or_else(|| {
            invalid("desiredNodePoolId must be set with desiredNodePoolAutoscaling.")
        })?;
        let mut body = Map::new();
        body.insert("autoscaling".into(), Value::Object(a.clone()));
        return mutate(
            sb,
            p,
            l,
            c,
            pool,
            Value::Object(body).to_string().as_bytes(),
            base,
            fail,
            Mutation::ClusterAutoscaling,
        );
    }
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(w, p, l, c)?.clone_shallow();
        check_concurrent_ops(w, &cl)?;
        let op = new_op(w, ctx, &cl, None, "UPDATE_CLUSTER");
        Ok(json_response(StatusCode::OK, &op_json(base, &op)))
    })
}

/// Compute Engine's instance group managers of the pools (`GET /compute/v1/projects/{p}/zones/
/// {z}/instanceGroupManagers/{name}`), reduced to what tells a pool's current size: GKE's node pool
/// resource keeps only `initialNodeCount`, so clients read `targetSize` here, as the google
/// provider does.
pub async fn instance_group_manager(State(sb): State<Sandbox>, uri: Uri) -> Response {
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let found = match parts.as_slice() {
        [
            "compute",
            "v1",
            "projects",
            project,
            "zones",
            zone,
            "instanceGroupManagers",
            name,
        ] => sb.with_world(|w, _| {
            w.gke.clusters.values().find_map(|c| {
                let in_zone =
                    c.project == *project && zone.strip_suffix("-a") == Some(c.location.as_str());
                let pool = c
                    .pools
                    .values()
                    .find(|p| format!("gke-{}-{}-grp", c.name, p.name) == *name)?;
                in_zone.then(|| {
                    (
                        pool.spec.node_count,
                        (*name).to_string(),
                        (*zone).to_string(),
                    )
                })
            })
        }),
        _ => None,
    };
    match found {
        Some((size, name, zone)) => {
            axum::response::IntoResponse::into_response(axum::Json(json!({
                "kind": "compute#instanceGroupManager",
                "name": name,
                "zone": zone,
                "targetSize": size,
            })))
        }
        None => gerr(404, format!("The resource '{}' was not found", uri.path())).into_response(),
    }
}
