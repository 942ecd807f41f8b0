//! GKE node pools through Google's official `google-cloud-container-v1` client (REST v1).
//!
//! A [`PoolSpec`] becomes a `NodePool`; every mutation answers with a GKE `Operation` (not a
//! google.longrunning LRO) that we poll ourselves under the [`OpCtx`] deadline and stop signal.
//! The client library's own retry loop is switched off (`NeverRetry`) so that retries happen in one
//! place, here, where Retry-After, the deadline and terraform's stop are known.
//!
//! Reading a pool back must give the spec it was created from, or terraform sees a perpetual diff
//! (magic-modules #11152): values GKE fills in itself (driver installation config, the default disk
//! size, management defaults, its own `cloud.google.com/` labels and GPU taint) are dropped on read,
//! and [`canonical_spec`] applies the same normalisation to a user's spec before comparing.
//!
//! The v1 `NodePool` resource has no current-size field: `initialNodeCount` stays what create set.
//! Like the google provider, a fixed-size pool's size is read from its Compute instance group
//! managers (`instanceGroupUrls`, `targetSize`, per zone). That read is best effort: when it fails
//! (or the sandbox serves no Compute API) the size falls back to `initialNodeCount`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_container_v1 as gcc;
use google_cloud_container_v1::client::ClusterManager;
use google_cloud_container_v1::model::{
    self as m, AcceleratorConfig, GPUDriverInstallationConfig, GPUSharingConfig, NodeConfig,
    NodeLabels, NodeManagement, NodePool, NodePoolAutoscaling, NodeTaint, NodeTaints, Operation,
};

use super::{
    CloudError, Detail, GkeSharing, Location, NodePools, OpCtx, Pool, PoolGpu, PoolSpec, PoolTaint,
    Scaling,
};
use crate::operation::{
    Attempt, Backoff, Check, Failure, Start, poll_until, retry, retry_after_seconds,
    retryable_status,
};

/// GKE's boot disk size when `diskSizeGb` is not set.
pub const GKE_DEFAULT_DISK_GB: u32 = 100;
/// The taint GKE puts on every GPU node by itself.
const GKE_GPU_TAINT: (&str, &str, &str) = ("nvidia.com/gpu", "present", "NoSchedule");
/// Label prefixes only GKE may set; they are GKE's, not the user's, when they show up on a read.
const GKE_LABEL_PREFIXES: &[&str] = &["cloud.google.com/", "node.kubernetes.io/"];

/// Transient failures (429, 5xx, dropped connections) retried per call before giving up.
const MAX_TRANSIENT_RETRIES: u32 = 8;
const RETRY_CAP: Duration = Duration::from_secs(20);
const POLL_CAP: Duration = Duration::from_secs(10);

/// How to reach GKE. With nothing set: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
/// the gcloud ADC file, the metadata server) against container.googleapis.com.
#[derive(Clone, Default)]
pub struct GkeConfig {
    /// The project of `gke` blocks that name none (GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT); the
    /// client takes the project from each pool's location.
    pub project: Option<String>,
    /// A credentials JSON document (service account key, authorized user, external account) or the
    /// path of one.
    pub credentials: Option<String>,
    /// An OAuth2 access token used as is (e.g. from `gcloud auth print-access-token`).
    pub access_token: Option<String>,
    /// Another API endpoint, e.g. a private service connect address.
    pub endpoint: Option<String>,
    /// Base URL of a fracgpu sandbox: used as the endpoint, with anonymous credentials.
    pub sandbox: Option<String>,
}

impl fmt::Debug for GkeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("GkeConfig")
            .field("credentials", &redact(&self.credentials))
            .field("access_token", &redact(&self.access_token))
            .field("endpoint", &self.endpoint)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// Delays of the client's waits. The defaults suit GKE, whose operations take minutes.
#[derive(Clone, Copy, Debug)]
pub struct GkeTiming {
    /// First delay between polls of an operation (doubling up to 10 s).
    pub poll_first: Duration,
    /// First delay before retrying a throttled or failed call (doubling up to 20 s; Retry-After wins).
    pub retry_first: Duration,
}

impl Default for GkeTiming {
    fn default() -> Self {
        GkeTiming {
            poll_first: Duration::from_secs(1),
            retry_first: Duration::from_millis(500),
        }
    }
}

/// The GKE implementation of [`NodePools`].
#[derive(Clone, Debug)]
pub struct GkeClient {
    cm: ClusterManager,
    timing: GkeTiming,
    /// For the Compute instance group manager reads, which the container client cannot do.
    creds: google_cloud_auth::credentials::Credentials,
    http: reqwest::Client,
    /// Sandbox base URL: instance group URLs are rewritten to it.
    sandbox: Option<String>,
}

