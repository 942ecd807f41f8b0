//! Azure Resource Manager: `Microsoft.ContainerService/managedClusters/{c}/agentPools` and the Azure
//! AD client-credentials token endpoint whose bearer tokens ARM then requires.
//!
//! Written from the ARM REST specification (containerservice, api-version 2025-10-01 and later) and
//! the ARM async-operation guidelines: PUT answers 201 (create) or 200 (update) with
//! `provisioningState` Creating/Updating and an `Azure-AsyncOperation` header; DELETE answers 202 with
//! `Location` and `Azure-AsyncOperation`; both carry `Retry-After`. Errors use the ARM shape
//! `{"error": {"code", "message", "target"?}}`.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::catalog;
use super::dates::{now_ms, rfc3339_millis};
use super::nodes::{NodeEvent, PoolNodes};
use super::util::{base_url, json_response, parse_pairs, query_get, retry_after_secs, segments};
use super::{Ctx, Sandbox, World};

/// The oldest api-version the emulator serves (the one azurerm pins).
pub const MIN_API_VERSION: &str = "2025-10-01";
pub const KUBERNETES_VERSION: &str = "1.33.3";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct AksWorld {
    /// Keyed by the lower-cased cluster resource id.
    pub clusters: BTreeMap<String, AksCluster>,
    pub ops: BTreeMap<String, ArmOp>,
    /// Access tokens the token endpoint issued (kept across restarts so clients' cached tokens stay valid).
    pub tokens: BTreeSet<String>,
    /// Unfinished operations by (deadline, id), so settling looks only at what is due.
    #[serde(default)]
    pub pending: BTreeSet<(u64, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AksCluster {
    pub subscription: String,
    pub resource_group: String,
    pub name: String,
    pub location: String,
    pub pools: BTreeMap<String, AgentPool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentPool {
    pub name: String,
    pub props: PoolProps,
    pub provisioning_state: String,
    pub pending: Option<Pending>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub op: String,
    pub kind: OpKind,
    pub deadline: u64,
    pub fail: bool,
}

/// An ARM async operation, as served at `.../locations/{loc}/operations/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmOp {
    pub id: String,
    pub kind: OpKind,
    pub status: String,
    pub start: u64,
    pub end: Option<u64>,
    pub deadline: u64,
    pub error: Option<(String, String)>,
    /// Lower-cased cluster key and pool name.
    pub cluster: String,
    pub pool: String,
}

/// The agent pool properties the emulator models (a subset of ManagedClusterAgentPoolProfileProperties).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolProps {
    pub vm_size: String,
    pub count: u32,
    pub enable_auto_scaling: bool,
    pub min_count: Option<u32>,
    pub max_count: Option<u32>,
    pub os_disk_size_gb: u32,
    pub os_type: String,
    pub os_sku: String,
    pub node_taints: Vec<String>,
    pub node_labels: BTreeMap<String, String>,
    pub scale_set_priority: String,
    pub scale_set_eviction_policy: Option<String>,
    pub spot_max_price: Option<f64>,
    pub gpu_instance_profile: Option<String>,
    pub gpu_driver: Option<String>,
    pub mode: String,
    pub orchestrator_version: String,
    pub scale_down_mode: String,
    pub max_pods: u32,
    pub availability_zones: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

impl AksWorld {
    pub fn has_cluster(&self, sub: &str, rg: &str, name: &str) -> bool {
        self.clusters.contains_key(&cluster_key(sub, rg, name))
    }

    pub fn add_cluster(&mut self, sub: &str, rg: &str, name: &str, location: &str) {
        let c = AksCluster {
            subscription: sub.into(),
            resource_group: rg.into(),
            name: name.into(),
            location: location.into(),
            pools: BTreeMap::new(),
        };
        self.clusters.insert(cluster_key(sub, rg, name), c);
    }

    pub(crate) fn settle(&mut self, now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let mut changed = false;
        while let Some((deadline, id)) = self.pending.first().cloned() {
            if deadline > now {
                break;
            }
            self.pending.pop_first();
            let Some(op) = self.ops.get_mut(&id) else {
                continue;
            };
            if op.end.is_some() {
                continue;
            }
            changed = true;
            let Some(cluster) = self.clusters.get_mut(&op.cluster) else {
                op.status = "Canceled".into();
                op.end = Some(now);
                continue;
            };
            let Some(pool) = cluster.pools.get_mut(&op.pool) else {
                op.status = "Canceled".into();
                op.end = Some(now);
                continue;
            };
            let Some(p) = pool.pending.clone().filter(|p| p.op == op.id) else {
                // Superseded (e.g. a delete while creating).
                op.status = "Canceled".into();
                op.end = Some(now);
                continue;
            };
            op.end = Some(now);
            pool.pending = None;
            if p.fail {
                op.status = "Failed".into();
                op.error = Some((
                    "AllocationFailed".into(),
                    format!(
                        "Allocation failed. We do not have sufficient capacity for the requested VM size {} in this region (sandbox fault injection).",
                        pool.props.vm_size
                    ),
                ));
                pool.provisioning_state = "Failed".into();
                continue;
            }
            op.status = "Succeeded".into();
            if p.kind == OpKind::Delete {
                cluster.pools.remove(&op.pool);
                events.push(NodeEvent::Deleted {
                    cloud: "aks",
                    cluster: cluster.name.clone(),
                    pool: op.pool.clone(),
                });
            } else {
                pool.provisioning_state = "Succeeded".into();
                events.push(NodeEvent::Changed(pool_nodes(&cluster.name, pool)));
            }
        }
        changed
    }
}

fn cluster_key(sub: &str, rg: &str, name: &str) -> String {
    format!(
        "{}/{}/{}",
        sub.to_ascii_lowercase(),
        rg.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

/// The nodes AKS creates for a pool, labelled as AKS labels them.
pub fn pool_nodes(cluster: &str, pool: &AgentPool) -> PoolNodes {
    let p = &pool.props;
    let mut labels = BTreeMap::new();
    labels.insert("agentpool".to_string(), pool.name.clone());
    labels.insert(
        "kubernetes.azure.com/agentpool".to_string(),
        pool.name.clone(),
    );
    labels.insert(
        "kubernetes.azure.com/mode".to_string(),
        p.mode.to_ascii_lowercase(),
    );
    labels.insert("kubernetes.azure.com/os-sku".to_string(), p.os_sku.clone());
    labels.insert(
        "kubernetes.io/os".to_string(),
        p.os_type.to_ascii_lowercase(),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".to_string(),
        p.vm_size.clone(),
    );
    let machine = catalog::azure_vm_size(&p.vm_size);
    let gpu = machine.and_then(|m| m.gpu);
    if gpu.is_some() {
        labels.insert("accelerator".to_string(), "nvidia".to_string());
    }
    let mut taints: Vec<(String, String, String)> = p
        .node_taints
        .iter()
        .filter_map(|t| parse_taint(t))
        .collect();
    if p.scale_set_priority == "Spot" {
        labels.insert(
            "kubernetes.azure.com/scalesetpriority".into(),
            "spot".into(),
        );
        taints.push((
            "kubernetes.azure.com/scalesetpriority".into(),
            "spot".into(),
            "NoSchedule".into(),
        ));
    }
    for (k, v) in &p.node_labels {
        labels.insert(k.clone(), v.clone());
    }
    let mig = match (gpu, &p.gpu_instance_profile) {
        (Some((g, _)), Some(ip)) => catalog::aks_mig_profile(&g, ip),
        _ => None,
    };
    let count = if p.enable_auto_scaling {
        p.min_count.unwrap_or(p.count)
    } else {
        p.count
    };
    PoolNodes {
        cloud: "aks",
        cluster: cluster.to_string(),
        pool: pool.name.clone(),
        node_count: count.max(1),
        labels,
        taints,
        gpu_product: gpu.map(|(g, _)| g.product.to_string()),
        gpus_per_node: gpu.map_or(0, |(_, n)| n),
        gpu_memory_mib: gpu.map_or(0, |(g, _)| g.memory_mib),
        mig_profile: mig.map(|(p, _)| p.to_string()),
        mig_instances_per_gpu: mig.map_or(0, |(_, n)| n),
        gke_sharing: None,
    }
}

/// "key=value:Effect" or "key:Effect".
fn parse_taint(t: &str) -> Option<(String, String, String)> {
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

/// Kubernetes qualified name: optional DNS-subdomain prefix and a 1-63 character name.
pub(crate) fn valid_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix
        && (p.is_empty()
            || p.len() > 253
            || !p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }))
    {
        return false;
    }
    !name.is_empty() && valid_label_value(name)
}

pub(crate) fn valid_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

// ---------------------------------------------------------------- errors

pub struct ArmError {
    status: StatusCode,
    code: &'static str,
    message: String,
    target: Option<String>,
}

fn err(status: StatusCode, code: &'static str, message: impl Into<String>) -> ArmError {
    ArmError {
        status,
        code,
        message: message.into(),
        target: None,
    }
}

fn invalid(target: &str, message: impl Into<String>) -> ArmError {
    ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidParameter",
        message: message.into(),
        target: Some(target.into()),
    }
}

impl ArmError {
    fn into_response(self) -> Response {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(t) = self.target {
            e["target"] = json!(t);
        }
        json_response(self.status, &json!({ "error": e }))
    }
}

pub fn error_body(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}

// ---------------------------------------------------------------- token endpoint

/// `POST /{tenant}/oauth2/v2.0/token`, client-credentials grant. Any client id and secret are accepted
/// except the secret "invalid", so tests can exercise the failure path.
pub async fn token(
    State(sb): State<Sandbox>,
    method: Method,
    axum::extract::Path(tenant): axum::extract::Path<String>,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "invalid_request", "error_description": "AADSTS900561: The endpoint only accepts POST requests.", "error_codes": [900561]}),
        );
    }
    let form = parse_pairs(&String::from_utf8_lossy(&body), true);
    let get = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let aad_error = |status: StatusCode, error: &str, code: u32, desc: &str| {
        json_response(
            status,
            &json!({"error": error, "error_description": format!("AADSTS{code}: {desc}"), "error_codes": [code], "timestamp": rfc3339_millis(now_ms())}),
        )
    };
    match get("grant_type") {
        Some("client_credentials") => {}
        Some(_) => {
            return aad_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                70003,
                "The app requested an unsupported grant type.",
            );
        }
        None => {
            return aad_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                900144,
                "The request body must contain the following parameter: 'grant_type'.",
            );
        }
    }
    let Some(client_id) = get("client_id").filter(|c| !c.is_empty()) else {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            900144,
            "The request body must contain the following parameter: 'client_id'.",
        );
    };
    let secret = get("client_secret");
    let assertion = get("client_assertion");
    if secret.is_none() && assertion.is_none() {
        return aad_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7000218,
            "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
        );
    }
    if secret == Some("invalid") || assertion == Some("invalid") {
        return aad_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7000215,
            "Invalid client secret provided.",
        );
    }
    let scope = get("scope").unwrap_or("");
    if !scope.ends_with("/.default") {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            1002012,
            "The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.",
        );
    }
    let now = now_ms() / 1000;
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let jti = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let aud = scope.trim_end_matches("/.default");
    let token = format!(
        "{}.{}.sandbox",
        b64(&json!({"typ": "JWT", "alg": "none"})),
        b64(
            &json!({"aud": aud, "iss": format!("https://sts.windows.net/{tenant}/"), "iat": now, "nbf": now, "exp": now + 3600, "appid": client_id, "tid": tenant, "jti": jti})
        )
    );
    sb.with_world(|w, ctx| {
        w.aks.tokens.insert(token.clone());
        ctx.mutated();
    });
    json_response(
        StatusCode::OK,
        &json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
    )
}

