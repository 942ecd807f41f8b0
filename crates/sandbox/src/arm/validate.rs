//! Reading a PUT body as the AKS resource provider does: types, enums (case-insensitive, stored in
//! their canonical spelling), ranges and the rules between fields, each failure in ARM's error shape
//! with the code and target the service uses. Which properties an existing pool cannot change is
//! `changes.rs`.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::error::{ArmError, err, invalid};
use super::fields::{
    bad_content, bool_field, enum_field, int_field, str_field, string_list, string_map,
};
use super::world::{KUBERNETES_VERSION, PoolProps};
use crate::catalog;
use crate::nodes::{valid_label_key, valid_label_value};

const OS_SKUS_LINUX: &[&str] = &[
    "Ubuntu",
    "Ubuntu2204",
    "Ubuntu2404",
    "AzureLinux",
    "AzureLinux3",
    "CBLMariner",
];
const OS_SKUS_WINDOWS: &[&str] = &["Windows2019", "Windows2022", "WindowsAnnual"];

fn valid_pool_name(name: &str, windows: bool) -> bool {
    let b = name.as_bytes();
    let max = if windows { 6 } else { 12 };
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Parse and validate a PUT body into properties. `existing` is the pool being updated: its values
/// fill in an omitted vmSize, osType, osSKU, count, mode and orchestratorVersion (clients send the
/// pool they read back, but a partial PUT must not resize or re-image a pool by accident), and the
/// other immutable properties keep their value when omitted too; the remaining properties follow
/// PUT's replace semantics (omitted labels and taints are cleared).
///
/// The groups are read in the order the checks ran before they were split, so a body with several
/// faults is answered with the same one.
pub(super) fn parse_props(
    name: &str,
    body: &[u8],
    existing: Option<&PoolProps>,
) -> Result<PoolProps, ArmError> {
    let o = properties(body)?;
    let os = os(&o, name, existing)?;
    let (vm_size, machine) = vm_size(&o, existing)?;
    let mode = enum_field(&o, "mode", &["System", "User", "Gateway"])?
        .map(str::to_string)
        .or_else(|| existing.map(|e| e.mode.clone()))
        .unwrap_or_else(|| "User".into());
    let sizing = sizing(&o, existing)?;
    check_system_pool(&mode, os.windows, &sizing)?;
    let os_disk_size_gb = os_disk_size(&o)?;
    let node_taints = node_taints(&o)?;
    let node_labels = node_labels(&o)?;
    let spot = spot(&o, &mode)?;
    let gpu_instance_profile = gpu_instance_profile(&o, machine, &vm_size, &os)?;
    let gpu_driver = match o.get("gpuProfile") {
        None | Some(Value::Null) => None,
        Some(Value::Object(g)) => {
            enum_field(g, "driver", &["Install", "None"])?.map(str::to_string)
        }
        Some(v) => return Err(bad_content("gpuProfile", v)),
    };
    let scale_down_mode = enum_field(&o, "scaleDownMode", &["Delete", "Deallocate"])?
        .unwrap_or("Delete")
        .to_string();
    let orchestrator_version = orchestrator_version(&o, existing)?;
    let max_pods = max_pods(&o)?;
    let availability_zones = availability_zones(&o)?;
    let tags = string_map(&o, "tags")?;
    check_tags(&tags)?;
    let mut props = PoolProps {
        vm_size,
        count: sizing.count,
        enable_auto_scaling: sizing.enable_auto_scaling,
        min_count: sizing.min_count,
        max_count: sizing.max_count,
        os_disk_size_gb,
        os_type: os.os_type,
        os_sku: os.os_sku,
        node_taints,
        node_labels,
        scale_set_priority: spot.priority,
        scale_set_eviction_policy: spot.eviction_policy,
        spot_max_price: spot.max_price,
        gpu_instance_profile,
        gpu_driver,
        mode,
        orchestrator_version,
        scale_down_mode,
        max_pods,
        availability_zones,
        tags,
    };
    if let Some(e) = existing {
        keep_omitted_immutables(&mut props, &o, e);
    }
    Ok(props)
}

/// The body's `properties` object (an absent one reads as empty).
fn properties(body: &[u8]) -> Result<Map<String, Value>, ArmError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidRequestContent",
        message: format!("The request content was invalid and could not be deserialized: '{e}'."),
        target: None,
    })?;
    let Value::Object(mut root) = v else {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized: 'expected an object'.",
        ));
    };
    match root.remove("properties") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(v) => Err(bad_content("properties", &v)),
    }
}