impl GkeClient {
    pub async fn new(cfg: GkeConfig) -> Result<GkeClient, CloudError> {
        let endpoint = cfg
            .sandbox
            .as_deref()
            .or(cfg.endpoint.as_deref())
            .unwrap_or("https://container.googleapis.com")
            .trim_end_matches('/')
            .to_string();
        let creds = if cfg.sandbox.is_some() {
            google_cloud_auth::credentials::anonymous::Builder::new().build()
        } else if let Some(t) = &cfg.access_token {
            google_cloud_auth::credentials::Credentials::from(StaticToken::new(t)?)
        } else if let Some(c) = &cfg.credentials {
            credentials_from(c)?
        } else {
            // Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file,
            // the metadata server.
            google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| {
                    CloudError::Auth(Detail::caused_by(format!(
                        "no Google credentials: {e}; set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or set the provider's credentials"
                    ), e))
                })?
        };
        let http = super::gke_http::http_client().map_err(|e| {
            let message = format!("cannot set up an HTTP client: {e}");
            CloudError::Transport(Detail::caused_by(message, e))
        })?;
        // Our own transport under the official client: every answer is read with a size cap
        // and a time limit (see gke_http). Retries stay ours too (`call`).
        let cm = ClusterManager::from_stub(super::gke_http::BoundedTransport {
            http: http.clone(),
            endpoint,
            creds: creds.clone(),
        });
        // The sandbox's operations take about two seconds, not minutes: poll and retry sooner, as
        // the AKS and EKS clients do against it.
        let timing = if cfg.sandbox.is_some() {
            GkeTiming {
                poll_first: Duration::from_millis(250),
                retry_first: Duration::from_millis(100),
            }
        } else {
            GkeTiming::default()
        };
        Ok(GkeClient {
            cm,
            timing,
            creds,
            http,
            sandbox: cfg.sandbox.map(|s| s.trim_end_matches('/').to_string()),
        })
    }

    pub fn with_timing(mut self, timing: GkeTiming) -> GkeClient {
        self.timing = timing;
        self
    }
}

/// Credentials from a JSON document or the path of one, by its `type`.
fn credentials_from(
    content_or_path: &str,
) -> Result<google_cloud_auth::credentials::Credentials, CloudError> {
    use google_cloud_auth::credentials as c;
    let text = if content_or_path.trim_start().starts_with('{') {
        content_or_path.to_string()
    } else {
        std::fs::read_to_string(content_or_path).map_err(|e| {
            CloudError::Auth(Detail::caused_by(
                format!("cannot read the credentials file {content_or_path}: {e}"),
                e,
            ))
        })?
    };
    // Never echo the document: it holds a private key. Hence only the position of a syntax
    // error, and not the parser's error as a source, whose text could quote the document.
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        CloudError::Auth(
            format!(
                "the credentials are not a JSON document (line {}, column {})",
                e.line(),
                e.column()
            )
            .into(),
        )
    })?;
    let kind = json
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or("")
        .to_string();
    let built = match kind.as_str() {
        "service_account" => c::service_account::Builder::new(json).build(),
        "authorized_user" => c::user_account::Builder::new(json).build(),
        "external_account" => c::external_account::Builder::new(json).build(),
        "impersonated_service_account" => c::impersonated::Builder::new(json).build(),
        other => {
            return Err(CloudError::Auth(format!(
                "unsupported credentials type {other:?}: use a service_account, authorized_user, external_account or impersonated_service_account document"
            ).into()));
        }
    };
    built.map_err(|e| {
        CloudError::Auth(Detail::caused_by(
            format!("invalid {kind} credentials: {e}"),
            e,
        ))
    })
}

/// A bearer token given by the user. Debug never shows it.
struct StaticToken {
    header: http::HeaderValue,
    tag: google_cloud_auth::credentials::EntityTag,
}