// ---------------------------------------------------------------- ARM dispatch

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
) -> Result<Response, ArmError> {
    // ARM authenticates before it routes.
    let auth = headers.get("authorization").and_then(|h| h.to_str().ok());
    let Some(auth) = auth else {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        ));
    };
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("bearer "))
        .map(str::trim);
    let Some(token) = token else {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is provided in an invalid format.",
        ));
    };
    if !sb.with_world(|w, _| w.aks.tokens.contains(token)) {
        return Err(err(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        ));
    }
    let api_version = query_get(uri.query(), "api-version");
    let Some(api_version) = api_version else {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    let segs = segments(uri.path());
    let lower: Vec<String> = segs.iter().map(|s| s.to_ascii_lowercase()).collect();
    let l: Vec<&str> = lower.iter().map(String::as_str).collect();
    let base = base_url(headers);
    match l.as_slice() {
        [
            "subscriptions",
            _,
            "providers",
            "microsoft.containerservice",
            "locations",
            _,
            kind @ ("operations" | "operationresults"),
            _,
        ] => {
            check_api_version(&api_version, "locations/operations")?;
            operation(sb, &segs, kind == &"operationresults", &base, &api_version)
        }
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.containerservice",
            "managedclusters",
            _,
            "agentpools",
            rest @ ..,
        ] => {
            check_api_version(&api_version, "managedClusters/agentPools")?;
            let (sub, rg, cluster) = (&segs[1], &segs[3], &segs[7]);
            match (rest, method) {
                ([], &Method::GET) => list(sb, sub, rg, cluster),
                ([_], &Method::GET) => get_pool(sb, sub, rg, cluster, &segs[9]),
                ([_], &Method::PUT) => put_pool(
                    sb,
                    sub,
                    rg,
                    cluster,
                    &segs[9],
                    body,
                    fail,
                    &base,
                    &api_version,
                ),
                ([_], &Method::DELETE) => {
                    delete_pool(sb, sub, rg, cluster, &segs[9], fail, &base, &api_version)
                }
                ([] | [_], _) => Err(err(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    format!("The method '{method}' is not allowed on this resource."),
                )),
                _ => Err(no_route(uri)),
            }
        }
        [
            "subscriptions",
            _,
            "resourcegroups",
            _,
            "providers",
            "microsoft.containerservice",
            "managedclusters",
            _,
        ] if method == Method::GET => {
            check_api_version(&api_version, "managedClusters")?;
            get_cluster(sb, &segs[1], &segs[3], &segs[7])
        }
        _ => Err(no_route(uri)),
    }
}

