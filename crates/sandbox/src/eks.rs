//! Amazon EKS managed node groups (restJson1): clusters (list, describe), node groups (create,
//! describe, list, delete, update-config, update-version) and updates (describe, list).
//!
//! Written from the EKS API reference. Errors are restJson1: the type in the `x-amzn-ErrorType`
//! header and a JSON body `{"message": ...}` (plus clusterName/nodegroupName where EKS adds them).
//! Requests must carry a well-formed SigV4 `Authorization` header; the signature itself is not
//! checked (any key works), but the credential scope's region selects the cluster's region.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::catalog;
use super::dates::epoch_secs;
use super::nodes::{NodeEvent, PoolNodes, k8s_effect};
use super::util::{json_response, query_get, segments};
use super::{AWS_ACCOUNT, Ctx, Sandbox, World};

pub const EKS_VERSION: &str = "1.33";
/// EKS service quota: nodes per managed node group.
pub const MAX_NODES: i64 = 450;
pub const RELEASE_VERSION: &str = "1.33.5-20251120";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct EksWorld {
    /// Keyed by "region/cluster".
    pub clusters: BTreeMap<String, EksCluster>,
    pub updates: BTreeMap<String, EksUpdate>,
    /// Node groups with an operation in flight, by (deadline, cluster key, node group).
    #[serde(default)]
    pub pending: std::collections::BTreeSet<(u64, String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EksCluster {
    pub region: String,
    pub name: String,
    pub created_at: u64,
    pub nodegroups: BTreeMap<String, Nodegroup>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Nodegroup {
    pub name: String,
    pub uid: String,
    pub created_at: u64,
    pub modified_at: u64,
    /// CREATING | ACTIVE | UPDATING | DELETING | CREATE_FAILED | DELETE_FAILED | DEGRADED
    pub status: String,
    pub spec: NgSpec,
    pub health_issues: Vec<Value>,
    pub client_request_token: Option<String>,
    pub pending: Option<Pending>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NgSpec {
    pub capacity_type: String,
    pub min_size: i64,
    pub max_size: i64,
    pub desired_size: i64,
    pub instance_types: Vec<String>,
    pub subnets: Vec<String>,
    pub ami_type: String,
    pub node_role: String,
    pub labels: BTreeMap<String, String>,
    /// (key, value, NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE)
    pub taints: Vec<(String, String, String)>,
    pub disk_size: Option<i64>,
    pub remote_access: Option<Value>,
    pub launch_template: Option<Value>,
    pub tags: BTreeMap<String, String>,
    pub version: String,
    pub release_version: String,
    pub max_unavailable: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub kind: Kind,
    pub update_id: Option<String>,
    pub deadline: u64,
    pub fail: bool,
    pub previous: Option<Box<NgSpec>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EksUpdate {
    pub id: String,
    pub cluster_key: String,
    pub nodegroup: String,
    /// ConfigUpdate | VersionUpdate
    pub update_type: String,
    /// InProgress | Failed | Cancelled | Successful
    pub status: String,
    pub params: Vec<(String, String)>,
    pub created_at: u64,
    pub deadline: u64,
    pub errors: Vec<Value>,
}

impl EksWorld {
    pub fn add_cluster(&mut self, region: &str, name: &str) {
        let c = EksCluster {
            region: region.into(),
            name: name.into(),
            created_at: 1_764_460_800_000,
            nodegroups: BTreeMap::new(),
        };
        self.clusters.insert(format!("{region}/{name}"), c);
    }

    pub(crate) fn settle(&mut self, now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let mut changed = false;
        while let Some((deadline, key, name)) = self.pending.first().cloned() {
            if deadline > now {
                break;
            }
            self.pending.pop_first();
            let Some(c) = self.clusters.get_mut(&key) else {
                continue;
            };
            changed = true;
            let Some(ng) = c.nodegroups.get_mut(&name) else {
                continue;
            };
            let Some(p) = ng.pending.take_if(|p| p.deadline <= now) else {
                continue;
            };
            ng.modified_at = now;
            let update = p.update_id.as_ref().and_then(|id| self.updates.get_mut(id));
            if p.fail {
                let issue = json!({"code": "AsgInstanceLaunchFailures", "message": format!("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient {} capacity in the Availability Zone you requested (sandbox fault injection).", ng.spec.instance_types.join(",")), "resourceIds": [format!("eks-{}-{}", name, ng.uid)]});
                match p.kind {
                    Kind::Create => {
                        ng.status = "CREATE_FAILED".into();
                        ng.health_issues = vec![issue];
                    }
                    Kind::Update => {
                        if let Some(prev) = p.previous {
                            ng.spec = *prev;
                        }
                        ng.status = "ACTIVE".into();
                        if let Some(u) = update {
                            u.status = "Failed".into();
                            u.errors = vec![
                                json!({"errorCode": "AsgInstanceLaunchFailures", "errorMessage": issue["message"], "resourceIds": issue["resourceIds"]}),
                            ];
                        }
                    }
                    Kind::Delete => {
                        ng.status = "DELETE_FAILED".into();
                        ng.health_issues = vec![issue];
                    }
                }
                continue;
            }
            if let Some(u) = update {
                u.status = "Successful".into();
            }
            if p.kind == Kind::Delete {
                c.nodegroups.remove(&name);
                events.push(NodeEvent::Deleted {
                    cloud: "eks",
                    cluster: c.name.clone(),
                    pool: name,
                });
            } else {
                ng.status = "ACTIVE".into();
                events.push(NodeEvent::Changed(pool_nodes(&c.name, ng)));
            }
        }
        changed
    }
}

/// The nodes EKS creates for a node group, with EKS's node labels.
pub fn pool_nodes(cluster: &str, ng: &Nodegroup) -> PoolNodes {
    let s = &ng.spec;
    let itype = s.instance_types.first().cloned().unwrap_or_default();
    let mut labels = BTreeMap::new();
    labels.insert("eks.amazonaws.com/nodegroup".to_string(), ng.name.clone());
    labels.insert(
        "eks.amazonaws.com/nodegroup-image".to_string(),
        format!("ami-0{:016x}", fastrand_stable(&s.ami_type)),
    );
    labels.insert(
        "eks.amazonaws.com/capacityType".to_string(),
        s.capacity_type.clone(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        itype.clone(),
    );
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    for (k, v) in &s.labels {
        labels.insert(k.clone(), v.clone());
    }
    let gpu = catalog::aws_instance_type(&itype).and_then(|m| m.gpu);
    PoolNodes {
        cloud: "eks",
        cluster: cluster.to_string(),
        pool: ng.name.clone(),
        node_count: s.desired_size.max(1) as u32,
        labels,
        taints: s
            .taints
            .iter()
            .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string()))
            .collect(),
        gpu_product: gpu.map(|(g, _)| g.product.to_string()),
        gpus_per_node: gpu.map_or(0, |(_, n)| n),
        gpu_memory_mib: gpu.map_or(0, |(g, _)| g.memory_mib),
        // EKS has no MIG field: MIG comes from the GPU operator's MIG manager, not the node group.
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
    }
}

fn fastrand_stable(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) >> 4
}

// ---------------------------------------------------------------- errors

pub struct AwsError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    extra: Vec<(&'static str, String)>,
}

fn aws(status: StatusCode, kind: &'static str, message: impl Into<String>) -> AwsError {
    AwsError {
        status,
        kind,
        message: message.into(),
        extra: Vec::new(),
    }
}

fn invalid(message: impl Into<String>) -> AwsError {
    aws(
        StatusCode::BAD_REQUEST,
        "InvalidParameterException",
        message,
    )
}

impl AwsError {
    fn with(mut self, k: &'static str, v: &str) -> Self {
        self.extra.push((k, v.to_string()));
        self
    }
    fn into_response(self) -> Response {
        let mut body = json!({ "message": self.message });
        for (k, v) in self.extra {
            body[k] = json!(v);
        }
        let mut r = json_response(self.status, &body);
        r.headers_mut()
            .insert("x-amzn-errortype", HeaderValue::from_static(self.kind));
        r
    }
}

// ---------------------------------------------------------------- SigV4

/// Check the shape of a SigV4 Authorization header and return the credential scope's region.
fn sigv4_region(headers: &HeaderMap) -> Result<String, AwsError> {
    let forbidden = |kind: &'static str, m: &str| aws(StatusCode::FORBIDDEN, kind, m);
    let Some(auth) = headers.get("authorization").and_then(|h| h.to_str().ok()) else {
        return Err(forbidden(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ));
    };
    let incomplete = |m: &str| forbidden("IncompleteSignatureException", m);
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return Err(incomplete(
            "Authorization header requires the AWS4-HMAC-SHA256 algorithm.",
        ));
    };
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        return Err(incomplete(
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.",
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    if scope.len() != 5
        || scope[0].is_empty()
        || scope[1].len() != 8
        || !scope[1].bytes().all(|b| b.is_ascii_digit())
        || scope[4] != "aws4_request"
    {
        return Err(incomplete(
            "Credential must have the form <key>/<yyyymmdd>/<region>/eks/aws4_request.",
        ));
    }
    if scope[3] != "eks" {
        return Err(forbidden(
            "InvalidSignatureException",
            "Credential should be scoped to correct service: 'eks'.",
        ));
    }
    if signature.len() != 64 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(incomplete("Signature must be 64 hexadecimal characters."));
    }
    let signed: Vec<&str> = signed.split(';').collect();
    if !signed.contains(&"host") {
        return Err(incomplete("SignedHeaders must include 'host'."));
    }
    let date = headers
        .get("x-amz-date")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if date.len() != 16 || !date.starts_with(scope[1]) {
        return Err(incomplete(
            "X-Amz-Date header missing or not matching the credential scope date.",
        ));
    }
    Ok(scope[2].to_string())
}

// ---------------------------------------------------------------- documents

fn ng_arn(c: &EksCluster, ng: &Nodegroup) -> String {
    format!(
        "arn:aws:eks:{}:{AWS_ACCOUNT}:nodegroup/{}/{}/{}",
        c.region, c.name, ng.name, ng.uid
    )
}

fn secs(ms: u64) -> Value {
    json!(epoch_secs(ms))
}

pub fn nodegroup_json(c: &EksCluster, ng: &Nodegroup) -> Value {
    let s = &ng.spec;
    let mut v = json!({
        "nodegroupName": ng.name,
        "nodegroupArn": ng_arn(c, ng),
        "clusterName": c.name,
        "version": s.version,
        "releaseVersion": s.release_version,
        "createdAt": secs(ng.created_at),
        "modifiedAt": secs(ng.modified_at),
        "status": ng.status,
        "capacityType": s.capacity_type,
        "scalingConfig": {"minSize": s.min_size, "maxSize": s.max_size, "desiredSize": s.desired_size},
        "instanceTypes": s.instance_types,
        "subnets": s.subnets,
        "amiType": s.ami_type,
        "nodeRole": s.node_role,
        "labels": s.labels,
        "taints": s.taints.iter().map(|(k, v, e)| json!({"key": k, "value": v, "effect": e})).collect::<Vec<_>>(),
        "resources": {"autoScalingGroups": [{"name": format!("eks-{}-{}", ng.name, ng.uid)}]},
        "health": {"issues": ng.health_issues},
        "updateConfig": {"maxUnavailable": s.max_unavailable},
        "tags": s.tags,
    });
    if let Some(d) = s.disk_size {
        v["diskSize"] = json!(d);
    }
    if let Some(r) = &s.remote_access {
        v["remoteAccess"] = r.clone();
    }
    if let Some(lt) = &s.launch_template {
        v["launchTemplate"] = lt.clone();
    }
    v
}

fn update_json(u: &EksUpdate) -> Value {
    json!({
        "id": u.id,
        "status": u.status,
        "type": u.update_type,
        "params": u.params.iter().map(|(t, v)| json!({"type": t, "value": v})).collect::<Vec<_>>(),
        "createdAt": secs(u.created_at),
        "errors": u.errors,
    })
}

fn cluster_json(c: &EksCluster) -> Value {
    json!({
        "name": c.name,
        "arn": format!("arn:aws:eks:{}:{AWS_ACCOUNT}:cluster/{}", c.region, c.name),
        "createdAt": secs(c.created_at),
        "version": EKS_VERSION,
        "endpoint": format!("https://{}.sandbox.eks.local", c.name),
        "roleArn": format!("arn:aws:iam::{AWS_ACCOUNT}:role/{}-cluster-role", c.name),
        "resourcesVpcConfig": {"subnetIds": ["subnet-0sandbox1", "subnet-0sandbox2"], "securityGroupIds": [], "vpcId": "vpc-0sandbox", "endpointPublicAccess": true, "endpointPrivateAccess": false},
        "kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.100.0.0/16", "ipFamily": "ipv4"},
        "status": "ACTIVE",
        "certificateAuthority": {"data": ""},
        "platformVersion": "eks.10",
        "tags": {},
    })
}

// ---------------------------------------------------------------- request parsing

fn parse_body(body: &[u8]) -> Result<Map<String, Value>, AwsError> {
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

fn opt_str<'a>(o: &'a Map<String, Value>, k: &str) -> Result<Option<&'a str>, AwsError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{k} must be a string."))),
    }
}