impl StaticToken {
    fn new(token: &str) -> Result<StaticToken, CloudError> {
        let mut header =
            http::HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|e| {
                CloudError::Auth(Detail::caused_by(
                    "the access token contains characters not allowed in an HTTP header",
                    e,
                ))
            })?;
        header.set_sensitive(true);
        Ok(StaticToken {
            header,
            tag: google_cloud_auth::credentials::EntityTag::new(),
        })
    }
}

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl google_cloud_auth::credentials::CredentialsProvider for StaticToken {
    async fn headers(
        &self,
        extensions: http::Extensions,
    ) -> Result<
        google_cloud_auth::credentials::CacheableResource<http::HeaderMap>,
        google_cloud_auth::errors::CredentialsError,
    > {
        use google_cloud_auth::credentials::{CacheableResource, EntityTag};
        if extensions.get::<EntityTag>() == Some(&self.tag) {
            return Ok(CacheableResource::NotModified);
        }
        let mut data = http::HeaderMap::new();
        data.insert(http::header::AUTHORIZATION, self.header.clone());
        Ok(CacheableResource::New {
            entity_tag: self.tag.clone(),
            data,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        Some("googleapis.com".to_string())
    }
}

// ---------------------------------------------------------------- mapping

fn gke_location(loc: &Location) -> Result<(&str, &str, &str), CloudError> {
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

fn cluster_path(loc: &Location) -> Result<String, CloudError> {
    let (p, l, c) = gke_location(loc)?;
    Ok(format!("projects/{p}/locations/{l}/clusters/{c}"))
}

/// The pool's ID, also its API name: `projects/P/locations/L/clusters/C/nodePools/N`.
pub fn pool_id(loc: &Location, name: &str) -> Result<String, CloudError> {
    Ok(format!("{}/nodePools/{name}", cluster_path(loc)?))
}

/// Parses `projects/P/locations/L/clusters/C/nodePools/N` (the import ID) into location and name.
pub fn parse_pool_id(id: &str) -> Option<(Location, String)> {
    match id
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["projects", p, "locations", l, "clusters", c, "nodePools", n]
            if [p, l, c, n].iter().all(|s| !s.is_empty()) =>
        {
            Some((
                Location::Gke {
                    project: p.to_string(),
                    location: l.to_string(),
                    cluster: c.to_string(),
                },
                n.to_string(),
            ))
        }
        _ => None,
    }
}

/// A spec as a read of the pool would report it: GKE's default disk size is None, GKE's own GPU
/// taint and labels are not the user's. Compare `canonical_spec(desired)` with `get`'s spec.
pub fn canonical_spec(spec: &PoolSpec) -> PoolSpec {
    let mut s = spec.clone();
    if s.disk_size_gb == Some(GKE_DEFAULT_DISK_GB) {
        s.disk_size_gb = None;
    }
    s.taints
        .retain(|t| !is_gke_gpu_taint(&t.key, &t.value, &t.effect));
    s.labels.retain(|k, _| !is_gke_label(k));
    s
}

fn is_gke_gpu_taint(key: &str, value: &str, k8s_effect: &str) -> bool {
    (key, value, k8s_effect) == GKE_GPU_TAINT
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

fn gke_taints(taints: &[PoolTaint]) -> Result<Vec<NodeTaint>, CloudError> {
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

fn gke_labels(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn gke_autoscaling(scaling: Scaling) -> NodePoolAutoscaling {
    let mut a = NodePoolAutoscaling::default();
    if let Scaling::Auto { min, max } = scaling {
        a.enabled = true;
        a.min_node_count = clamp_i32(min);
        a.max_node_count = clamp_i32(max);
    }
    a
}

fn clamp_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The NodePool a create sends.
pub fn node_pool_of(spec: &PoolSpec) -> Result<NodePool, CloudError> {
    let mut config = NodeConfig::default();
    config.machine_type = spec.machine_type.clone();
    config.disk_size_gb = spec.disk_size_gb.map_or(0, clamp_i32);
    config.labels = gke_labels(&spec.labels);
    config.taints = gke_taints(&spec.taints)?;
    config.spot = spec.spot;
    if let Some(ty) = &spec.gpu.gke_accelerator_type {
        let mut a = AcceleratorConfig::default();
        a.accelerator_type = ty.clone();
        a.accelerator_count = i64::from(spec.gpu.count);
        a.gpu_partition_size = spec.gpu.gke_partition_size.clone().unwrap_or_default();
        if let Some(sharing) = spec.gpu.gke_sharing {
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
    match spec.scaling {
        Scaling::Fixed { nodes } => np.initial_node_count = clamp_i32(nodes),
        Scaling::Auto { min, .. } => {
            // GKE accepts 0 with autoscaling (scale from zero); it must lie within [min, max].
            np.initial_node_count = clamp_i32(min);
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

/// A NodePool read back in neutral terms; see the module docs on what is dropped.
pub fn spec_of(location: &Location, np: &NodePool) -> PoolSpec {
    let empty = NodeConfig::default();
    let config = np.config.as_ref().unwrap_or(&empty);
    let scaling = match &np.autoscaling {
        Some(a) if a.enabled => {
            let (min, max) = if a.min_node_count == 0 && a.max_node_count == 0 {
                (a.total_min_node_count, a.total_max_node_count)
            } else {
                (a.min_node_count, a.max_node_count)
            };
            Scaling::Auto {
                min: min.max(0) as u32,
                max: max.max(0) as u32,
            }
        }
        _ => Scaling::Fixed {
            nodes: np.initial_node_count.max(0) as u32,
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
    let gpu = config
        .accelerators
        .first()
        .map(|a| PoolGpu {
            count: u32::try_from(a.accelerator_count).unwrap_or(0),
            gke_accelerator_type: Some(a.accelerator_type.clone()).filter(|t| !t.is_empty()),
            gke_partition_size: Some(a.gpu_partition_size.clone()).filter(|p| !p.is_empty()),
            gke_sharing: a.gpu_sharing_config.as_ref().and_then(|sc| {
                use m::gpu_sharing_config::GPUSharingStrategy as S;
                let max_clients = u32::try_from(sc.max_shared_clients_per_gpu).unwrap_or(0);
                match sc.gpu_sharing_strategy {
                    Some(S::TimeSharing) => Some(GkeSharing::TimeSharing { max_clients }),
                    Some(S::Mps) => Some(GkeSharing::Mps { max_clients }),
                    _ => None,
                }
            }),
            aks_gpu_instance_profile: None,
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
        gpu,
        os_sku: None,
        eks: None,
    }
}

/// Why a pool is in ERROR: the status message (deprecated in favour of conditions, still filled).
#[allow(deprecated)]
fn pool_message(np: &NodePool) -> String {
    let mut parts: Vec<String> = np.conditions.iter().map(|c| c.message.clone()).collect();
    if !np.status_message.is_empty() {
        parts.insert(0, np.status_message.clone());
    }
    parts.join("; ")
}

fn status_name(np: &NodePool) -> String {
    np.status.name().unwrap_or("STATUS_UNSPECIFIED").to_string()
}

// ---------------------------------------------------------------- errors and retries

/// What a failed call is worth.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// 429, 5xx, UNAVAILABLE, a dropped or refused connection: try again after a backoff.
    Transient,
    /// GKE runs another operation on the cluster or pool: wait for it, then try again.
    Busy,
    Final,
}

fn verdict(e: &gcc::Error) -> Verdict {
    if let Some(s) = e.status() {
        use google_cloud_gax::error::rpc::Code;
        match s.code {
            Code::Unavailable => return Verdict::Transient,
            Code::FailedPrecondition if is_busy_message(&s.message) => return Verdict::Busy,
            _ => {}
        }
    }
    if let Some(code) = e.http_status_code() {
        return if retryable_status(code) {
            Verdict::Transient
        } else {
            Verdict::Final
        };
    }
    if e.is_io() || e.is_connect() || e.is_transport() || e.is_timeout() {
        return Verdict::Transient;
    }
    Verdict::Final
}

/// GKE refuses a second operation on a cluster while one runs: "Cluster is running incompatible
/// operation operation-...", "Operation operation-... is currently creating node pool ... Please
/// wait and try again once it is done." Other FAILED_PRECONDITIONs are final.
fn is_busy_message(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("incompatible operation")
        || m.contains("operation in progress")
        || m.contains("wait and try again")
        || (m.contains("operation") && m.contains("is currently"))
}

fn http_of_code(code: &str) -> u16 {
    match code {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "UNAUTHENTICATED" => 401,
        "PERMISSION_DENIED" => 403,
        "NOT_FOUND" => 404,
        "ALREADY_EXISTS" | "ABORTED" => 409,
        "RESOURCE_EXHAUSTED" => 429,
        "CANCELLED" => 499,
        "UNIMPLEMENTED" => 501,
        "UNAVAILABLE" => 503,
        "DEADLINE_EXCEEDED" => 504,
        _ => 500,
    }
}

fn code_of_http(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The client library's error as the cloud-neutral one, keeping google.rpc's code and message
/// (and the error itself as the source of the errors that have no code).
fn cloud_error(e: gcc::Error) -> CloudError {
    if let Some(s) = e.status() {
        let code = s.code.name().to_string();
        return CloudError::Api {
            status: e.http_status_code().unwrap_or_else(|| http_of_code(&code)),
            message: s.message.clone(),
            code,
        };
    }
    if let Some(status) = e.http_status_code() {
        let body = e
            .http_payload()
            .map(|b| {
                String::from_utf8_lossy(b)
                    .chars()
                    .take(300)
                    .collect::<String>()
            })
            .unwrap_or_default();
        return CloudError::Api {
            status,
            code: code_of_http(status).to_string(),
            message: if body.trim().is_empty() {
                format!("HTTP {status} without a google.rpc status")
            } else {
                body
            },
        };
    }
    let message = super::error_chain(&e);
    if e.is_authentication() {
        return CloudError::Auth(Detail::caused_by(message, e));
    }
    if e.is_deserialization() || e.is_serialization() {
        return CloudError::BadResponse(Detail::caused_by(message, e));
    }
    CloudError::Transport(Detail::caused_by(message, e))
}

fn retry_after(e: &gcc::Error) -> Option<Duration> {
    retry_after_seconds(
        e.http_headers()
            .and_then(|h| h.get("retry-after"))
            .and_then(|v| v.to_str().ok()),
    )
}

/// Where an operation stands: DONE (and then whether it failed, as `OperationFailed` with
/// google.rpc's code) or still running.
fn operation_state(op: &Operation) -> Result<Check<()>, CloudError> {
    if op.status != m::operation::Status::Done {
        return Ok(Check::Pending {
            retry_after: None,
            waiting_for: None,
        });
    }
    match &op.error {
        Some(err) if err.code != 0 || !err.message.is_empty() => Err(CloudError::OperationFailed {
            code: op_error_code(err.code),
            message: err.message.clone(),
        }),
        _ => Ok(Check::Done(())),
    }
}

fn op_error_code(code: i32) -> String {
    google_cloud_gax::error::rpc::Code::from(code)
        .name()
        .to_string()
}

impl GkeClient {
    /// Calls `f` until it succeeds, retrying transient failures (at most
    /// MAX_TRANSIENT_RETRIES times) and, for mutations, GKE's "operation in progress" refusals
    /// (until the deadline), all bounded by `ctx`.
    async fn call<T, Fut>(
        &self,
        ctx: &OpCtx,
        what: &str,
        mutation: bool,
        mut f: impl FnMut() -> Fut,
    ) -> Result<T, CloudError>
    where
        Fut: Future<Output = gcc::Result<T>>,
    {
        let attempt = move || {
            let sent = f();
            async move {
                // A call in flight is abandoned at the deadline or on a stop: terraform waits for
                // the provider to return before it exits.
                let e = match ctx.run(what, sent).await? {
                    Ok(v) => return Ok(Attempt::Done(v)),
                    Err(e) => e,
                };
                let verdict = verdict(&e);
                if !(verdict == Verdict::Transient || (verdict == Verdict::Busy && mutation)) {
                    return Err(cloud_error(e));
                }
                let retry_after = retry_after(&e);
                let last = cloud_error(e);
                let failure = Failure {
                    // A timeout names what kept us waiting, e.g. another operation on the cluster.
                    waiting_for: format!("{what} (last answer: {last})"),
                    last: Err(last),
                    retry_after,
                };
                Ok(if verdict == Verdict::Busy {
                    Attempt::Busy(failure)
                } else {
                    Attempt::Failed(failure)
                })
            }
        };
        let log = |f: &Failure<T>, _: u32, delay: Duration| {
            if let Err(last) = &f.last {
                tracing::debug!(
                    call = what,
                    error = %last,
                    retry_in_ms = delay.as_millis() as u64,
                    "GKE call failed; retrying"
                );
            }
        };
        let backoff = Backoff::new(self.timing.retry_first, RETRY_CAP);
        // The attempts are the first and its transient retries.
        retry(ctx, backoff, MAX_TRANSIENT_RETRIES + 1, attempt, log).await
    }

    /// Polls the operation until DONE. A failed operation is `OperationFailed` with google.rpc's code.
    async fn wait(&self, loc: &Location, op: Operation, ctx: &OpCtx) -> Result<(), CloudError> {
        if let Check::Done(()) = operation_state(&op)? {
            return Ok(());
        }
        let (p, l, _) = gke_location(loc)?;
        let name = &if op.name.starts_with("projects/") {
            op.name.clone()
        } else {
            format!("projects/{p}/locations/{l}/operations/{}", op.name)
        };
        let what = &format!(
            "GKE operation {} ({})",
            op.name,
            op.operation_type.name().unwrap_or("?")
        );
        let backoff = Backoff::polling(self.timing.poll_first, POLL_CAP);
        let start = Start::Sleep(None);
        poll_until(ctx, backoff, what.clone(), start, move |_| async move {
            let op = self
                .call(ctx, what, false, || {
                    self.cm.get_operation().set_name(name.clone()).send()
                })
                .await?;
            operation_state(&op)
        })
        .await
    }

    async fn get_raw(
        &self,
        loc: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<NodePool>, CloudError> {
        let id = pool_id(loc, name)?;
        match self
            .call(ctx, &format!("GET {id}"), false, || {
                self.cm.get_node_pool().set_name(id.clone()).send()
            })
            .await
        {
            Ok(np) => Ok(Some(np)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn pool_of(&self, loc: &Location, np: &NodePool) -> Result<Pool, CloudError> {
        let mut spec = spec_of(loc, np);
        if let Scaling::Fixed { .. } = spec.scaling
            && let Some(nodes) = self.current_size(np).await
        {
            spec.scaling = Scaling::Fixed { nodes };
        }
        Ok(Pool {
            id: pool_id(loc, &np.name)?,
            spec,
            status: status_name(np),
        })
    }

    /// The pool's current size per zone from its instance group managers' targetSize, or None
    /// when any of them cannot be read.
    async fn current_size(&self, np: &NodePool) -> Option<u32> {
        if np.instance_group_urls.is_empty() {
            return None;
        }
        let mut total: u64 = 0;
        for url in &np.instance_group_urls {
            let url = compute_url(self.sandbox.as_deref(), url)?;
            match self.target_size(&url).await {
                Ok(n) => total += n,
                Err(e) => {
                    tracing::debug!(url = %url, error = %e, "cannot read the instance group size; using initialNodeCount");
                    return None;
                }
            }
        }
        u32::try_from(total / np.instance_group_urls.len() as u64).ok()
    }

    async fn target_size(&self, url: &str) -> Result<u64, String> {
        use google_cloud_auth::credentials::CacheableResource;
        let headers = match self
            .creds
            .headers(http::Extensions::new())
            .await
            .map_err(|e| e.to_string())?
        {
            CacheableResource::New { data, .. } => data,
            CacheableResource::NotModified => http::HeaderMap::new(),
        };
        let r = self
            .http
            .get(url)
            .headers(headers)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("HTTP {}", r.status()));
        }
        let body = super::gke_http::read_capped(r, super::gke_http::MAX_BODY)
            .await
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        // int32 in Compute's JSON, but accept a string as int64s are sent.
        match &v["targetSize"] {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        }
        .ok_or_else(|| "no targetSize in the instance group manager".to_string())
    }

    /// A pool that was just created or changed, read back.
    async fn reread(&self, loc: &Location, name: &str, ctx: &OpCtx) -> Result<Pool, CloudError> {
        match self.get_raw(loc, name, ctx).await? {
            Some(np) => self.pool_of(loc, &np).await,
            None => Err(CloudError::BadResponse(
                format!(
                    "node pool {} vanished right after its operation finished",
                    pool_id(loc, name)?
                )
                .into(),
            )),
        }
    }

    /// Adopts a pool an earlier attempt of this create left behind, once its own operation ends.
    async fn adopt(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let id = &pool_id(&spec.location, &spec.name)?;
        let backoff = Backoff::polling(self.timing.poll_first, POLL_CAP);
        let what = format!("node pool {id} to finish provisioning");
        poll_until(ctx, backoff, what, Start::Now, move |_| async move {
            let Some(np) = self.get_raw(&spec.location, &spec.name, ctx).await? else {
                return Err(CloudError::Api {
                    status: 409,
                    code: "ALREADY_EXISTS".into(),
                    message: format!(
                        "GKE reported node pool {id} as existing but it is gone now; retry the apply"
                    ),
                });
            };
            // Compared as created (initialNodeCount, not the instance groups' size, which may
            // still be ramping up while the pool provisions).
            if spec_of(&spec.location, &np) != canonical_spec(spec) {
                return Err(CloudError::Api {
                    status: 409,
                    code: "ALREADY_EXISTS".into(),
                    message: format!(
                        "node pool {id} already exists with a different configuration; import it with `terraform import <address> {id}` or choose another name"
                    ),
                });
            }
            use m::node_pool::Status as S;
            match np.status {
                S::Provisioning | S::Reconciling => Ok(Check::Pending {
                    retry_after: None,
                    waiting_for: None,
                }),
                S::Error | S::Stopping => Err(CloudError::OperationFailed {
                    code: status_name(&np),
                    message: format!(
                        "node pool {id} (left by an earlier attempt of this create) is {}: {}",
                        status_name(&np),
                        pool_message(&np)
                    ),
                }),
                _ => self.pool_of(&spec.location, &np).await.map(Check::Done),
            }
        })
        .await
    }

    /// Sends one mutation and waits for its operation.
    async fn mutate<Fut>(
        &self,
        loc: &Location,
        what: &str,
        ctx: &OpCtx,
        f: impl FnMut() -> Fut,
    ) -> Result<(), CloudError>
    where
        Fut: Future<Output = gcc::Result<Operation>>,
    {
        let op = self.call(ctx, what, true, f).await?;
        tracing::debug!(call = what, operation = %op.name, "GKE operation started");
        self.wait(loc, op, ctx).await
    }
}

/// Where to read an instance group manager. Credentials only ever go to Google's APIs or the
/// sandbox, whatever URL a response names.
fn compute_url(sandbox: Option<&str>, url: &str) -> Option<String> {
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
fn replacement_fields(a: &PoolSpec, b: &PoolSpec) -> Vec<&'static str> {
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
    if a.gpu != b.gpu {
        v.push("gpu");
    }
    if a.name != b.name || a.location != b.location {
        v.push("name/location");
    }
    v
}

#[async_trait]
impl NodePools for GkeClient {
    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        match self.get_raw(location, name, ctx).await? {
            // A pool being deleted is gone for the user.
            Some(np) if np.status == m::node_pool::Status::Stopping => Ok(None),
            Some(np) => Ok(Some(self.pool_of(location, &np).await?)),
            None => Ok(None),
        }
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let parent = cluster_path(&spec.location)?;
        let np = node_pool_of(spec)?;
        let what = format!("create node pool {parent}/nodePools/{}", spec.name);
        let sent = self
            .call(ctx, &what, true, || {
                self.cm
                    .create_node_pool()
                    .set_parent(parent.clone())
                    .set_node_pool(np.clone())
                    .send()
            })
            .await;
        match sent {
            Ok(op) => {
                self.wait(&spec.location, op, ctx).await?;
                self.reread(&spec.location, &spec.name, ctx).await
            }
            // A retried create (ours after a lost answer, or terraform's after a crash) finds the
            // pool that the first attempt made.
            Err(CloudError::Api { code, .. }) if code == "ALREADY_EXISTS" => {
                self.adopt(spec, ctx).await
            }
            Err(e) => Err(e),
        }
    }

    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let loc = &spec.location;
        let id = pool_id(loc, &spec.name)?;
        let want = canonical_spec(spec);
        let have = canonical_spec(&current.spec);
        let fixed = replacement_fields(&have, &want);
        if !fixed.is_empty() {
            return Err(CloudError::Api {
                status: 400,
                code: "INVALID_ARGUMENT".into(),
                message: format!(
                    "GKE cannot change {} of node pool {id} in place; the pool must be replaced",
                    fixed.join(", ")
                ),
            });
        }
        if have.scaling != want.scaling {
            if let Scaling::Auto { .. } = want.scaling {
                let a = gke_autoscaling(want.scaling);
                self.mutate(loc, &format!("setAutoscaling {id}"), ctx, || {
                    self.cm
                        .set_node_pool_autoscaling()
                        .set_name(id.clone())
                        .set_autoscaling(a.clone())
                        .send()
                })
                .await?;
            } else if let Scaling::Fixed { nodes } = want.scaling {
                if let Scaling::Auto { .. } = have.scaling {
                    let off = gke_autoscaling(want.scaling);
                    self.mutate(loc, &format!("setAutoscaling {id}"), ctx, || {
                        self.cm
                            .set_node_pool_autoscaling()
                            .set_name(id.clone())
                            .set_autoscaling(off.clone())
                            .send()
                    })
                    .await?;
                }
                self.mutate(loc, &format!("setSize {id}"), ctx, || {
                    self.cm
                        .set_node_pool_size()
                        .set_name(id.clone())
                        .set_node_count(clamp_i32(nodes))
                        .send()
                })
                .await?;
            }
        }
        if have.labels != want.labels {
            let mut labels = NodeLabels::default();
            labels.labels = gke_labels(&want.labels);
            self.mutate(loc, &format!("update labels of {id}"), ctx, || {
                self.cm
                    .update_node_pool()
                    .set_name(id.clone())
                    .set_labels(labels.clone())
                    .send()
            })
            .await?;
        }
        if have.taints != want.taints {
            let mut taints = NodeTaints::default();
            taints.taints = gke_taints(&want.taints)?;
            self.mutate(loc, &format!("update taints of {id}"), ctx, || {
                self.cm
                    .update_node_pool()
                    .set_name(id.clone())
                    .set_taints(taints.clone())
                    .send()
            })
            .await?;
        }
        let mut pool = self.reread(loc, &spec.name, ctx).await?;
        if let Scaling::Fixed { .. } = want.scaling {
            // If the instance groups could not be read, the read fell back to initialNodeCount
            // (see the module docs); the setSize operation above finished, so the size is ours.
            pool.spec.scaling = want.scaling;
        }
        Ok(pool)
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let id = pool_id(location, name)?;
        let sent = self
            .call(ctx, &format!("delete node pool {id}"), true, || {
                self.cm.delete_node_pool().set_name(id.clone()).send()
            })
            .await;
        match sent {
            Ok(op) => self.wait(location, op, ctx).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc() -> Location {
        Location::Gke {
            project: "p".into(),
            location: "us-central1".into(),
            cluster: "c".into(),
        }
    }

    fn spec() -> PoolSpec {
        PoolSpec {
            location: loc(),
            name: "ts".into(),
            machine_type: "g2-standard-4".into(),
            scaling: Scaling::Auto { min: 0, max: 3 },
            spot: true,
            disk_size_gb: None,
            labels: BTreeMap::from([("team".into(), "ml".into())]),
            taints: vec![PoolTaint {
                key: "nvidia.com/gpu".into(),
                value: "Present".into(),
                effect: "NoSchedule".into(),
            }],
            gpu: PoolGpu {
                count: 1,
                gke_accelerator_type: Some("nvidia-l4".into()),
                gke_partition_size: None,
                gke_sharing: Some(GkeSharing::TimeSharing { max_clients: 10 }),
                aks_gpu_instance_profile: None,
            },
            os_sku: None,
            eks: None,
        }
    }

    #[test]
    fn a_node_pool_maps_back_to_its_spec_with_gke_defaults_filled_in() {
        let s = spec();
        let mut np = node_pool_of(&s).unwrap();
        // What GKE adds by itself.
        let c = np.config.as_mut().unwrap();
        c.disk_size_gb = 100;
        c.labels
            .insert("cloud.google.com/gke-nodepool".into(), "ts".into());
        let mut t = NodeTaint::default();
        t.key = "nvidia.com/gpu".into();
        t.value = "present".into();
        t.effect = m::node_taint::Effect::NoSchedule;
        c.taints.push(t);
        c.accelerators[0].gpu_driver_installation_config = None;
        assert_eq!(spec_of(&loc(), &np), canonical_spec(&s));
        assert_eq!(canonical_spec(&s), s);
    }

    #[test]
    fn canonical_spec_folds_the_default_disk_size() {
        let mut s = spec();
        s.disk_size_gb = Some(100);
        assert_eq!(canonical_spec(&s).disk_size_gb, None);
        s.disk_size_gb = Some(200);
        assert_eq!(canonical_spec(&s).disk_size_gb, Some(200));
    }

    #[test]
    fn pool_ids_round_trip_and_bad_ones_are_refused() {
        let id = pool_id(&loc(), "ts").unwrap();
        assert_eq!(
            id,
            "projects/p/locations/us-central1/clusters/c/nodePools/ts"
        );
        assert_eq!(parse_pool_id(&id), Some((loc(), "ts".to_string())));
        assert_eq!(parse_pool_id("projects/p/locations/l/clusters/c"), None);
        assert_eq!(
            parse_pool_id("projects//locations/l/clusters/c/nodePools/n"),
            None
        );
    }

    #[test]
    fn instance_group_reads_go_only_to_google_or_the_sandbox() {
        let igm =
            "https://www.googleapis.com/compute/v1/projects/p/zones/z-a/instanceGroupManagers/g";
        assert_eq!(compute_url(None, igm).as_deref(), Some(igm));
        assert_eq!(
            compute_url(Some("http://127.0.0.1:9"), igm).as_deref(),
            Some("http://127.0.0.1:9/compute/v1/projects/p/zones/z-a/instanceGroupManagers/g")
        );
        assert_eq!(compute_url(None, "https://evil.example/compute/v1/x"), None);
        assert_eq!(
            compute_url(None, "https://googleapis.com.evil.example/x"),
            None
        );
        assert_eq!(
            compute_url(None, "http://www.googleapis.com/compute/v1/x"),
            None
        );
    }

    #[test]
    fn busy_messages_are_recognised() {
        assert!(is_busy_message(
            "Cluster is running incompatible operation operation-123."
        ));
        assert!(is_busy_message("Another operation in progress"));
        assert!(is_busy_message(
            "Operation operation-1 is currently creating node pool a. Please wait and try again once it is done."
        ));
        assert!(!is_busy_message(
            "Autoscaling is enabled; disable it before setting the size."
        ));
        assert!(!is_busy_message("Node pool must have initialNodeCount"));
    }

    #[test]
    fn config_debug_hides_secrets() {
        let c = GkeConfig {
            credentials: Some("{\"private_key\": \"SECRET\"}".into()),
            access_token: Some("ya29.SECRET".into()),
            ..GkeConfig::default()
        };
        let d = format!("{c:?}");
        assert!(!d.contains("SECRET"), "{d}");
        assert!(!format!("{:?}", StaticToken::new("ya29.SECRET").unwrap()).contains("SECRET"));
    }
}