fn no_route(uri: &Uri) -> ArmError {
    err(
        StatusCode::NOT_FOUND,
        "InvalidResourceType",
        format!(
            "The resource type for '{}' could not be found in the namespace of this sandbox.",
            uri.path()
        ),
    )
}

/// ARM rejects api-versions the resource provider does not register; we serve 2025-10-01 and later.
fn check_api_version(v: &str, rtype: &str) -> Result<(), ArmError> {
    let date = v.get(..10).unwrap_or("");
    let well_formed = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
        && (v.len() == 10 || v[10..].starts_with("-preview"));
    if !well_formed {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{v}' is invalid. The supported versions are '{MIN_API_VERSION}' and later."
            ),
        ));
    }
    if date < MIN_API_VERSION {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for location 'eastus' and API version '{v}' for type '{rtype}'. The supported api-versions are '{MIN_API_VERSION}' and later."
            ),
        ));
    }
    Ok(())
}

fn find_cluster<'a>(
    w: &'a mut World,
    sub: &str,
    rg: &str,
    cluster: &str,
) -> Result<&'a mut AksCluster, ArmError> {
    let key = cluster_key(sub, rg, cluster);
    if !w.aks.clusters.contains_key(&key) {
        let rg_exists = w.aks.clusters.values().any(|c| {
            c.subscription.eq_ignore_ascii_case(sub) && c.resource_group.eq_ignore_ascii_case(rg)
        });
        if !rg_exists {
            if !w
                .aks
                .clusters
                .values()
                .any(|c| c.subscription.eq_ignore_ascii_case(sub))
            {
                return Err(err(
                    StatusCode::NOT_FOUND,
                    "SubscriptionNotFound",
                    format!("The subscription '{sub}' could not be found."),
                ));
            }
            return Err(err(
                StatusCode::NOT_FOUND,
                "ResourceGroupNotFound",
                format!("Resource group '{rg}' could not be found."),
            ));
        }
        return Err(err(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!(
                "The Resource 'Microsoft.ContainerService/managedClusters/{cluster}' under resource group '{rg}' was not found."
            ),
        ));
    }
    Ok(w.aks.clusters.get_mut(&key).expect("checked above"))
}

