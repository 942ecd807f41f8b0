//! Reading GKE's node pool bodies as the service does: a pool's name, zones, machine, labels,
//! taints, autoscaling and management (its GPUs are `accelerators.rs`, each field's type
//! `fields.rs`); failures are INVALID_ARGUMENT with GKE's messages. An update replaces each group
//! of fields it names, as nodePools.update does.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::accelerators::{builtin, check_zones_offer, parse_accelerators};
use super::error::{GError, invalid};
use super::fields::{boolean, enumv, int, object, string};
use super::world::{
    Accelerator, Autoscaling, GKE_VERSION, GkeCluster, PoolSpec, is_zone, region_of,
};
use crate::catalog;
use crate::nodes::{valid_label_key, valid_label_value};

const EFFECT: &[&str] = &[
    "EFFECT_UNSPECIFIED",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "NO_EXECUTE",
];
const LOCATION_POLICY: &[&str] = &["LOCATION_POLICY_UNSPECIFIED", "BALANCED", "ANY"];

fn valid_pool_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A pool's `locations`: zones of the cluster's region (GKE: "Nodes must be in the region of their
/// regional cluster or in the same region as their cluster's zone for zonal clusters", the google
/// provider's node_locations). Absent or empty: the cluster's own zones. Sorted, as GKE returns them.
fn parse_locations(v: Option<&Value>, cluster: &GkeCluster) -> Result<Vec<String>, GError> {
    let list = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|z| {
                z.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid("Invalid value at 'locations': expected strings."))
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(invalid("Invalid value at 'locations': expected a list.")),
    };
    if list.is_empty() {
        return Ok(cluster.zones());
    }
    let region = cluster.region();
    let mut zones = Vec::new();
    for z in list {
        // The sandbox's regions have zones -a to -f.
        let known = is_zone(&z)
            && region_of(&z) == region
            && z.ends_with(|c: char| ('a'..='f').contains(&c));
        if !known {
            // The rule is GKE's; the wording is the sandbox's.
            return Err(invalid(format!(
                "Location \"{z}\" is not a zone of region {region}: node pool locations must be \
                    zones of the cluster's region."
            )));
        }
        if !zones.contains(&z) {
            zones.push(z);
        }
    }
    zones.sort();
    Ok(zones)
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
        if !valid_label_key(k) || !valid_label_value(v) {
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
                "Taint \"{key}\" must have an effect: NO_SCHEDULE, PREFER_NO_SCHEDULE or \
                    NO_EXECUTE."
            )));
        };
        if !valid_label_key(key) || !valid_label_value(value) {
            return Err(invalid(format!(
                "Invalid taint \"{key}={value}\": key and value must be valid Kubernetes label key \
                    and value."
            )));
        }
        out.push((key.to_string(), value.to_string(), effect.to_string()));
    }
    Ok(out)
}

