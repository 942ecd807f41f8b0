//! Agent pool documents in the provider's neutral terms and back. Values AKS fills in on its own
//! (the OS disk size and SKU a create left to it, the Spot label and taint) read back as "not
//! set", so that drift is a plain comparison of [`PoolSpec`]s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::client::AksClient;
use super::template;
use crate::cloud::error::{CloudError, Detail};
use crate::cloud::pool::{
    AksPoolFields, Location, Pool, PoolSpec, PoolTaint, Scaling, TargetFields,
};

/// The pool tag listing the optional fields a create left to AKS's defaults.
pub(super) const DEFAULTS_TAG: &str = "fracgpu-cloud-defaults";

/// What AKS uses when osDiskSizeGB / osSKU are not given (Linux, managed OS disk).
const AKS_DEFAULT_OS_DISK_GB: u32 = 128;
pub(super) const AKS_DEFAULT_OS_SKU: &str = "Ubuntu";
/// AKS adds this label and taint to every Spot pool itself.
pub(super) const SPOT_KEY: &str = "kubernetes.azure.com/scalesetpriority";

impl AksClient {
    /// The ARM resource ID of a pool.
    pub fn pool_id(location: &Location, name: &str) -> Result<String, CloudError> {
        let (sub, rg, cluster) = aks_location(location)?;
        Ok(format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{cluster}/agentPools/{name}"
        ))
    }
}

/// The agent pool fields the provider reads and writes.
#[derive(Serialize, Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct AgentPoolProps {
    #[serde(skip_serializing_if = "Option::is_none")]
    vm_size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_auto_scaling: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_count: Option<u32>,
    #[serde(rename = "osDiskSizeGB", skip_serializing_if = "Option::is_none")]
    os_disk_size_gb: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    os_type: Option<String>,
    #[serde(rename = "osSKU", skip_serializing_if = "Option::is_none")]
    os_sku: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_taints: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale_set_priority: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale_set_eviction_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spot_max_price: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_instance_profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_profile: Option<GpuProfile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing)]
    provisioning_state: Option<String>,
}

/// `gpuProfile`: whether AKS installs the NVIDIA driver (`Install`, its default) or leaves it to
/// the GPU operator (`None`).
#[derive(Serialize, Deserialize, Default, Debug)]
struct GpuProfile {
    #[serde(skip_serializing_if = "Option::is_none")]
    driver: Option<String>,
}

#[derive(Serialize, Deserialize, Default, Debug)]
struct AgentPool {
    #[serde(skip_serializing)]
    id: Option<String>,
    #[serde(default)]
    properties: AgentPoolProps,
}

pub(super) fn aks_location(location: &Location) -> Result<(&str, &str, &str), CloudError> {
    match location {
        Location::Aks {
            subscription_id,
            resource_group,
            cluster,
        } => Ok((subscription_id, resource_group, cluster)),
        other => Err(CloudError::Api {
            status: 400,
            code: "WrongCloud".into(),
            message: format!(
                "the AKS client was handed a {} location",
                other.target().title()
            ),
        }),
    }
}

pub(super) fn cluster_name(location: &Location) -> &str {
    aks_location(location).map(|(_, _, c)| c).unwrap_or("?")
}

fn taint_string(t: &PoolTaint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect)
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect)
    }
}

fn parse_taint(s: &str) -> PoolTaint {
    let (kv, effect) = s.rsplit_once(':').unwrap_or((s, ""));
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    PoolTaint {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    }
}

fn is_spot_taint(s: &str) -> bool {
    parse_taint(s).key == SPOT_KEY
}