fn pool_not_found(name: &str) -> ArmError {
    err(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("Could not find agent pool '{name}' in the managed cluster."),
    )
}

fn get_cluster(sb: &Sandbox, sub: &str, rg: &str, cluster: &str) -> Result<Response, ArmError> {
    sb.with_world(|w, _| {
        let c = find_cluster(w, sub, rg, cluster)?;
        let profiles: Vec<Value> = c.pools.values().map(|p| {
            let mut v = pool_json(c, p)["properties"].clone();
            v["name"] = json!(p.name);
            v
        }).collect();
        Ok(json_response(
            StatusCode::OK,
            &json!({
                "id": format!("/subscriptions/{}/resourcegroups/{}/providers/Microsoft.ContainerService/managedClusters/{}", c.subscription, c.resource_group, c.name),
                "name": c.name, "type": "Microsoft.ContainerService/ManagedClusters", "location": c.location,
                "properties": {"provisioningState": "Succeeded", "kubernetesVersion": KUBERNETES_VERSION,
                    "currentKubernetesVersion": KUBERNETES_VERSION, "dnsPrefix": c.name, "agentPoolProfiles": profiles,
                    "powerState": {"code": "Running"}}
            }),
        ))
    })
}

fn list(sb: &Sandbox, sub: &str, rg: &str, cluster: &str) -> Result<Response, ArmError> {
    sb.with_world(|w, _| {
        let c = find_cluster(w, sub, rg, cluster)?;
        let value: Vec<Value> = c.pools.values().map(|p| pool_json(c, p)).collect();
        Ok(json_response(StatusCode::OK, &json!({ "value": value })))
    })
}

fn get_pool(
    sb: &Sandbox,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
) -> Result<Response, ArmError> {
    sb.with_world(|w, _| {
        let c = find_cluster(w, sub, rg, cluster)?;
        let p = c.pools.get(name).ok_or_else(|| pool_not_found(name))?;
        Ok(json_response(StatusCode::OK, &pool_json(c, p)))
    })
}

pub fn pool_json(c: &AksCluster, p: &AgentPool) -> Value {
    let pr = &p.props;
    let mut props = json!({
        "provisioningState": p.provisioning_state,
        "count": pr.count,
        "vmSize": pr.vm_size,
        "osDiskSizeGB": effective_disk(pr.os_disk_size_gb),
        "osDiskType": "Managed",
        "kubeletDiskType": "OS",
        "maxPods": pr.max_pods,
        "type": "VirtualMachineScaleSets",
        "enableAutoScaling": pr.enable_auto_scaling,
        "scaleDownMode": pr.scale_down_mode,
        "scaleSetPriority": pr.scale_set_priority,
        "mode": pr.mode,
        "orchestratorVersion": pr.orchestrator_version,
        "currentOrchestratorVersion": pr.orchestrator_version,
        "nodeImageVersion": format!("AKSUbuntu-2204gen2containerd-202511.01.0"),
        "osType": pr.os_type,
        "osSKU": pr.os_sku,
        "enableFIPS": false,
        "enableNodePublicIP": false,
        "powerState": {"code": "Running"},
        "upgradeSettings": {"maxSurge": "10%"},
    });
    let o = props.as_object_mut().expect("object literal");
    if let Some(v) = pr.min_count {
        o.insert("minCount".into(), json!(v));
    }
    if let Some(v) = pr.max_count {
        o.insert("maxCount".into(), json!(v));
    }
    if !pr.node_taints.is_empty() {
        o.insert("nodeTaints".into(), json!(pr.node_taints));
    }
    if !pr.node_labels.is_empty() {
        o.insert("nodeLabels".into(), json!(pr.node_labels));
    }
    if let Some(v) = &pr.scale_set_eviction_policy {
        o.insert("scaleSetEvictionPolicy".into(), json!(v));
    }
    if let Some(v) = pr.spot_max_price {
        o.insert("spotMaxPrice".into(), json!(v));
    }
    if let Some(v) = &pr.gpu_instance_profile {
        o.insert("gpuInstanceProfile".into(), json!(v));
    }
    if let Some(v) = &pr.gpu_driver {
        o.insert("gpuProfile".into(), json!({"driver": v}));
    }
    if !pr.availability_zones.is_empty() {
        o.insert("availabilityZones".into(), json!(pr.availability_zones));
    }
    if !pr.tags.is_empty() {
        o.insert("tags".into(), json!(pr.tags));
    }
    json!({
        "id": format!("/subscriptions/{}/resourcegroups/{}/providers/Microsoft.ContainerService/managedClusters/{}/agentPools/{}", c.subscription, c.resource_group, c.name, p.name),
        "name": p.name,
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": props,
    })
}