pub(super) fn parse_autoscaling(a: &Map<String, Value>) -> Result<Option<Autoscaling>, GError> {
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
            "Autoscaling config can have either per-zone limits (minNodeCount, maxNodeCount) or \
                total limits (totalMinNodeCount, totalMaxNodeCount), not both.",
        ));
    }
    let (lo, hi) = if total {
        (tmin.unwrap_or(0), tmax.unwrap_or(0))
    } else {
        (min.unwrap_or(0), max.unwrap_or(0))
    };
    if lo < 0 || !(1..=1000).contains(&hi) {
        return Err(invalid(format!(
            "Autoscaling max node count must be between 1 and 1000 and min node count must not be \
                negative (got min {lo}, max {hi})."
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

/// A nodePools.create body's `nodePool`: its name and spec, with GKE's defaults for what it leaves
/// out. The fields are read in the order the checks ran before they were split, so a body with
/// several faults is answered with the same one.
pub(super) fn parse_pool(
    np: &Map<String, Value>,
    cluster: &GkeCluster,
) -> Result<(String, PoolSpec), GError> {
    let name = string(np, "name")?.unwrap_or("");
    if !valid_pool_name(name) {
        return Err(invalid(format!(
            "Invalid node pool name \"{name}\": it must be 1-40 characters, start with a lowercase \
                letter, contain only lowercase letters, digits and hyphens, and end with a letter \
                or digit."
        )));
    }
    let empty = Map::new();
    let config = object(np, "config")?.unwrap_or(&empty);
    let locations = parse_locations(np.get("locations"), cluster)?;
    let zone = &locations[0];
    let (machine_type, disk_size_gb) = machine(config, zone)?;
    let mut accelerators = parse_accelerators(config.get("accelerators"), &machine_type, zone)?;
    if accelerators.is_empty() {
        accelerators.extend(builtin(&machine_type));
    }
    check_zones_offer(&accelerators, &locations)?;
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
    // A pool of zero nodes without autoscaling is accepted: GKE lets a node pool (not a whole
    // cluster) have no nodes (terraform-provider-google #752 and #2729, where fixed pools are
    // scaled to 0 for blue/green changes), and the seed creates pools with `--num-nodes 0`.
    let (auto_repair, auto_upgrade) = management(np)?;
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
            locations,
            autoscaling,
            auto_repair,
            auto_upgrade,
            version,
            oauth_scopes: oauth_scopes(config)?,
            service_account: string(config, "serviceAccount")?.unwrap_or("").to_string(),
        },
    ))
}

/// The node config's machine type (e2-medium unless given) and disk size (0: GKE's default).
fn machine(config: &Map<String, Value>, zone: &str) -> Result<(String, i64), GError> {
    let machine_type = string(config, "machineType")?
        .filter(|m| !m.is_empty())
        .unwrap_or("e2-medium")
        .to_string();
    if catalog::gcp_machine_type(&machine_type).is_none() {
        return Err(invalid(format!(
            "Machine type \"{machine_type}\" does not exist in zone {zone}."
        )));
    }
    let disk_size_gb = int(config, "diskSizeGb")?.unwrap_or(0);
    if disk_size_gb != 0 && !(10..=65536).contains(&disk_size_gb) {
        return Err(invalid(format!(
            "Disk size {disk_size_gb} GB is invalid: it must be between 10 and 65536 GB."
        )));
    }
    Ok((machine_type, disk_size_gb))
}

/// `management`: (autoRepair, autoUpgrade), both on unless the body turns them off.
fn management(np: &Map<String, Value>) -> Result<(bool, bool), GError> {
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
    Ok((auto_repair, auto_upgrade))
}

fn oauth_scopes(config: &Map<String, Value>) -> Result<Vec<String>, GError> {
    match config.get("oauthScopes") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid("Invalid value at 'oauthScopes': expected strings."))
            })
            .collect(),
        Some(_) => Err(invalid("Invalid value at 'oauthScopes': expected a list.")),
    }
}

/// Apply an update request body to a spec, as nodePools.update does: each group present replaces
/// the current value; accelerator type, count and partition size cannot change in place.
pub(super) fn apply_update(
    spec: &mut PoolSpec,
    req: &Map<String, Value>,
    cluster: &GkeCluster,
) -> Result<(), GError> {
    // nodePools.update `locations`: the zones change, each keeping the pool's per-zone size.
    if req
        .get("locations")
        .is_some_and(|l| l.as_array().is_some_and(|a| !a.is_empty()))
    {
        spec.locations = parse_locations(req.get("locations"), cluster)?;
    }
    let zone = spec
        .locations
        .first()
        .cloned()
        .unwrap_or_else(|| cluster.zones()[0].clone());
    if let Some(mt) = string(req, "machineType")?.filter(|m| !m.is_empty()) {
        if catalog::gcp_machine_type(mt).is_none() {
            return Err(invalid(format!(
                "Machine type \"{mt}\" does not exist in zone {zone}."
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
        let new = parse_accelerators(Some(accs), &spec.machine_type, &zone)?;
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
                "Accelerator type, count and GPU partition size of a node pool cannot be updated; \
                    create a new node pool.",
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
    check_zones_offer(&spec.accelerators, &spec.locations)
}
