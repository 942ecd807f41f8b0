//! Reading EKS request bodies as the service does: required fields, enums, the scaling rules and
//! the service quotas, each failure an InvalidParameterException with EKS's message.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::error::{AwsError, aws, invalid};
use super::world::{EKS_VERSION, MAX_NODES, NgLaunchTemplate, NgSpec, RELEASE_VERSION};
use crate::catalog;
use crate::nodes::{valid_label_key, valid_label_value};

pub(super) fn parse_body(body: &[u8]) -> Result<Map<String, Value>, AwsError> {
    if body.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(aws(
            StatusCode::BAD_REQUEST,
            "BadRequestException",
            "The request body is not a valid JSON object.",
        )),
    }
}

pub(super) fn opt_str<'a>(o: &'a Map<String, Value>, k: &str) -> Result<Option<&'a str>, AwsError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{k} must be a string."))),
    }
}

pub(super) fn opt_int(o: &Map<String, Value>, k: &str) -> Result<Option<i64>, AwsError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(format!("{k} must be an integer."))),
        Some(_) => Err(invalid(format!("{k} must be an integer."))),
    }
}

pub(super) fn str_list(o: &Map<String, Value>, k: &str) -> Result<Option<Vec<String>>, AwsError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(format!("{k} must be a list of strings.")))
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(invalid(format!("{k} must be a list of strings."))),
    }
}

pub(super) fn str_map(v: Option<&Value>, k: &str) -> Result<BTreeMap<String, String>, AwsError> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(a, b)| {
                b.as_str()
                    .map(|b| (a.clone(), b.to_string()))
                    .ok_or_else(|| invalid(format!("{k} values must be strings.")))
            })
            .collect(),
        Some(_) => Err(invalid(format!("{k} must be a map of strings."))),
    }
}

const AMI_TYPES: &[&str] = &[
    "AL2_x86_64",
    "AL2_x86_64_GPU",
    "AL2_ARM_64",
    "CUSTOM",
    "BOTTLEROCKET_ARM_64",
    "BOTTLEROCKET_x86_64",
    "BOTTLEROCKET_ARM_64_FIPS",
    "BOTTLEROCKET_x86_64_FIPS",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA_FIPS",
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS",
    "WINDOWS_CORE_2019_x86_64",
    "WINDOWS_FULL_2019_x86_64",
    "WINDOWS_CORE_2022_x86_64",
    "WINDOWS_FULL_2022_x86_64",
    "AL2023_x86_64_STANDARD",
    "AL2023_ARM_64_STANDARD",
    "AL2023_x86_64_NEURON",
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
];
const TAINT_EFFECTS: &[&str] = &["NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"];

pub(super) fn parse_taints(
    v: Option<&Value>,
    field: &str,
) -> Result<Vec<(String, String, String)>, AwsError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(invalid(format!("{field} must be a list."))),
    };
    if list.len() > 50 {
        return Err(invalid(format!(
            "{field}: a node group can have at most 50 taints."
        )));
    }
    list.iter()
        .map(|t| {
            let t = t
                .as_object()
                .ok_or_else(|| invalid(format!("{field} entries must be objects.")))?;
            let key = opt_str(t, "key")?.unwrap_or("");
            let value = opt_str(t, "value")?.unwrap_or("");
            let effect = opt_str(t, "effect")?.unwrap_or("");
            if !TAINT_EFFECTS.contains(&effect) {
                return Err(invalid(format!(
                    "Taint effect '{effect}' is invalid; valid effects: \
                    NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE."
                )));
            }
            if key.is_empty() || key.len() > 63 + 254 || !valid_label_key(key) {
                return Err(invalid(format!("Taint key '{key}' is invalid.")));
            }
            if !valid_label_value(value) {
                return Err(invalid(format!("Taint value '{value}' is invalid.")));
            }
            Ok((key.to_string(), value.to_string(), effect.to_string()))
        })
        .collect()
}

pub(super) fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), AwsError> {
    for (k, v) in labels {
        if !valid_label_key(k) || !valid_label_value(v) {
            return Err(invalid(format!(
                "Label '{k}={v}' is not a valid Kubernetes label."
            )));
        }
    }
    Ok(())
}