// ---------------------------------------------------------------- validation

const OS_SKUS_LINUX: &[&str] = &[
    "Ubuntu",
    "Ubuntu2204",
    "Ubuntu2404",
    "AzureLinux",
    "AzureLinux3",
    "CBLMariner",
];
const OS_SKUS_WINDOWS: &[&str] = &["Windows2019", "Windows2022", "WindowsAnnual"];

/// Enum values compare case-insensitively in ARM; the canonical spelling is stored.
fn enum_field(
    o: &Map<String, Value>,
    name: &str,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => allowed
            .iter()
            .find(|a| a.eq_ignore_ascii_case(s))
            .map(|a| Some(*a))
            .ok_or_else(|| {
                invalid(
                    &format!("properties.{name}"),
                    format!(
                        "The value '{s}' of properties.{name} is invalid. Allowed values are: {}.",
                        allowed.join(", ")
                    ),
                )
            }),
        Some(v) => Err(bad_content(name, v)),
    }
}

fn bad_content(name: &str, v: &Value) -> ArmError {
    ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidRequestContent",
        message: format!(
            "The request content was invalid and could not be deserialized: 'Error converting value {v} for property 'properties.{name}''."
        ),
        target: None,
    }
}

fn str_field<'a>(o: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(bad_content(name, v)),
    }
}

fn int_field(o: &Map<String, Value>, name: &str) -> Result<Option<i64>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_content(name, &Value::Number(n.clone()))),
        Some(v) => Err(bad_content(name, v)),
    }
}

fn bool_field(o: &Map<String, Value>, name: &str) -> Result<Option<bool>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(bad_content(name, v)),
    }
}

fn string_map(o: &Map<String, Value>, name: &str) -> Result<BTreeMap<String, String>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(bad_content(name, v)),
            })
            .collect(),
        Some(v) => Err(bad_content(name, v)),
    }
}