/// A pool's operating system: its type, which also bounds the pool's name, and its SKU.
struct Os {
    os_type: String,
    os_sku: String,
    windows: bool,
}

fn os(o: &Map<String, Value>, name: &str, existing: Option<&PoolProps>) -> Result<Os, ArmError> {
    let os_type = enum_field(o, "osType", &["Linux", "Windows"])?
        .map(str::to_string)
        .or_else(|| existing.map(|e| e.os_type.clone()))
        .unwrap_or_else(|| "Linux".into());
    let windows = os_type == "Windows";
    if !valid_pool_name(name, windows) {
        let max = if windows { 6 } else { 12 };
        return Err(ArmError {
            status: StatusCode::BAD_REQUEST,
            code: "InvalidParameter",
            message: format!(
                "The value of parameter agentPoolProfile.name is invalid. Error details: Agent \
                    pool name '{name}' must start with a lowercase letter, contain only lowercase \
                    letters and numbers, and be at most {max} characters long."
            ),
            target: Some("agentPoolProfile.name".into()),
        });
    }
    let skus: Vec<&'static str> = OS_SKUS_LINUX
        .iter()
        .chain(OS_SKUS_WINDOWS)
        .copied()
        .collect();
    let os_sku = enum_field(o, "osSKU", &skus)?
        .map(str::to_string)
        .or_else(|| existing.map(|e| e.os_sku.clone()));
    let os_sku = os_sku.unwrap_or_else(|| {
        if windows {
            "Windows2022".into()
        } else {
            "Ubuntu".into()
        }
    });
    if windows != OS_SKUS_WINDOWS.contains(&os_sku.as_str()) {
        return Err(invalid(
            "properties.osSKU",
            format!("OSSKU '{os_sku}' is not supported for OSType '{os_type}'."),
        ));
    }
    Ok(Os {
        os_type,
        os_sku,
        windows,
    })
}

/// The VM size in its canonical spelling, and what the catalog knows of it.
fn vm_size(
    o: &Map<String, Value>,
    existing: Option<&PoolProps>,
) -> Result<(String, &'static catalog::Machine), ArmError> {
    let vm_size = match str_field(o, "vmSize")? {
        Some(s) => s.to_string(),
        None => existing
            .map(|e| e.vm_size.clone())
            .unwrap_or_else(|| "Standard_D2s_v3".into()),
    };
    let machine = catalog::azure_vm_size(&vm_size).ok_or_else(|| ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "VMSizeNotSupported",
        message: format!(
            "The VM size of {vm_size} is not supported for creation of VMs and \
                Virtual Machine Scale Set in this region."
        ),
        target: Some("properties.vmSize".into()),
    })?;
    Ok((machine.name.to_string(), machine))
}

/// How many nodes a pool has, and the autoscaler's bounds when it has one.
struct Sizing {
    enable_auto_scaling: bool,
    count: u32,
    min_count: Option<u32>,
    max_count: Option<u32>,
}

fn sizing(o: &Map<String, Value>, existing: Option<&PoolProps>) -> Result<Sizing, ArmError> {
    let enable_auto_scaling = bool_field(o, "enableAutoScaling")?.unwrap_or(false);
    let count = int_field(o, "count")?;
    let min_count = int_field(o, "minCount")?;
    let max_count = int_field(o, "maxCount")?;
    let in_range = |f: &str, v: i64| {
        if (0..=1000).contains(&v) {
            Ok(v as u32)
        } else {
            Err(invalid(
                &format!("properties.{f}"),
                format!(
                    "The value of parameter properties.{f} is invalid: {v}. It must be in the \
                        range of 0 to 1000 (inclusive)."
                ),
            ))
        }
    };
    let count = count.map(|c| in_range("count", c)).transpose()?;
    let min_count = min_count.map(|c| in_range("minCount", c)).transpose()?;
    let max_count = max_count.map(|c| in_range("maxCount", c)).transpose()?;
    let count = if enable_auto_scaling {
        autoscaled_count(count, min_count, max_count, existing)?
    } else {
        if min_count.is_some() || max_count.is_some() {
            return Err(invalid(
                "properties.minCount",
                "minCount and maxCount can only be set when enableAutoScaling is true.",
            ));
        }
        count.unwrap_or(existing.map_or(1, |e| e.count))
    };
    Ok(Sizing {
        enable_auto_scaling,
        count,
        min_count,
        max_count,
    })
}