/// A node group scales to zero with minSize 0 and desiredSize 0, but maxSize stays at least 1: the
/// EKS API model types minSize and desiredSize as ZeroCapacity (minimum 0) and maxSize as Capacity
/// (minimum 1), as terraform-provider-aws's `max_size` (IntAtLeast(1)) mirrors.
pub(super) fn check_scaling(min: i64, max: i64, desired: i64) -> Result<(), AwsError> {
    if min < 0 || desired < 0 || max < 1 {
        return Err(invalid(
            "Minimum capacity and desired size must be at least 0 and maximum capacity at least 1.",
        ));
    }
    if max > MAX_NODES {
        return Err(invalid(format!(
            "Maximum capacity {max} exceeds the limit of {MAX_NODES} nodes per managed node group."
        )));
    }
    if min > max {
        return Err(invalid(format!(
            "Minimum capacity {min} can't be greater than maximum capacity {max}."
        )));
    }
    if desired > max {
        return Err(invalid(format!(
            "Desired capacity {desired} can't be greater than max size {max}."
        )));
    }
    if desired < min {
        return Err(invalid(format!(
            "Desired capacity {desired} can't be less than min size {min}."
        )));
    }
    Ok(())
}

/// Amazon Linux 2 AMIs end with Kubernetes 1.32: EKS publishes none for 1.33 and later
/// (awslabs/amazon-eks-ami, "AL2 end of support", 2025-11-26) and refuses the AMI type for a node
/// group of such a version, with this InvalidParameterException message (as CreateNodegroup answers
/// it, quoted in public bug reports such as scylladb/scylla-cluster-tests#12524).
pub(super) fn check_ami_version(ami_type: &str, version: &str) -> Result<(), AwsError> {
    let minor = version
        .strip_prefix("1.")
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if ami_type.starts_with("AL2_") && minor >= 33 {
        return Err(invalid(format!(
            "AMI Type {ami_type} is only supported for kubernetes versions 1.32 or earlier"
        )));
    }
    Ok(())
}

fn valid_ng_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

/// A request's `launchTemplate` (EKS API reference, `LaunchTemplateSpecification`): an id or a
/// name, not both, and an optional version, unresolved (the caller looks the template up). EKS
/// refuses both or neither with "Either provide launch template ID or launch template name in the
/// request." (an UpdateNodegroupVersion answer quoted in eksctl-io/eksctl#3104 and
/// aws-controllers-k8s/community#2645).
pub(super) fn launch_template_spec(
    req: &Map<String, Value>,
) -> Result<Option<NgLaunchTemplate>, AwsError> {
    let lt = match req.get("launchTemplate") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(invalid("launchTemplate must be an object.")),
    };
    let id = opt_str(lt, "id")?.filter(|s| !s.is_empty());
    let name = opt_str(lt, "name")?.filter(|s| !s.is_empty());
    if id.is_some() == name.is_some() {
        return Err(invalid(
            "Either provide launch template ID or launch template name in the request.",
        ));
    }
    Ok(Some(NgLaunchTemplate {
        id: id.unwrap_or_default().to_string(),
        name: name.unwrap_or_default().to_string(),
        version: opt_str(lt, "version")?.unwrap_or_default().to_string(),
        user_data: None,
    }))
}