pub(super) fn create_body(spec: &PoolSpec) -> Value {
    let mut defaults = Vec::new();
    if spec.disk_size_gb.is_none() {
        defaults.push("osDiskSizeGB");
    }
    if spec.aks().os_sku.is_none() {
        defaults.push("osSKU");
    }
    let (count, auto, min, max) = match spec.scaling {
        Scaling::Fixed { nodes } => (nodes, false, None, None),
        Scaling::Auto { min, max } => (min, true, Some(min), Some(max)),
    };
    let props = AgentPoolProps {
        vm_size: Some(spec.machine_type.clone()),
        count: Some(count),
        enable_auto_scaling: Some(auto),
        min_count: min,
        max_count: max,
        os_disk_size_gb: spec.disk_size_gb,
        os_type: Some("Linux".into()),
        os_sku: spec.aks().os_sku.clone(),
        node_labels: Some(spec.labels.clone()),
        node_taints: Some(spec.taints.iter().map(taint_string).collect()),
        scale_set_priority: Some(if spec.spot { "Spot" } else { "Regular" }.into()),
        scale_set_eviction_policy: spec.spot.then(|| "Delete".into()),
        spot_max_price: spec.spot.then_some(-1.0),
        gpu_instance_profile: spec.aks().gpu_instance_profile.clone(),
        gpu_profile: spec.aks().gpu_driver.clone().map(|driver| GpuProfile {
            driver: Some(driver),
        }),
        mode: Some("User".into()),
        tags: Some(
            spec.node_template
                .clone()
                .into_iter()
                .chain([(DEFAULTS_TAG.to_string(), defaults.join(","))])
                .collect(),
        ),
        provisioning_state: None,
    };
    serde_json::to_value(AgentPool {
        id: None,
        properties: props,
    })
    .unwrap_or(Value::Null)
}

/// The pool as GET returned it with only the in-place fields set to `spec`: a PUT of the whole pool keeps
/// everything the provider does not manage (orchestratorVersion, zones, maxPods, tags, ...).
pub(super) fn update_body(doc: &Value, spec: &PoolSpec) -> Value {
    let mut props: Map<String, Value> = doc
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for read_only in [
        "provisioningState",
        "currentOrchestratorVersion",
        "nodeImageVersion",
    ] {
        props.remove(read_only);
    }
    if left_to_aks(&props, "osDiskSizeGB") {
        // The size AKS chose is not ours to pin: leave it out, as the create did.
        props.remove("osDiskSizeGB");
    }
    if let Some(sku) = &spec.aks().os_sku {
        // An OS migration (a reimage); from now on the SKU is the user's, not AKS's default.
        props.insert("osSKU".into(), sku.clone().into());
        let kept: Vec<String> = defaulted_fields(&props)
            .into_iter()
            .filter(|f| f != "osSKU")
            .collect();
        if let Some(Value::Object(tags)) = props.get_mut("tags")
            && tags.contains_key(DEFAULTS_TAG)
        {
            tags.insert(DEFAULTS_TAG.into(), kept.join(",").into());
        }
    }
    let current_count = props.get("count").and_then(Value::as_u64).unwrap_or(0) as u32;
    match spec.scaling {
        Scaling::Fixed { nodes } => {
            props.insert("count".into(), nodes.into());
            props.insert("enableAutoScaling".into(), false.into());
            props.remove("minCount");
            props.remove("maxCount");
        }
        Scaling::Auto { min, max } => {
            props.insert(
                "count".into(),
                current_count.clamp(min, max.max(min)).into(),
            );
            props.insert("enableAutoScaling".into(), true.into());
            props.insert("minCount".into(), min.into());
            props.insert("maxCount".into(), max.into());
        }
    }
    // Keep the Spot label and taint AKS itself puts on Spot pools.
    let mut labels: Map<String, Value> = spec
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if let Some(v) = props
        .get("nodeLabels")
        .and_then(|l| l.get(SPOT_KEY))
        .cloned()
    {
        labels.insert(SPOT_KEY.into(), v);
    }
    let mut taints: Vec<Value> = spec
        .taints
        .iter()
        .map(|t| Value::String(taint_string(t)))
        .collect();
    if let Some(Value::Array(old)) = props.get("nodeTaints") {
        taints.extend(
            old.iter()
                .filter(|t| t.as_str().is_some_and(is_spot_taint))
                .cloned(),
        );
    }
    props.insert("nodeLabels".into(), Value::Object(labels));
    props.insert("nodeTaints".into(), Value::Array(taints));
    // The autoscaler's template is the provider's: its tags replaced whole, every other tag kept.
    let mut tags = match props.remove("tags") {
        Some(Value::Object(t)) => t,
        _ => Map::new(),
    };
    tags.retain(|k, _| !template::is_template_tag(k));
    for (k, v) in &spec.node_template {
        tags.insert(k.clone(), Value::String(v.clone()));
    }
    // Sent even when empty: a PUT without `tags` is no promise that AKS drops the old ones.
    props.insert("tags".into(), Value::Object(tags));
    serde_json::json!({ "properties": props })
}