/// The count of an autoscaled pool, which must lie within both bounds, both given.
fn autoscaled_count(
    count: Option<u32>,
    min_count: Option<u32>,
    max_count: Option<u32>,
    existing: Option<&PoolProps>,
) -> Result<u32, ArmError> {
    let (Some(min), Some(max)) = (min_count, max_count) else {
        return Err(invalid(
            "properties.minCount",
            "Both minCount and maxCount must be set when enableAutoScaling is true.",
        ));
    };
    if min > max {
        return Err(invalid(
            "properties.minCount",
            format!("minCount ({min}) must be less than or equal to maxCount ({max})."),
        ));
    }
    // An omitted count keeps the current size when it fits the new range.
    let current = existing
        .map(|e| e.count)
        .filter(|c| (min..=max).contains(c));
    let c = count.or(current).unwrap_or(min);
    if c < min || c > max {
        return Err(invalid(
            "properties.count",
            format!(
                "count ({c}) must be between minCount ({min}) and maxCount ({max}) when \
                    autoscaling is enabled."
            ),
        ));
    }
    Ok(c)
}

/// A System pool runs the cluster's own pods: Linux, and never empty.
fn check_system_pool(mode: &str, windows: bool, sizing: &Sizing) -> Result<(), ArmError> {
    if mode != "System" {
        return Ok(());
    }
    if windows {
        return Err(invalid(
            "properties.mode",
            "System node pools must use OSType Linux.",
        ));
    }
    if sizing.count == 0 || sizing.min_count == Some(0) {
        return Err(invalid(
            "properties.count",
            "System node pools must have at least one node.",
        ));
    }
    Ok(())
}

fn os_disk_size(o: &Map<String, Value>) -> Result<u32, ArmError> {
    let os_disk_size_gb = int_field(o, "osDiskSizeGB")?.unwrap_or(0);
    if os_disk_size_gb != 0 && !(30..=2048).contains(&os_disk_size_gb) {
        return Err(invalid(
            "properties.osDiskSizeGB",
            format!(
                "osDiskSizeGB {os_disk_size_gb} is invalid: it must be 0 (VM default) or between \
                    30 and 2048."
            ),
        ));
    }
    Ok(os_disk_size_gb as u32)
}

fn node_taints(o: &Map<String, Value>) -> Result<Vec<String>, ArmError> {
    let node_taints = string_list(o, "nodeTaints")?;
    for t in &node_taints {
        if parse_taint(t).is_none() {
            return Err(invalid(
                "properties.nodeTaints",
                format!(
                    "Taint '{t}' is invalid: expected key=value:effect with effect NoSchedule, \
                        PreferNoSchedule or NoExecute."
                ),
            ));
        }
    }
    Ok(node_taints)
}

fn node_labels(o: &Map<String, Value>) -> Result<BTreeMap<String, String>, ArmError> {
    let node_labels = string_map(o, "nodeLabels")?;
    for (k, v) in &node_labels {
        if !valid_label_key(k) || !valid_label_value(v) {
            return Err(invalid(
                "properties.nodeLabels",
                format!("Node label '{k}={v}' is not a valid Kubernetes label."),
            ));
        }
        if k.starts_with("kubernetes.azure.com/") {
            return Err(invalid(
                "properties.nodeLabels",
                format!("Node label key '{k}' uses the reserved prefix kubernetes.azure.com."),
            ));
        }
    }
    Ok(node_labels)
}

/// A scale set's priority, and what a Spot one does when Azure takes its VMs back.
struct Spot {
    priority: String,
    eviction_policy: Option<String>,
    max_price: Option<f64>,
}