/// A CreateNodegroup body: the node group's name, its spec with EKS's defaults filled in, and the
/// client's idempotency token. The groups are read in the order the checks ran before they were
/// split, so a body with several faults is answered with the same one.
pub(super) fn parse_create(
    req: &Map<String, Value>,
) -> Result<(String, NgSpec, Option<String>), AwsError> {
    let (name, node_role, subnets) = identity(req)?;
    let (min, max, desired) = create_scaling(req)?;
    let launch_template = launch_template_spec(req)?;
    let machines = machines(req, launch_template.is_some())?;
    let (disk_size, remote_access) = disk_and_access(req, launch_template.is_some())?;
    let labels = str_map(req.get("labels"), "labels")?;
    check_labels(&labels)?;
    let taints = parse_taints(req.get("taints"), "taints")?;
    let version = opt_str(req, "version")?.unwrap_or(EKS_VERSION);
    if version != EKS_VERSION && !["1.31", "1.32"].contains(&version) {
        return Err(invalid(format!(
            "Requested Nodegroup version {version} is invalid. Nodegroup version cannot be newer \
                than the cluster version {EKS_VERSION} and at most 2 minor versions older."
        )));
    }
    check_ami_version(machines.ami_type, version)?;
    let max_unavailable = match req.get("updateConfig") {
        Some(Value::Object(u)) => opt_int(u, "maxUnavailable")?.unwrap_or(1),
        _ => 1,
    };
    let token = opt_str(req, "clientRequestToken")?.map(str::to_string);
    let tags = create_tags(req)?;
    Ok((
        name.to_string(),
        NgSpec {
            capacity_type: machines.capacity_type.to_string(),
            min_size: min,
            max_size: max,
            desired_size: desired,
            instance_types: machines.instance_types,
            subnets,
            ami_type: machines.ami_type.to_string(),
            node_role: node_role.to_string(),
            labels,
            taints,
            disk_size,
            remote_access,
            launch_template,
            tags,
            version: version.to_string(),
            release_version: if version == EKS_VERSION {
                RELEASE_VERSION.to_string()
            } else {
                format!("{version}.10-20251120")
            },
            max_unavailable,
        },
        token,
    ))
}

/// Who the node group is: its name, the IAM role its nodes assume and the subnets they join.
fn identity(req: &Map<String, Value>) -> Result<(&str, &str, Vec<String>), AwsError> {
    let name =
        opt_str(req, "nodegroupName")?.ok_or_else(|| invalid("nodegroupName is required."))?;
    if !valid_ng_name(name) {
        return Err(invalid(format!(
            "Nodegroup name '{name}' is invalid: it must be 1-63 characters, start with a letter \
                or digit, and contain only letters, digits, hyphens and underscores."
        )));
    }
    let node_role = opt_str(req, "nodeRole")?.ok_or_else(|| invalid("nodeRole is required."))?;
    if !node_role.starts_with("arn:aws:iam::") || !node_role.contains(":role/") {
        return Err(invalid(format!(
            "The provided role ARN '{node_role}' is not a valid IAM role ARN."
        )));
    }
    let subnets = str_list(req, "subnets")?.unwrap_or_default();
    if subnets.is_empty() {
        return Err(invalid("subnets must contain at least one subnet id."));
    }
    if let Some(s) = subnets.iter().find(|s| !s.starts_with("subnet-")) {
        return Err(invalid(format!("The subnet ID '{s}' does not exist")));
    }
    Ok((name, node_role, subnets))
}

/// A new group's (min, max, desired), with EKS's defaults for what the body leaves out.
fn create_scaling(req: &Map<String, Value>) -> Result<(i64, i64, i64), AwsError> {
    let (min, max, desired) = match req.get("scalingConfig") {
        None | Some(Value::Null) => (2, 2, 2),
        Some(Value::Object(sc)) => {
            let min = opt_int(sc, "minSize")?.unwrap_or(1);
            let max = opt_int(sc, "maxSize")?.unwrap_or(2);
            let desired = opt_int(sc, "desiredSize")?.unwrap_or(min.max(1).min(max));
            (min, max, desired)
        }
        Some(_) => return Err(invalid("scalingConfig must be an object.")),
    };
    check_scaling(min, max, desired)?;
    Ok((min, max, desired))
}

/// What the nodes run on: the instance types, how they are bought, and the AMI type.
struct Machines<'a> {
    instance_types: Vec<String>,
    capacity_type: &'a str,
    ami_type: &'a str,
}