fn string_list(o: &Map<String, Value>, name: &str) -> Result<Vec<String>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad_content(name, v))
            })
            .collect(),
        Some(v) => Err(bad_content(name, v)),
    }
}

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
fn parse_props(
    name: &str,
    body: &[u8],
    existing: Option<&PoolProps>,
) -> Result<PoolProps, ArmError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidRequestContent",
        message: format!("The request content was invalid and could not be deserialized: '{e}'."),
        target: None,
    })?;
    let Some(root) = v.as_object() else {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized: 'expected an object'.",
        ));
    };
    let empty = Map::new();
    let o = match root.get("properties") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(v) => return Err(bad_content("properties", v)),
    };
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
                "The value of parameter agentPoolProfile.name is invalid. Error details: Agent pool name '{name}' must start with a lowercase letter, contain only lowercase letters and numbers, and be at most {max} characters long."
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
    let vm_size = match str_field(o, "vmSize")? {
        Some(s) => s.to_string(),
        None => existing
            .map(|e| e.vm_size.clone())
            .unwrap_or_else(|| "Standard_D2s_v3".into()),
    };
    let machine = catalog::azure_vm_size(&vm_size).ok_or_else(|| {
        ArmError {
            status: StatusCode::BAD_REQUEST,
            code: "VMSizeNotSupported",
            message: format!("The VM size of {vm_size} is not supported for creation of VMs and Virtual Machine Scale Set in this region."),
            target: Some("properties.vmSize".into()),
        }
    })?;
    let vm_size = machine.name.to_string();
    let mode = enum_field(o, "mode", &["System", "User", "Gateway"])?
        .map(str::to_string)
        .or_else(|| existing.map(|e| e.mode.clone()))
        .unwrap_or_else(|| "User".into());
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
                    "The value of parameter properties.{f} is invalid: {v}. It must be in the range of 0 to 1000 (inclusive)."
                ),
            ))
        }
    };
    let count = count.map(|c| in_range("count", c)).transpose()?;
    let min_count = min_count.map(|c| in_range("minCount", c)).transpose()?;
    let max_count = max_count.map(|c| in_range("maxCount", c)).transpose()?;
    let count = if enable_auto_scaling {
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
                    "count ({c}) must be between minCount ({min}) and maxCount ({max}) when autoscaling is enabled."
                ),
            ));
        }
        c
    } else {
        if min_count.is_some() || max_count.is_some() {
            return Err(invalid(
                "properties.minCount",
                "minCount and maxCount can only be set when enableAutoScaling is true.",
            ));
        }
        count.unwrap_or(existing.map_or(1, |e| e.count))
    };
    if mode == "System" {
        if windows {
            return Err(invalid(
                "properties.mode",
                "System node pools must use OSType Linux.",
            ));
        }
        if count == 0 || min_count == Some(0) {
            return Err(invalid(
                "properties.count",
                "System node pools must have at least one node.",
            ));
        }
    }
    let os_disk_size_gb = int_field(o, "osDiskSizeGB")?.unwrap_or(0);
    if os_disk_size_gb != 0 && !(30..=2048).contains(&os_disk_size_gb) {
        return Err(invalid(
            "properties.osDiskSizeGB",
            format!(
                "osDiskSizeGB {os_disk_size_gb} is invalid: it must be 0 (VM default) or between 30 and 2048."
            ),
        ));
    }
    let node_taints = string_list(o, "nodeTaints")?;
    for t in &node_taints {
        if parse_taint(t).is_none() {
            return Err(invalid(
                "properties.nodeTaints",
                format!(
                    "Taint '{t}' is invalid: expected key=value:effect with effect NoSchedule, PreferNoSchedule or NoExecute."
                ),
            ));
        }
    }
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
    let scale_set_priority = enum_field(o, "scaleSetPriority", &["Regular", "Spot"])?
        .unwrap_or("Regular")
        .to_string();
    let spot = scale_set_priority == "Spot";
    let mut eviction =
        enum_field(o, "scaleSetEvictionPolicy", &["Delete", "Deallocate"])?.map(str::to_string);
    let spot_max_price = match o.get("spotMaxPrice") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(v) => return Err(bad_content("spotMaxPrice", v)),
    };
    if !spot && (eviction.is_some() || spot_max_price.is_some()) {
        return Err(invalid(
            "properties.scaleSetEvictionPolicy",
            "scaleSetEvictionPolicy and spotMaxPrice can only be set when scaleSetPriority is Spot.",
        ));
    }
    let mut spot_max_price = spot_max_price;
    if spot {
        if let Some(p) = spot_max_price
            && p != -1.0
            && p <= 0.0
        {
            return Err(invalid(
                "properties.spotMaxPrice",
                format!(
                    "spotMaxPrice {p} is invalid: use -1 (up to the on-demand price) or a price greater than 0."
                ),
            ));
        }
        if mode == "System" {
            return Err(invalid(
                "properties.scaleSetPriority",
                "System node pools cannot use Spot priority.",
            ));
        }
        eviction.get_or_insert_with(|| "Delete".into());
        spot_max_price.get_or_insert(-1.0);
    }
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
                    "GPU instance profile {gip} is not supported on VM size {vm_size}: it has no MIG-capable GPU."
                ),
            ));
        }
        if os_sku.starts_with("AzureLinux") || os_sku == "CBLMariner" || windows {
            return Err(invalid(
                "properties.gpuInstanceProfile",
                format!("GPU instance profile {gip} is not supported on OSSKU {os_sku}."),
            ));
        }
    }
    let gpu_driver = match o.get("gpuProfile") {
        None | Some(Value::Null) => None,
        Some(Value::Object(g)) => {
            enum_field(g, "driver", &["Install", "None"])?.map(str::to_string)
        }
        Some(v) => return Err(bad_content("gpuProfile", v)),
    };
    let scale_down_mode = enum_field(o, "scaleDownMode", &["Delete", "Deallocate"])?
        .unwrap_or("Delete")
        .to_string();
    let orchestrator_version = match str_field(o, "orchestratorVersion")? {
        None | Some("") => existing
            .map(|e| e.orchestrator_version.clone())
            .unwrap_or_else(|| KUBERNETES_VERSION.into()),
        Some(v) => {
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
                        "Version {v} is not supported in this region. Supported minor versions: 1.31, 1.32, 1.33, 1.34."
                    ),
                ));
            }
            if parts.len() == 2 {
                format!("{v}.0")
            } else {
                v.to_string()
            }
        }
    };
    let max_pods = int_field(o, "maxPods")?.unwrap_or(30);
    if !(10..=250).contains(&max_pods) {
        return Err(invalid(
            "properties.maxPods",
            format!("maxPods {max_pods} is invalid: it must be between 10 and 250."),
        ));
    }
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
    let tags = string_map(o, "tags")?;
    let mut props = PoolProps {
        vm_size,
        count,
        enable_auto_scaling,
        min_count,
        max_count,
        os_disk_size_gb: os_disk_size_gb as u32,
        os_type,
        os_sku,
        node_taints,
        node_labels,
        scale_set_priority,
        scale_set_eviction_policy: eviction,
        spot_max_price,
        gpu_instance_profile,
        gpu_driver,
        mode,
        orchestrator_version,
        scale_down_mode,
        max_pods: max_pods as u32,
        availability_zones,
        tags,
    };
    // Immutable properties a client leaves out keep their value instead of reading as a change.
    if let Some(e) = existing {
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
    Ok(props)
}