fn spot(o: &Map<String, Value>, mode: &str) -> Result<Spot, ArmError> {
    let priority = enum_field(o, "scaleSetPriority", &["Regular", "Spot"])?
        .unwrap_or("Regular")
        .to_string();
    let spot = priority == "Spot";
    let mut eviction_policy =
        enum_field(o, "scaleSetEvictionPolicy", &["Delete", "Deallocate"])?.map(str::to_string);
    let mut max_price = match o.get("spotMaxPrice") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(v) => return Err(bad_content("spotMaxPrice", v)),
    };
    if !spot && (eviction_policy.is_some() || max_price.is_some()) {
        return Err(invalid(
            "properties.scaleSetEvictionPolicy",
            "scaleSetEvictionPolicy and spotMaxPrice can only be set when scaleSetPriority is Spot.",
        ));
    }
    if spot {
        if let Some(p) = max_price
            && p != -1.0
            && p <= 0.0
        {
            return Err(invalid(
                "properties.spotMaxPrice",
                format!(
                    "spotMaxPrice {p} is invalid: use -1 (up to the on-demand price) or a price \
                        greater than 0."
                ),
            ));
        }
        if mode == "System" {
            return Err(invalid(
                "properties.scaleSetPriority",
                "System node pools cannot use Spot priority.",
            ));
        }
        eviction_policy.get_or_insert_with(|| "Delete".into());
        max_price.get_or_insert(-1.0);
    }
    Ok(Spot {
        priority,
        eviction_policy,
        max_price,
    })
}

/// A MIG profile needs a MIG-capable GPU and an OS SKU whose driver supports it.
fn gpu_instance_profile(
    o: &Map<String, Value>,
    machine: &catalog::Machine,
    vm_size: &str,
    os: &Os,
) -> Result<Option<String>, ArmError> {
    let gpu_instance_profile = enum_field(
        o,
        "gpuInstanceProfile",
        &["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"],
    )?
    .map(str::to_string);
    if let Some(gip) = &gpu_instance_profile {
        let mig = machine.gpu.is_some_and(|(g, _)| !g.mig.is_empty());
        if !mig {
            return Err(invalid(
                "properties.gpuInstanceProfile",
                format!(
                    "GPU instance profile {gip} is not supported on VM size {vm_size}: it has no \
                        MIG-capable GPU."
                ),
            ));
        }
        let os_sku = &os.os_sku;
        if os_sku.starts_with("AzureLinux") || os_sku == "CBLMariner" || os.windows {
            return Err(invalid(
                "properties.gpuInstanceProfile",
                format!("GPU instance profile {gip} is not supported on OSSKU {os_sku}."),
            ));
        }
    }
    Ok(gpu_instance_profile)
}

/// The Kubernetes version, `major.minor` completed to `major.minor.0`; one of the minors AKS
/// offers.
fn orchestrator_version(
    o: &Map<String, Value>,
    existing: Option<&PoolProps>,
) -> Result<String, ArmError> {
    let v = match str_field(o, "orchestratorVersion")? {
        None | Some("") => {
            return Ok(existing
                .map(|e| e.orchestrator_version.clone())
                .unwrap_or_else(|| KUBERNETES_VERSION.into()));
        }
        Some(v) => v,
    };
    let parts: Vec<&str> = v.split('.').collect();
    if !(2..=3).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(invalid(
            "properties.orchestratorVersion",
            format!("Version {v} is not supported in this region."),
        ));
    }
    if parts[0] != "1" || !matches!(parts[1], "31" | "32" | "33" | "34") {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "AgentPoolK8sVersionNotSupported",
            format!(
                "Version {v} is not supported in this region. Supported minor versions: \
                    1.31, 1.32, 1.33, 1.34."
            ),
        ));
    }
    Ok(if parts.len() == 2 {
        format!("{v}.0")
    } else {
        v.to_string()
    })
}

fn max_pods(o: &Map<String, Value>) -> Result<u32, ArmError> {
    let max_pods = int_field(o, "maxPods")?.unwrap_or(30);
    if !(10..=250).contains(&max_pods) {
        return Err(invalid(
            "properties.maxPods",
            format!("maxPods {max_pods} is invalid: it must be between 10 and 250."),
        ));
    }
    Ok(max_pods as u32)
}