/// Without a launch template, a group gets t3.medium and an AMI type that fits its first instance
/// type; with one, the template says (no instance types, a CUSTOM AMI).
fn machines(req: &Map<String, Value>, with_template: bool) -> Result<Machines<'_>, AwsError> {
    let instance_types = str_list(req, "instanceTypes")?;
    if let Some(types) = &instance_types {
        for t in types {
            if catalog::aws_instance_type(t).is_none() {
                return Err(invalid(format!("Instance type '{t}' is not supported.")));
            }
        }
    }
    let capacity_type = opt_str(req, "capacityType")?.unwrap_or("ON_DEMAND");
    if !["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"].contains(&capacity_type) {
        return Err(invalid(format!(
            "Capacity type '{capacity_type}' is invalid; valid values: ON_DEMAND, SPOT, \
                CAPACITY_BLOCK."
        )));
    }
    let instance_types = instance_types.filter(|t| !t.is_empty()).unwrap_or_else(|| {
        if with_template {
            vec![]
        } else {
            vec!["t3.medium".into()]
        }
    });
    if capacity_type != "SPOT" && instance_types.len() > 1 {
        return Err(invalid(
            "Multiple instance types are only supported with capacityType SPOT.",
        ));
    }
    let gpu = instance_types
        .first()
        .and_then(|t| catalog::aws_instance_type(t))
        .is_some_and(|m| m.gpu.is_some());
    let ami_type = match opt_str(req, "amiType")? {
        Some(a) if !AMI_TYPES.contains(&a) => {
            return Err(invalid(format!(
                "AMI type '{a}' is invalid; valid values: {}.",
                AMI_TYPES.join(", ")
            )));
        }
        Some(a) => a,
        None if with_template => "CUSTOM",
        None if gpu => "AL2023_x86_64_NVIDIA",
        None => "AL2023_x86_64_STANDARD",
    };
    let needs_gpu = ami_type.contains("GPU") || ami_type.contains("NVIDIA");
    if needs_gpu && !gpu && !instance_types.is_empty() {
        return Err(invalid(format!(
            "Instance type {} is not supported with AMI type {ami_type}: it has no NVIDIA GPU.",
            instance_types[0]
        )));
    }
    Ok(Machines {
        instance_types,
        capacity_type,
        ami_type,
    })
}

/// The disk size (20 GiB unless given) and the SSH access, both of which a launch template holds
/// instead when there is one.
fn disk_and_access(
    req: &Map<String, Value>,
    with_template: bool,
) -> Result<(Option<i64>, Option<Value>), AwsError> {
    let disk_size = opt_int(req, "diskSize")?;
    if disk_size.is_some() && with_template {
        return Err(invalid(
            "Disk size must be specified within the launch template.",
        ));
    }
    let remote_access = req.get("remoteAccess").filter(|v| !v.is_null()).cloned();
    // EKS user guide, "Customizing managed nodes with launch templates": remote access (an SSH key)
    // goes in the launch template; EKS refuses it beside one with this message (as moto's
    // eks/models.py LAUNCH_TEMPLATE_WITH_REMOTE_ACCESS_MSG quotes it).
    if remote_access.is_some() && with_template {
        return Err(invalid(
            "Remote access configuration cannot be specified with a launch template.",
        ));
    }
    if let Some(d) = disk_size
        && !(1..=16384).contains(&d)
    {
        return Err(invalid(format!(
            "diskSize {d} is invalid: it must be between 1 and 16384 GiB."
        )));
    }
    let disk_size = if with_template {
        None
    } else {
        Some(disk_size.unwrap_or(20))
    };
    Ok((disk_size, remote_access))
}

/// The node group's own tags: at most 50, keys of 1-128 characters outside the reserved `aws:`.
fn create_tags(req: &Map<String, Value>) -> Result<BTreeMap<String, String>, AwsError> {
    let tags = str_map(req.get("tags"), "tags")?;
    if let Some(k) = tags
        .keys()
        .find(|k| k.to_ascii_lowercase().starts_with("aws:") || k.is_empty() || k.len() > 128)
    {
        return Err(invalid(format!(
            "Tag key '{k}' is invalid: keys are 1-128 characters and the aws: prefix is reserved."
        )));
    }
    if tags.len() > 50 {
        return Err(invalid("A resource can have at most 50 tags."));
    }
    Ok(tags)
}