/// The OS disk size a pool gets: 0 means the VM size's default (128 GB for the GPU sizes here).
fn effective_disk(size_gb: u32) -> u32 {
    if size_gb == 0 { 128 } else { size_gb }
}

/// Fields AKS refuses to change on an existing pool ("PropertyChangeNotAllowed"); azurerm replaces
/// the pool when one of them changes.
fn immutable_changes(old: &PoolProps, new: &PoolProps) -> Option<(&'static str, String, String)> {
    let checks: [(&'static str, String, String); 10] = [
        (
            "gpuProfile.driver",
            format!("{:?}", old.gpu_driver),
            format!("{:?}", new.gpu_driver),
        ),
        ("vmSize", old.vm_size.clone(), new.vm_size.clone()),
        ("osType", old.os_type.clone(), new.os_type.clone()),
        // 0 asks for the VM default, which GET reports as its size: sending that size back
        // (as `az aks nodepool update` does) is no change.
        (
            "osDiskSizeGB",
            effective_disk(old.os_disk_size_gb).to_string(),
            effective_disk(new.os_disk_size_gb).to_string(),
        ),
        (
            "scaleSetPriority",
            old.scale_set_priority.clone(),
            new.scale_set_priority.clone(),
        ),
        (
            "scaleSetEvictionPolicy",
            format!("{:?}", old.scale_set_eviction_policy),
            format!("{:?}", new.scale_set_eviction_policy),
        ),
        (
            "spotMaxPrice",
            format!("{:?}", old.spot_max_price),
            format!("{:?}", new.spot_max_price),
        ),
        (
            "gpuInstanceProfile",
            format!("{:?}", old.gpu_instance_profile),
            format!("{:?}", new.gpu_instance_profile),
        ),
        (
            "maxPods",
            old.max_pods.to_string(),
            new.max_pods.to_string(),
        ),
        (
            "availabilityZones",
            old.availability_zones.join(","),
            new.availability_zones.join(","),
        ),
    ];
    checks.into_iter().find(|(_, a, b)| a != b)
}

// ---------------------------------------------------------------- mutations

fn async_headers(
    r: &mut Response,
    base: &str,
    c: &AksCluster,
    op: &str,
    api_version: &str,
    retry: u64,
    location: bool,
) {
    let prefix = format!(
        "{base}/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}",
        c.subscription, c.location
    );
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{prefix}/operations/{op}?api-version={api_version}"
    )) {
        h.insert("azure-asyncoperation", v);
    }
    if location
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{prefix}/operationresults/{op}?api-version={api_version}"
        ))
    {
        h.insert("location", v);
    }
    h.insert("retry-after", HeaderValue::from(retry));
}

fn new_op(w: &mut World, ctx: &mut Ctx, key: &str, pool: &str, kind: OpKind) -> Pending {
    let id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        ctx.new_id(),
        fastrand::u64(..) & 0xffff_ffff_ffff
    );
    let deadline = ctx.deadline();
    w.aks.pending.insert((deadline, id.clone()));
    w.aks.ops.insert(
        id.clone(),
        ArmOp {
            id: id.clone(),
            kind,
            status: "InProgress".into(),
            start: ctx.now,
            end: None,
            deadline,
            error: None,
            cluster: key.into(),
            pool: pool.into(),
        },
    );
    ctx.schedule(deadline);
    Pending {
        op: id,
        kind,
        deadline,
        fail: ctx.fail_operation,
    }
}

#[allow(clippy::too_many_arguments)]
fn put_pool(
    sb: &Sandbox,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
    body: &[u8],
    fail: bool,
    base: &str,
    api_version: &str,
) -> Result<Response, ArmError> {
    sb.with_world_opts(fail, |w, ctx| {
        let key = cluster_key(sub, rg, cluster);
        let c = find_cluster(w, sub, rg, cluster)?;
        let existing = c.pools.get(name).cloned();
        // A PUT of a pool not yet made (or whose creation is pending or failed) asks for a create.
        if existing.as_ref().is_none_or(|p| matches!(p.provisioning_state.as_str(), "Creating" | "Failed")) {
            let cluster_name = c.name.clone();
            w.count_create_request("aks", &cluster_name, name);
        }
        let c = find_cluster(w, sub, rg, cluster)?;
        if let Some(p) = &existing
            && let Some(pending) = &p.pending {
                let what = match pending.kind {
                    OpKind::Create => "creating",
                    OpKind::Update => "updating",
                    OpKind::Delete => "deleting",
                };
                return Err(err(
                    StatusCode::CONFLICT,
                    "OperationNotAllowed",
                    format!("Operation is not allowed because there's an in progress {what} agent pool operation on agent pool '{name}'. Please wait for it to finish before starting a new operation."),
                ));
            }
        let props = parse_props(name, body, existing.as_ref().map(|p| &p.props))?;
        if let Some(old) = &existing
            && let Some((field, a, b)) = immutable_changes(&old.props, &props) {
                return Err(ArmError {
                    status: StatusCode::BAD_REQUEST,
                    code: "PropertyChangeNotAllowed",
                    message: format!("Changing property '{field}' is not allowed (from {a} to {b})."),
                    target: Some(field.into()),
                });
            }
        let (kind, status, state) = if existing.is_some() { (OpKind::Update, StatusCode::OK, "Updating") } else { (OpKind::Create, StatusCode::CREATED, "Creating") };
        if kind == OpKind::Create {
            let cluster_name = c.name.clone();
            w.count_create("aks", &cluster_name, name);
        }
        let pending = new_op(w, ctx, &key, name, kind);
        let op = pending.op.clone();
        let c = w.aks.clusters.get_mut(&key).expect("found above");
        let pool = AgentPool { name: name.to_string(), props, provisioning_state: state.into(), pending: Some(pending) };
        let mut r = json_response(status, &pool_json(c, &pool));
        c.pools.insert(name.to_string(), pool);
        async_headers(&mut r, base, c, &op, api_version, retry_after_secs(ctx.now, ctx.deadline()), false);
        Ok(r)
    })
}