fn opt_int(o: &Map<String, Value>, k: &str) -> Result<Option<i64>, AwsError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(format!("{k} must be an integer."))),
        Some(_) => Err(invalid(format!("{k} must be an integer."))),
    }
}

fn str_list(o: &Map<String, Value>, k: &str) -> Result<Option<Vec<String>>, AwsError> {
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

fn str_map(v: Option<&Value>, k: &str) -> Result<BTreeMap<String, String>, AwsError> {
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

fn parse_taints(v: Option<&Value>, field: &str) -> Result<Vec<(String, String, String)>, AwsError> {
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
            let t = t.as_object().ok_or_else(|| invalid(format!("{field} entries must be objects.")))?;
            let key = opt_str(t, "key")?.unwrap_or("");
            let value = opt_str(t, "value")?.unwrap_or("");
            let effect = opt_str(t, "effect")?.unwrap_or("");
            if !TAINT_EFFECTS.contains(&effect) {
                return Err(invalid(format!("Taint effect '{effect}' is invalid; valid effects: NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE.")));
            }
            if key.is_empty() || key.len() > 63 + 254 || !super::arm::valid_label_key(key) {
                return Err(invalid(format!("Taint key '{key}' is invalid.")));
            }
            if !super::arm::valid_label_value(value) {
                return Err(invalid(format!("Taint value '{value}' is invalid.")));
            }
            Ok((key.to_string(), value.to_string(), effect.to_string()))
        })
        .collect()
}

fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), AwsError> {
    for (k, v) in labels {
        if !super::arm::valid_label_key(k) || !super::arm::valid_label_value(v) {
            return Err(invalid(format!(
                "Label '{k}={v}' is not a valid Kubernetes label."
            )));
        }
    }
    Ok(())
}

fn check_scaling(min: i64, max: i64, desired: i64) -> Result<(), AwsError> {
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

fn valid_ng_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

fn parse_create(req: &Map<String, Value>) -> Result<(String, NgSpec, Option<String>), AwsError> {
    let name =
        opt_str(req, "nodegroupName")?.ok_or_else(|| invalid("nodegroupName is required."))?;
    if !valid_ng_name(name) {
        return Err(invalid(format!(
            "Nodegroup name '{name}' is invalid: it must be 1-63 characters, start with a letter or digit, and contain only letters, digits, hyphens and underscores."
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
    let launch_template = req.get("launchTemplate").filter(|v| !v.is_null()).cloned();
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
            "Capacity type '{capacity_type}' is invalid; valid values: ON_DEMAND, SPOT, CAPACITY_BLOCK."
        )));
    }
    let instance_types = instance_types.filter(|t| !t.is_empty()).unwrap_or_else(|| {
        if launch_template.is_some() {
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
        None if launch_template.is_some() => "CUSTOM",
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
    let disk_size = opt_int(req, "diskSize")?;
    if disk_size.is_some() && launch_template.is_some() {
        return Err(invalid(
            "Disk size must be specified within the launch template.",
        ));
    }
    if let Some(d) = disk_size
        && !(1..=16384).contains(&d)
    {
        return Err(invalid(format!(
            "diskSize {d} is invalid: it must be between 1 and 16384 GiB."
        )));
    }
    let labels = str_map(req.get("labels"), "labels")?;
    check_labels(&labels)?;
    let taints = parse_taints(req.get("taints"), "taints")?;
    let version = opt_str(req, "version")?.unwrap_or(EKS_VERSION);
    if version != EKS_VERSION && !["1.31", "1.32"].contains(&version) {
        return Err(invalid(format!(
            "Requested Nodegroup version {version} is invalid. Nodegroup version cannot be newer than the cluster version {EKS_VERSION} and at most 2 minor versions older."
        )));
    }
    let max_unavailable = match req.get("updateConfig") {
        Some(Value::Object(u)) => opt_int(u, "maxUnavailable")?.unwrap_or(1),
        _ => 1,
    };
    let token = opt_str(req, "clientRequestToken")?.map(str::to_string);
    Ok((
        name.to_string(),
        NgSpec {
            capacity_type: capacity_type.to_string(),
            min_size: min,
            max_size: max,
            desired_size: desired,
            instance_types,
            subnets,
            ami_type: ami_type.to_string(),
            node_role: node_role.to_string(),
            labels,
            taints,
            disk_size: if launch_template.is_some() {
                None
            } else {
                Some(disk_size.unwrap_or(20))
            },
            remote_access: req.get("remoteAccess").filter(|v| !v.is_null()).cloned(),
            launch_template,
            tags: {
                let tags = str_map(req.get("tags"), "tags")?;
                if let Some(k) = tags.keys().find(|k| {
                    k.to_ascii_lowercase().starts_with("aws:") || k.is_empty() || k.len() > 128
                }) {
                    return Err(invalid(format!(
                        "Tag key '{k}' is invalid: keys are 1-128 characters and the aws: prefix is reserved."
                    )));
                }
                if tags.len() > 50 {
                    return Err(invalid("A resource can have at most 50 tags."));
                }
                tags
            },
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

// ---------------------------------------------------------------- dispatch

pub async fn handle(
    State(sb): State<Sandbox>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    fail: Option<axum::Extension<super::faults::FailOperation>>,
    body: Bytes,
) -> Response {
    match dispatch(&sb, &method, &uri, &headers, fail.is_some(), &body) {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn dispatch(
    sb: &Sandbox,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    fail: bool,
    body: &[u8],
) -> Result<Response, AwsError> {
    let region = sigv4_region(headers)?;
    let segs = segments(uri.path());
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let no_route = || {
        aws(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            format!("No operation at {method} {}", uri.path()),
        )
    };
    match (method, s.as_slice()) {
        (&Method::GET, ["clusters"]) => sb.with_world(|w, _| {
            let names: Vec<&String> = w
                .eks
                .clusters
                .values()
                .filter(|c| c.region == region)
                .map(|c| &c.name)
                .collect();
            Ok(json_response(StatusCode::OK, &json!({ "clusters": names })))
        }),
        (&Method::GET, ["clusters", c]) => sb.with_world(|w, _| {
            Ok(json_response(
                StatusCode::OK,
                &json!({"cluster": cluster_json(cluster(w, &region, c)?)}),
            ))
        }),
        (&Method::POST, ["clusters", c, "node-groups"]) => create(sb, &region, c, body, fail),
        (&Method::GET, ["clusters", c, "node-groups"]) => list(sb, &region, c, uri),
        (&Method::GET, ["clusters", c, "node-groups", ng]) => sb.with_world(|w, _| {
            let cl = cluster(w, &region, c)?;
            let n = cl.nodegroups.get(*ng).ok_or_else(|| ng_missing(c, ng))?;
            Ok(json_response(
                StatusCode::OK,
                &json!({"nodegroup": nodegroup_json(cl, n)}),
            ))
        }),
        (&Method::DELETE, ["clusters", c, "node-groups", ng]) => delete(sb, &region, c, ng, fail),
        (&Method::POST, ["clusters", c, "node-groups", ng, "update-config"]) => {
            update_config(sb, &region, c, ng, body, fail)
        }
        (&Method::POST, ["clusters", c, "node-groups", ng, "update-version"]) => {
            update_version(sb, &region, c, ng, body, fail)
        }
        (&Method::GET, ["clusters", c, "updates"]) => sb.with_world(|w, _| {
            let cl = cluster(w, &region, c)?;
            let key = format!("{}/{}", cl.region, cl.name);
            let ng = query_get(uri.query(), "nodegroupName");
            let ids: Vec<&String> = w
                .eks
                .updates
                .values()
                .filter(|u| u.cluster_key == key && ng.as_ref().is_none_or(|n| *n == u.nodegroup))
                .map(|u| &u.id)
                .collect();
            Ok(json_response(StatusCode::OK, &json!({ "updateIds": ids })))
        }),
        (&Method::GET, ["clusters", c, "updates", id]) => sb.with_world(|w, _| {
            let cl = cluster(w, &region, c)?;
            let key = format!("{}/{}", cl.region, cl.name);
            let ng = query_get(uri.query(), "nodegroupName");
            let u =
                w.eks.updates.get(*id).filter(|u| {
                    u.cluster_key == key && ng.as_ref().is_none_or(|n| *n == u.nodegroup)
                });
            let u = u.ok_or_else(|| {
                aws(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFoundException",
                    format!("No update found for ID: {id}."),
                )
                .with("clusterName", c)
            })?;
            Ok(json_response(
                StatusCode::OK,
                &json!({"update": update_json(u)}),
            ))
        }),
        _ => Err(no_route()),
    }
}

fn cluster<'a>(w: &'a World, region: &str, name: &str) -> Result<&'a EksCluster, AwsError> {
    w.eks
        .clusters
        .get(&format!("{region}/{name}"))
        .ok_or_else(|| {
            aws(
                StatusCode::NOT_FOUND,
                "ResourceNotFoundException",
                format!("No cluster found for name: {name}."),
            )
            .with("clusterName", name)
        })
}

fn ng_missing(cluster: &str, ng: &str) -> AwsError {
    aws(
        StatusCode::NOT_FOUND,
        "ResourceNotFoundException",
        format!("No node group found for name: {ng}."),
    )
    .with("clusterName", cluster)
    .with("nodegroupName", ng)
}

fn in_use(cluster: &str, ng: &Nodegroup) -> AwsError {
    aws(
        StatusCode::CONFLICT,
        "ResourceInUseException",
        format!(
            "Nodegroup {} is currently in {} state and cannot be modified.",
            ng.name, ng.status
        ),
    )
    .with("clusterName", cluster)
    .with("nodegroupName", &ng.name)
}

fn create(
    sb: &Sandbox,
    region: &str,
    c: &str,
    body: &[u8],
    fail: bool,
) -> Result<Response, AwsError> {
    let req = parse_body(body)?;
    sb.with_world_opts(fail, |w, ctx| {
        cluster(w, region, c)?;
        let (name, spec, token) = parse_create(&req)?;
        w.count_create_request("eks", c, &name);
        let cl = cluster(w, region, c)?;
        if let Some(existing) = cl.nodegroups.get(&name) {
            // Same clientRequestToken: an idempotent retry, answered with the node group.
            if token.is_some() && existing.client_request_token == token {
                return Ok(json_response(
                    StatusCode::OK,
                    &json!({"nodegroup": nodegroup_json(cl, existing)}),
                ));
            }
            return Err(aws(
                StatusCode::CONFLICT,
                "ResourceInUseException",
                format!("NodeGroup already exists with name {name} and cluster name {c}"),
            )
            .with("clusterName", c)
            .with("nodegroupName", &name));
        }
        let deadline = ctx.deadline();
        let uid = uuid(ctx);
        let ng = Nodegroup {
            name: name.clone(),
            uid,
            created_at: ctx.now,
            modified_at: ctx.now,
            status: "CREATING".into(),
            spec,
            health_issues: Vec::new(),
            client_request_token: token,
            pending: Some(Pending {
                kind: Kind::Create,
                update_id: None,
                deadline,
                fail: ctx.fail_operation,
                previous: None,
            }),
        };
        ctx.schedule(deadline);
        let key = format!("{region}/{c}");
        w.eks.pending.insert((deadline, key.clone(), name.clone()));
        w.count_create("eks", c, &name);
        let cm = w.eks.clusters.get_mut(&key).expect("found above");
        let doc = nodegroup_json(cm, &ng);
        cm.nodegroups.insert(name, ng);
        Ok(json_response(StatusCode::OK, &json!({ "nodegroup": doc })))
    })
}

fn uuid(ctx: &mut Ctx) -> String {
    let a = ctx.new_id();
    let r = fastrand::u64(..);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (a as u32) ^ (r as u32),
        (r >> 32) as u16,
        (r >> 48) & 0xfff,
        (r >> 20) & 0xfff,
        fastrand::u64(..) & 0xffff_ffff_ffff
    )
}

fn list(sb: &Sandbox, region: &str, c: &str, uri: &Uri) -> Result<Response, AwsError> {
    let max = match query_get(uri.query(), "maxResults") {
        None => 100,
        Some(m) => match m.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(invalid(format!(
                    "maxResults must be between 1 and 100, got {m}."
                )));
            }
        },
    };
    let start = match query_get(uri.query(), "nextToken") {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| invalid("The nextToken is invalid."))?,
    };
    sb.with_world(|w, _| {
        let cl = cluster(w, region, c)?;
        let names: Vec<&String> = cl.nodegroups.keys().skip(start).take(max).collect();
        let mut v = json!({ "nodegroups": names });
        if start + max < cl.nodegroups.len() {
            v["nextToken"] = json!((start + max).to_string());
        }
        Ok(json_response(StatusCode::OK, &v))
    })
}

fn delete(sb: &Sandbox, region: &str, c: &str, ng: &str, fail: bool) -> Result<Response, AwsError> {
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(w, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.pending.is_some() {
            return Err(in_use(c, n));
        }
        let deadline = ctx.deadline();
        ctx.schedule(deadline);
        w.eks
            .pending
            .insert((deadline, format!("{region}/{c}"), ng.to_string()));
        let cm = w
            .eks
            .clusters
            .get_mut(&format!("{region}/{c}"))
            .expect("found above");
        let n = cm.nodegroups.get_mut(ng).expect("found above");
        n.status = "DELETING".into();
        n.modified_at = ctx.now;
        n.pending = Some(Pending {
            kind: Kind::Delete,
            update_id: None,
            deadline,
            fail: ctx.fail_operation,
            previous: None,
        });
        let doc = nodegroup_json(cm, &cm.nodegroups[ng]);
        Ok(json_response(StatusCode::OK, &json!({ "nodegroup": doc })))
    })
}

/// Start an update of a node group: UPDATING now, ACTIVE (or back to the old spec on failure) later.
fn start_update(
    w: &mut World,
    ctx: &mut Ctx,
    key: &str,
    ng: &str,
    new_spec: NgSpec,
    update_type: &str,
    params: Vec<(String, String)>,
) -> Value {
    let deadline = ctx.deadline();
    let id = uuid(ctx);
    ctx.schedule(deadline);
    w.eks
        .pending
        .insert((deadline, key.to_string(), ng.to_string()));
    w.eks.updates.insert(
        id.clone(),
        EksUpdate {
            id: id.clone(),
            cluster_key: key.into(),
            nodegroup: ng.into(),
            update_type: update_type.into(),
            status: "InProgress".into(),
            params,
            created_at: ctx.now,
            deadline,
            errors: vec![],
        },
    );
    let cm = w
        .eks
        .clusters
        .get_mut(key)
        .expect("caller found the cluster");
    let n = cm
        .nodegroups
        .get_mut(ng)
        .expect("caller found the node group");
    let previous = std::mem::replace(&mut n.spec, new_spec);
    n.status = "UPDATING".into();
    n.modified_at = ctx.now;
    n.pending = Some(Pending {
        kind: Kind::Update,
        update_id: Some(id.clone()),
        deadline,
        fail: ctx.fail_operation,
        previous: Some(Box::new(previous)),
    });
    update_json(&w.eks.updates[&id])
}

fn update_config(
    sb: &Sandbox,
    region: &str,
    c: &str,
    ng: &str,
    body: &[u8],
    fail: bool,
) -> Result<Response, AwsError> {
    let req = parse_body(body)?;
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(w, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.status != "ACTIVE" && n.status != "DEGRADED" {
            return Err(in_use(c, n));
        }
        let mut spec = n.spec.clone();
        let mut params = Vec::new();
        if let Some(l) = req.get("labels").filter(|v| !v.is_null()) {
            let l = l
                .as_object()
                .ok_or_else(|| invalid("labels must be an object."))?;
            let add = str_map(l.get("addOrUpdateLabels"), "addOrUpdateLabels")?;
            let remove = str_list(l, "removeLabels")?.unwrap_or_default();
            if let Some(k) = remove.iter().find(|k| add.contains_key(*k)) {
                return Err(invalid(format!(
                    "The label '{k}' can't be both added and removed."
                )));
            }
            check_labels(&add)?;
            for k in &remove {
                spec.labels.remove(k);
            }
            spec.labels.extend(add.clone());
            if !add.is_empty() {
                params.push((
                    "LabelsToAdd".to_string(),
                    serde_json::to_string(&add).unwrap_or_default(),
                ));
            }
            if !remove.is_empty() {
                params.push((
                    "LabelsToRemove".to_string(),
                    serde_json::to_string(&remove).unwrap_or_default(),
                ));
            }
        }
        if let Some(t) = req.get("taints").filter(|v| !v.is_null()) {
            let t = t
                .as_object()
                .ok_or_else(|| invalid("taints must be an object."))?;
            let add = parse_taints(t.get("addOrUpdateTaints"), "addOrUpdateTaints")?;
            let remove = parse_taints(t.get("removeTaints"), "removeTaints")?;
            spec.taints
                .retain(|(k, _, e)| !remove.iter().any(|(rk, _, re)| rk == k && re == e));
            for (k, v, e) in &add {
                spec.taints.retain(|(ok, _, oe)| !(ok == k && oe == e));
                spec.taints.push((k.clone(), v.clone(), e.clone()));
            }
            if spec.taints.len() > 50 {
                return Err(invalid("A node group can have at most 50 taints."));
            }
            let tj = |l: &[(String, String, String)]| {
                serde_json::to_string(
                    &l.iter()
                        .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
                        .collect::<Vec<_>>(),
                )
                .unwrap_or_default()
            };
            if !add.is_empty() {
                params.push(("TaintsToAdd".to_string(), tj(&add)));
            }
            if !remove.is_empty() {
                params.push(("TaintsToRemove".to_string(), tj(&remove)));
            }
        }
        if let Some(sc) = req.get("scalingConfig").filter(|v| !v.is_null()) {
            let sc = sc
                .as_object()
                .ok_or_else(|| invalid("scalingConfig must be an object."))?;
            for (field, slot, param) in [
                ("minSize", &mut spec.min_size, "MinSize"),
                ("maxSize", &mut spec.max_size, "MaxSize"),
                ("desiredSize", &mut spec.desired_size, "DesiredSize"),
            ] {
                if let Some(v) = opt_int(sc, field)? {
                    *slot = v;
                    params.push((param.to_string(), v.to_string()));
                }
            }
            check_scaling(spec.min_size, spec.max_size, spec.desired_size)?;
        }
        if let Some(Value::Object(u)) = req.get("updateConfig")
            && let Some(m) = opt_int(u, "maxUnavailable")?
        {
            if !(1..=100).contains(&m) {
                return Err(invalid("maxUnavailable must be between 1 and 100."));
            }
            spec.max_unavailable = m;
            params.push(("MaxUnavailable".to_string(), m.to_string()));
        }
        if params.is_empty() {
            return Err(invalid(
                "No changes were requested: specify labels, taints, scalingConfig or updateConfig.",
            ));
        }
        let key = format!("{region}/{c}");
        let doc = start_update(w, ctx, &key, ng, spec, "ConfigUpdate", params);
        Ok(json_response(StatusCode::OK, &json!({ "update": doc })))
    })
}

fn update_version(
    sb: &Sandbox,
    region: &str,
    c: &str,
    ng: &str,
    body: &[u8],
    fail: bool,
) -> Result<Response, AwsError> {
    let req = parse_body(body)?;
    sb.with_world_opts(fail, |w, ctx| {
        let cl = cluster(w, region, c)?;
        let n = cl.nodegroups.get(ng).ok_or_else(|| ng_missing(c, ng))?;
        if n.status != "ACTIVE" && n.status != "DEGRADED" {
            return Err(in_use(c, n));
        }
        let mut spec = n.spec.clone();
        let version = opt_str(&req, "version")?.unwrap_or(EKS_VERSION);
        if !["1.31", "1.32", EKS_VERSION].contains(&version) {
            return Err(invalid(format!("Requested Nodegroup version {version} is invalid. Nodegroup version cannot be newer than the cluster version {EKS_VERSION}.")));
        }
        if version < spec.version.as_str() {
            return Err(invalid(format!("Requested version {version} is older than the node group's version {}; downgrades are not supported.", spec.version)));
        }
        let release = match opt_str(&req, "releaseVersion")? {
            Some(r) if !r.starts_with(&format!("{version}.")) => return Err(invalid(format!("Requested release version {r} is not valid for kubernetes version {version}."))),
            Some(r) => r.to_string(),
            None if version == EKS_VERSION => RELEASE_VERSION.to_string(),
            None => format!("{version}.10-20251120"),
        };
        spec.version = version.to_string();
        spec.release_version = release.clone();
        let params = vec![("Version".to_string(), version.to_string()), ("ReleaseVersion".to_string(), release)];
        let key = format!("{region}/{c}");
        let doc = start_update(w, ctx, &key, ng, spec, "VersionUpdate", params);
        Ok(json_response(StatusCode::OK, &json!({ "update": doc })))
    })
}