/// The optional fields a create by this provider left to AKS (from the pool's tag); None for a pool
/// without the tag.
fn defaulted_fields(props: &Map<String, Value>) -> Vec<String> {
    props
        .get("tags")
        .and_then(|t| t.get(DEFAULTS_TAG))
        .and_then(Value::as_str)
        .map(|s| {
            s.split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an optional field's value was chosen by AKS: the tag says so for pools this provider made;
/// for others, a value equal to AKS's documented default counts as chosen by AKS.
fn left_to_aks(props: &Map<String, Value>, field: &str) -> bool {
    let tagged = props
        .get("tags")
        .and_then(|t| t.get(DEFAULTS_TAG))
        .is_some();
    if tagged {
        return defaulted_fields(props).iter().any(|f| f == field);
    }
    match field {
        "osDiskSizeGB" => props
            .get(field)
            .and_then(Value::as_u64)
            .is_none_or(|d| d == 0 || d == u64::from(AKS_DEFAULT_OS_DISK_GB)),
        "osSKU" => props
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(|s| s.eq_ignore_ascii_case(AKS_DEFAULT_OS_SKU)),
        _ => false,
    }
}

pub(super) fn provisioning_state(doc: &Value) -> String {
    doc.pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Some(true) Succeeded, Some(false) Failed/Canceled, None still running.
pub(super) fn terminal(state: &str) -> Option<bool> {
    if state.eq_ignore_ascii_case("Succeeded") {
        Some(true)
    } else if state.eq_ignore_ascii_case("Failed") || state.eq_ignore_ascii_case("Canceled") {
        Some(false)
    } else {
        None
    }
}

/// A pool from one of the cluster document's `agentPoolProfiles` (the agent pool's properties
/// beside its name), read as [`to_pool`] reads the agent pool's own document; its ARM id is the
/// cluster's (`cluster_id`, as ARM spells it) with `/agentPools/<name>`.
pub(super) fn profile_to_pool(
    location: &Location,
    cluster_id: Option<&str>,
    profile: &Value,
) -> Result<Pool, CloudError> {
    let name = profile["name"]
        .as_str()
        .ok_or_else(|| CloudError::BadResponse("an agent pool profile has no name".into()))?;
    let mut properties = profile.as_object().cloned().unwrap_or_default();
    properties.remove("name");
    let mut doc = serde_json::json!({ "name": name, "properties": properties });
    if let Some(cluster) = cluster_id {
        doc["id"] = format!("{cluster}/agentPools/{name}").into();
    }
    to_pool(location, name, &doc)
}

/// The pool document in the provider's terms. Values AKS chose by itself read back as "not set".
pub(super) fn to_pool(location: &Location, name: &str, doc: &Value) -> Result<Pool, CloudError> {
    let ap: AgentPool = serde_json::from_value(doc.clone()).map_err(|e| {
        CloudError::BadResponse(Detail::caused_by(format!("agent pool document: {e}"), e))
    })?;
    let p = ap.properties;
    let raw_props = doc
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let spot = p
        .scale_set_priority
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("Spot"));
    let disk_size_gb = p
        .os_disk_size_gb
        .filter(|_| !left_to_aks(&raw_props, "osDiskSizeGB"));
    let os_sku = p
        .os_sku
        .clone()
        .filter(|_| !left_to_aks(&raw_props, "osSKU"));
    let mut labels = p.node_labels.unwrap_or_default();
    let mut taints: Vec<PoolTaint> = p
        .node_taints
        .unwrap_or_default()
        .iter()
        .filter(|t| !(spot && is_spot_taint(t)))
        .map(|t| parse_taint(t))
        .collect();
    if spot {
        labels.remove(SPOT_KEY);
    }
    taints.retain(|t| !t.key.is_empty());
    let scaling = if p.enable_auto_scaling.unwrap_or(false) {
        Scaling::Auto {
            min: p.min_count.unwrap_or(0),
            max: p.max_count.unwrap_or(0),
        }
    } else {
        Scaling::Fixed {
            nodes: p.count.unwrap_or(0),
        }
    };
    let machine_type = p.vm_size.unwrap_or_default();
    let gpu_count = gpu::machine_type(gpu::Cloud::Aks, &machine_type)
        .map(|m| m.gpu_count)
        .unwrap_or(0);
    let id = match ap.id {
        Some(id) => id,
        None => AksClient::pool_id(location, name)?,
    };
    Ok(Pool {
        id,
        status: p.provisioning_state.unwrap_or_default(),
        spec: PoolSpec {
            location: location.clone(),
            name: name.to_string(),
            machine_type,
            scaling,
            spot,
            disk_size_gb,
            labels,
            taints,
            gpu_count,
            node_template: template::of_tags(&p.tags.unwrap_or_default()),
            target: TargetFields::Aks(AksPoolFields {
                gpu_instance_profile: p.gpu_instance_profile,
                gpu_driver: p.gpu_profile.and_then(|g| g.driver),
                os_sku,
            }),
        },
    })
}

/// Fields AKS changes with a PUT of the pool; everything else needs a new pool. `os_sku` only
/// within the families [`os_sku_changes_in_place`] allows.
pub(super) const IN_PLACE: &[&str] = &["scaling", "labels", "taints", "os_sku", "node_template"];

/// Whether AKS changes a pool's OS SKU in place. It migrates a pool between the Ubuntu and Azure
/// Linux families by reimaging its nodes (`az aks nodepool update --os-sku`); any other change needs
/// a new pool, where terraform-provider-azurerm draws the line too. None is AKS's default, Ubuntu.
pub fn os_sku_changes_in_place(old: Option<&str>, new: Option<&str>) -> bool {
    let old = old.unwrap_or(AKS_DEFAULT_OS_SKU);
    let new = new.unwrap_or(AKS_DEFAULT_OS_SKU);
    let family = |s: &str| s.starts_with("Ubuntu") || s.starts_with("AzureLinux");
    old == new || (family(old) && family(new))
}

/// Names of the fields in which two specs differ.
pub(super) fn spec_diff(a: &PoolSpec, b: &PoolSpec) -> Vec<&'static str> {
    let mut d = Vec::new();
    if a.location != b.location {
        d.push("location");
    }
    if a.name != b.name {
        d.push("name");
    }
    if !a.machine_type.eq_ignore_ascii_case(&b.machine_type) {
        d.push("machine_type");
    }
    if a.scaling != b.scaling {
        d.push("scaling");
    }
    if a.spot != b.spot {
        d.push("spot");
    }
    if a.disk_size_gb != b.disk_size_gb {
        d.push("disk_size_gb");
    }
    if a.labels != b.labels {
        d.push("labels");
    }
    if a.taints != b.taints {
        d.push("taints");
    }
    if a.aks().gpu_instance_profile != b.aks().gpu_instance_profile {
        d.push("gpu_instance_profile");
    }
    // Not set means AKS's default, Install, which AKS may or may not report back.
    let driver = |s: &PoolSpec| {
        s.aks()
            .gpu_driver
            .clone()
            .unwrap_or_else(|| "Install".into())
    };
    if driver(a) != driver(b) {
        d.push("gpu_driver");
    }
    if a.aks().os_sku != b.aks().os_sku {
        d.push("os_sku");
    }
    if a.node_template != b.node_template {
        d.push("node_template");
    }
    d
}