#[allow(clippy::too_many_arguments)]
fn delete_pool(
    sb: &Sandbox,
    sub: &str,
    rg: &str,
    cluster: &str,
    name: &str,
    fail: bool,
    base: &str,
    api_version: &str,
) -> Result<Response, ArmError> {
    sb.with_world_opts(fail, |w, ctx| {
        let key = cluster_key(sub, rg, cluster);
        let c = find_cluster(w, sub, rg, cluster)?;
        let Some(p) = c.pools.get(name) else {
            // ARM DELETE is idempotent: a missing resource is 204.
            return Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default());
        };
        if let Some(pending) = &p.pending
            && pending.kind == OpKind::Delete {
                let op = pending.op.clone();
                let deadline = pending.deadline;
                let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
                async_headers(&mut r, base, c, &op, api_version, retry_after_secs(ctx.now, deadline), true);
                return Ok(r);
            }
        if p.props.mode == "System" && !c.pools.values().any(|o| o.name != name && o.props.mode == "System") {
            return Err(err(StatusCode::BAD_REQUEST, "OperationNotAllowed", format!("Cannot delete agent pool '{name}': it is the last System mode agent pool of the cluster.")));
        }
        let pending = new_op(w, ctx, &key, name, OpKind::Delete);
        let op = pending.op.clone();
        let c = w.aks.clusters.get_mut(&key).expect("found above");
        let pool = c.pools.get_mut(name).expect("found above");
        pool.pending = Some(pending);
        pool.provisioning_state = "Deleting".into();
        let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
        async_headers(&mut r, base, c, &op, api_version, retry_after_secs(ctx.now, ctx.deadline()), true);
        Ok(r)
    })
}

fn operation(
    sb: &Sandbox,
    segs: &[String],
    result: bool,
    base: &str,
    api_version: &str,
) -> Result<Response, ArmError> {
    let id = &segs[7];
    sb.with_world(|w, ctx| {
        let op = w.aks.ops.get(id).cloned().ok_or_else(|| err(StatusCode::NOT_FOUND, "NotFound", format!("Operation '{id}' was not found.")))?;
        if !result {
            let mut doc = json!({"id": format!("/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}/operations/{}", segs[1], segs[5], op.id),
                "name": op.id, "status": op.status, "startTime": rfc3339_millis(op.start)});
            if let Some(e) = op.end {
                doc["endTime"] = json!(rfc3339_millis(e));
            }
            if let Some((code, message)) = &op.error {
                doc["error"] = json!({"code": code, "message": message});
            }
            let mut r = json_response(StatusCode::OK, &doc);
            if op.end.is_none() {
                r.headers_mut().insert("retry-after", HeaderValue::from(retry_after_secs(ctx.now, op.deadline)));
            }
            return Ok(r);
        }
        // Location polling: 202 while running, then the final result.
        if op.end.is_none() {
            let mut r = Response::builder().status(StatusCode::ACCEPTED).body(axum::body::Body::empty()).unwrap_or_default();
            if let Ok(v) = HeaderValue::from_str(&format!("{base}/subscriptions/{}/providers/Microsoft.ContainerService/locations/{}/operationresults/{}?api-version={api_version}", segs[1], segs[5], op.id)) {
                r.headers_mut().insert("location", v);
            }
            r.headers_mut().insert("retry-after", HeaderValue::from(retry_after_secs(ctx.now, op.deadline)));
            return Ok(r);
        }
        if let Some((code, message)) = &op.error {
            return Ok(json_response(StatusCode::BAD_REQUEST, &error_body(code, message)));
        }
        if op.kind == OpKind::Delete {
            return Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default());
        }
        let c = w.aks.clusters.get(&op.cluster);
        match c.and_then(|c| c.pools.get(&op.pool).map(|p| pool_json(c, p))) {
            Some(doc) => Ok(json_response(StatusCode::OK, &doc)),
            None => Ok(Response::builder().status(StatusCode::NO_CONTENT).body(axum::body::Body::empty()).unwrap_or_default()),
        }
    })
}