fn availability_zones(o: &Map<String, Value>) -> Result<Vec<String>, ArmError> {
    let availability_zones = string_list(o, "availabilityZones")?;
    if let Some(z) = availability_zones
        .iter()
        .find(|z| !matches!(z.as_str(), "1" | "2" | "3"))
    {
        return Err(invalid(
            "properties.availabilityZones",
            format!("Availability zone '{z}' is invalid: use 1, 2 or 3."),
        ));
    }
    Ok(availability_zones)
}

/// Immutable properties a client leaves out keep their value instead of reading as a change.
fn keep_omitted_immutables(props: &mut PoolProps, o: &Map<String, Value>, e: &PoolProps) {
    let given = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    if !given("osDiskSizeGB") {
        props.os_disk_size_gb = e.os_disk_size_gb;
    }
    if !given("scaleSetPriority") {
        props.scale_set_priority = e.scale_set_priority.clone();
    }
    if !given("scaleSetEvictionPolicy") {
        props.scale_set_eviction_policy = e.scale_set_eviction_policy.clone();
    }
    if !given("spotMaxPrice") {
        props.spot_max_price = e.spot_max_price;
    }
    if !given("gpuInstanceProfile") {
        props.gpu_instance_profile = e.gpu_instance_profile.clone();
    }
    if !given("gpuProfile") {
        props.gpu_driver = e.gpu_driver.clone();
    }
    if !given("maxPods") {
        props.max_pods = e.max_pods;
    }
    if !given("availabilityZones") {
        props.availability_zones = e.availability_zones.clone();
    }
}

/// The OS disk size a pool gets: 0 means the VM size's default (128 GB for the GPU sizes here).
pub(super) fn effective_disk(size_gb: u32) -> u32 {
    if size_gb == 0 { 128 } else { size_gb }
}

/// "key=value:Effect" or "key:Effect".
pub(super) fn parse_taint(t: &str) -> Option<(String, String, String)> {
    let (kv, effect) = t.rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
    if !valid_label_key(k) || !valid_label_value(v) {
        return None;
    }
    Some((k.to_string(), v.to_string(), effect.to_string()))
}

/// Azure's rules for a resource's tags (learn.microsoft.com/azure/azure-resource-manager/management/
/// tag-resources, "Limitations"): at most 50 tags; a name of at most 512 characters without
/// `<`, `>`, `%`, `&`, `\`, `?`, `/` or control characters (ARM answers those with
/// `InvalidTagNameCharacters`, "The tag names '...' have reserved characters '<,>,%,&,\,?,/' or
/// control characters.", as the az CLI's docs quote it); a value of at most 256. That is why
/// cluster-autoscaler's Azure provider writes `/` as `_` in its node-template tag names. The code
/// of the other two refusals is not documented; ARM's generic `InvalidParameter` stands for it.
fn check_tags(tags: &BTreeMap<String, String>) -> Result<(), ArmError> {
    const RESERVED: &[char] = &['<', '>', '%', '&', '\\', '?', '/'];
    let bad: Vec<&str> = tags
        .keys()
        .filter(|k| k.chars().any(|c| RESERVED.contains(&c) || c.is_control()))
        .map(String::as_str)
        .collect();
    if !bad.is_empty() {
        return Err(ArmError {
            status: StatusCode::BAD_REQUEST,
            code: "InvalidTagNameCharacters",
            message: format!(
                "The tag names '{}' have reserved characters '<,>,%,&,\\,?,/' or control characters.",
                bad.join(",")
            ),
            target: None,
        });
    }
    if tags.len() > 50 {
        return Err(invalid(
            "properties.tags",
            format!(
                "{} tags exceed the limit of 50 tags per resource.",
                tags.len()
            ),
        ));
    }
    if let Some(k) = tags.keys().find(|k| k.chars().count() > 512) {
        return Err(invalid(
            "properties.tags",
            format!("The tag name '{k}' is longer than 512 characters."),
        ));
    }
    if let Some((k, _)) = tags.iter().find(|(_, v)| v.chars().count() > 256) {
        return Err(invalid(
            "properties.tags",
            format!("The value of tag '{k}' is longer than 256 characters."),
        ));
    }
    Ok(())
}
