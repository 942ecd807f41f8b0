//! AKS node pools through Azure Resource Manager: `Microsoft.ContainerService/managedClusters/{c}/agentPools`
//! at api-version 2025-10-01 (the version azurerm pins). No maintained management crate exists, so this is a
//! small reqwest client with serde models of just the fields the provider uses; tokens come from one
//! `azure_identity` credential, chosen from the ARM_* settings in the order azurerm documents (client secret,
//! OIDC / AKS workload identity, managed identity, Azure CLI).
//!
//! Every request is retried on throttling, server errors and dropped connections, bounded by the operation's
//! deadline and terraform's stop signal. Mutations are ARM long-running operations: the client follows
//! `Azure-AsyncOperation` (else `Location`, else the pool's own `provisioningState`).
//!
//! Drift detection compares the [`PoolSpec`] read back with the one the pool was created from, so values AKS
//! fills in on its own must read back as "not set". `get` has no spec to compare against, so a create records
//! in the pool's tag `fracgpu-cloud-defaults` which optional fields (osDiskSizeGB, osSKU) it left to AKS. For a
//! pool without that tag (made elsewhere, then imported), AKS's documented defaults (128 GB, Ubuntu) read back
//! as "not set".
//!
//! Sandbox mode points ARM at a local `fracgpu-sandbox`. azure_identity refuses an authority host that is
//! not https, so the real `ClientSecretCredential` is given a made-up https authority host and an HTTP
//! transport that delivers requests for that host to the sandbox over plain http: the credential's own form
//! body, response parsing and token cache run against the emulator's token endpoint.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use azure_core::credentials::{Secret, TokenCredential};
use reqwest::Url;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    CloudError, Detail, Location, NodePools, OpCtx, Pool, PoolGpu, PoolSpec, PoolTaint, Scaling,
};
use crate::operation::{
    Attempt, Backoff, Check, Failure, Start, poll_until, retry, retry_after_seconds,
    retryable_status,
};

pub const API_VERSION: &str = "2025-10-01";
pub const PUBLIC_ARM_ENDPOINT: &str = "https://management.azure.com";
/// The made-up https authority host the credential uses in sandbox mode (`.invalid` never resolves, so a
/// request for it can only ever reach the sandbox through [`SandboxTransport`]).
pub const SANDBOX_AUTHORITY_HOST: &str = "login.sandbox.invalid";
pub const SANDBOX_TENANT: &str = "00000000-0000-0000-0000-000000000000";
/// The pool tag listing the optional fields a create left to AKS's defaults.
pub const DEFAULTS_TAG: &str = "fracgpu-cloud-defaults";

/// Responses larger than this are refused: no agent pool document comes near it.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// What AKS uses when osDiskSizeGB / osSKU are not given (Linux, managed OS disk).
const AKS_DEFAULT_OS_DISK_GB: u32 = 128;
const AKS_DEFAULT_OS_SKU: &str = "Ubuntu";
/// AKS adds this label and taint to every Spot pool itself.
const SPOT_KEY: &str = "kubernetes.azure.com/scalesetpriority";

// ------------------------------------------------------------------------------------------- config

/// How the provider reaches Azure. Built by [`AksConfig::from_env_and`]; never printed with its secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AksConfig {
    pub tenant_id: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub use_cli: bool,
    pub use_msi: bool,
    pub use_oidc: bool,
    pub oidc_token: Option<String>,
    pub oidc_token_file_path: Option<String>,
    pub use_aks_workload_identity: bool,
    /// ARM base URL; `https://management.azure.com` when None.
    pub arm_endpoint: Option<String>,
    /// Entra ID authority; azure_identity's default (public cloud) when None.
    pub authority_host: Option<String>,
    /// Base URL of a running fracgpu-sandbox: ARM and tokens both come from it.
    pub sandbox: Option<String>,
}

impl fmt::Debug for AksConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |o: &Option<String>| if o.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("AksConfig")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("client_secret", &set(&self.client_secret))
            .field("use_cli", &self.use_cli)
            .field("use_msi", &self.use_msi)
            .field("use_oidc", &self.use_oidc)
            .field("oidc_token", &set(&self.oidc_token))
            .field("oidc_token_file_path", &self.oidc_token_file_path)
            .field("use_aks_workload_identity", &self.use_aks_workload_identity)
            .field("arm_endpoint", &self.arm_endpoint)
            .field("authority_host", &self.authority_host)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// The provider's `azure {}` block; each value wins over its environment variable.
#[derive(Clone, Default)]
pub struct AzureSettings {
    /// The subscription of `aks` blocks that name none (ARM_SUBSCRIPTION_ID); the client itself
    /// takes the subscription from each pool's location.
    pub subscription_id: Option<String>,
    pub tenant_id: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub use_cli: Option<bool>,
    pub use_msi: Option<bool>,
    pub use_oidc: Option<bool>,
    pub oidc_token: Option<String>,
    pub oidc_token_file_path: Option<String>,
    pub use_aks_workload_identity: Option<bool>,
    /// ARM_ENVIRONMENT: public, usgovernment or china.
    pub environment: Option<String>,
    pub arm_endpoint: Option<String>,
    pub authority_host: Option<String>,
    pub sandbox: Option<String>,
}

impl fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureSettings").finish_non_exhaustive()
    }
}

impl AksConfig {
    /// Explicit provider values, else the environment variables azurerm reads (ARM_TENANT_ID,
    /// ARM_CLIENT_ID, ARM_CLIENT_SECRET, ARM_USE_CLI, ARM_USE_MSI, ARM_USE_OIDC, ARM_OIDC_TOKEN,
    /// ARM_OIDC_TOKEN_FILE_PATH, ARM_USE_AKS_WORKLOAD_IDENTITY with AZURE_FEDERATED_TOKEN_FILE,
    /// AZURE_CLIENT_ID, AZURE_TENANT_ID; ARM_ENVIRONMENT; FRACGPU_SANDBOX).
    pub fn from_env_and(explicit: AzureSettings) -> Result<AksConfig, CloudError> {
        Self::from_lookup_and(|k| std::env::var(k).ok(), explicit)
    }

    /// [`AksConfig::from_env_and`] with the environment given as a lookup function.
    pub fn from_lookup_and(
        env: impl Fn(&str) -> Option<String>,
        explicit: AzureSettings,
    ) -> Result<AksConfig, CloudError> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let sandbox = explicit.sandbox.clone().or_else(|| var("FRACGPU_SANDBOX"));
        // Real credentials from the environment never go to a sandbox (it takes any, over plain http);
        // values written in the provider block still do, so a configuration can test its own.
        let cred = |k: &str| if sandbox.is_some() { None } else { var(k) };
        let flag = |o: Option<bool>, k: &str, default: bool| -> Result<bool, CloudError> {
            if let Some(b) = o {
                return Ok(b);
            }
            match var(k) {
                None => Ok(default),
                Some(v) => parse_bool(&v).ok_or_else(|| {
                    CloudError::Auth(
                        format!("{k}={v} is not a boolean: use true or false (or 1 or 0)").into(),
                    )
                }),
            }
        };
        let use_aks_workload_identity = flag(
            explicit.use_aks_workload_identity,
            "ARM_USE_AKS_WORKLOAD_IDENTITY",
            false,
        )?;
        // AKS workload identity fills what the pod's injected AZURE_* variables provide.
        let wi = |k: &str| {
            if use_aks_workload_identity {
                cred(k)
            } else {
                None
            }
        };
        let environment = explicit.environment.or_else(|| var("ARM_ENVIRONMENT"));
        let (env_arm, env_authority) = match environment.as_deref().map(str::to_ascii_lowercase) {
            None => (None, None),
            Some(e) => match e.as_str() {
                "public" => (None, None),
                "usgovernment" => (
                    Some("https://management.usgovcloudapi.net"),
                    Some("https://login.microsoftonline.us"),
                ),
                "china" => (
                    Some("https://management.chinacloudapi.cn"),
                    Some("https://login.chinacloudapi.cn"),
                ),
                other => {
                    return Err(CloudError::Auth(format!(
                        "ARM_ENVIRONMENT \"{other}\" is not supported: use public, usgovernment or china, or set the ARM endpoint and authority host explicitly"
                    ).into()));
                }
            },
        };
        Ok(AksConfig {
            tenant_id: explicit
                .tenant_id
                .or_else(|| cred("ARM_TENANT_ID"))
                .or_else(|| wi("AZURE_TENANT_ID")),
            client_id: explicit
                .client_id
                .or_else(|| cred("ARM_CLIENT_ID"))
                .or_else(|| wi("AZURE_CLIENT_ID")),
            client_secret: explicit.client_secret.or_else(|| cred("ARM_CLIENT_SECRET")),
            use_cli: flag(explicit.use_cli, "ARM_USE_CLI", true)?,
            use_msi: flag(explicit.use_msi, "ARM_USE_MSI", false)?,
            use_oidc: flag(explicit.use_oidc, "ARM_USE_OIDC", false)? || use_aks_workload_identity,
            oidc_token: explicit.oidc_token.or_else(|| cred("ARM_OIDC_TOKEN")),
            oidc_token_file_path: explicit
                .oidc_token_file_path
                .or_else(|| cred("ARM_OIDC_TOKEN_FILE_PATH"))
                .or_else(|| wi("AZURE_FEDERATED_TOKEN_FILE")),
            use_aks_workload_identity,
            arm_endpoint: explicit.arm_endpoint.or(env_arm.map(str::to_string)),
            authority_host: explicit
                .authority_host
                .or(env_authority.map(str::to_string)),
            sandbox,
        })
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" => Some(true),
        "0" | "f" | "false" => Some(false),
        _ => None,
    }
}

const NO_CREDENTIALS: &str = "no Azure credentials are configured. Set ARM_TENANT_ID, ARM_CLIENT_ID and ARM_CLIENT_SECRET (a service principal); or ARM_USE_OIDC=true with ARM_TENANT_ID, ARM_CLIENT_ID and ARM_OIDC_TOKEN or ARM_OIDC_TOKEN_FILE_PATH; or ARM_USE_AKS_WORKLOAD_IDENTITY=true (with the AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and AZURE_TENANT_ID the pod gets); or ARM_USE_MSI=true (with ARM_CLIENT_ID for a user-assigned identity); or log in with `az login` and leave ARM_USE_CLI unset or true. The same settings exist as arguments of the provider's azure {} block";

// ------------------------------------------------------------------------------------------- client

/// Delays of one client: a local sandbox answers in milliseconds, Azure in seconds.
#[derive(Clone, Copy, Debug)]
struct Timing {
    retry_first: Duration,
    retry_cap: Duration,
    poll_first: Duration,
    poll_cap: Duration,
    /// Floor under any delay, so a `Retry-After: 0` never turns into a busy loop.
    min_delay: Duration,
    /// Consecutive retryable failures of one request before giving up (the deadline may come first).
    max_attempts: u32,
    request_timeout: Duration,
}

impl Timing {
    /// Retries of a request. Backoff already jitters its own delays; a server's Retry-After is a
    /// minimum, so clients that got the same one are spread a little beyond it.
    fn retries(&self) -> Backoff {
        Backoff::new(self.retry_first, self.retry_cap)
            .at_least(self.min_delay)
            .spread_retry_after()
    }

    /// Polls of a long-running operation, spread like retries.
    fn polls(&self) -> Backoff {
        Backoff::polling(self.poll_first, self.poll_cap)
            .at_least(self.min_delay)
            .spread_retry_after()
    }
}

const AZURE_TIMING: Timing = Timing {
    retry_first: Duration::from_secs(1),
    retry_cap: Duration::from_secs(30),
    poll_first: Duration::from_secs(5),
    poll_cap: Duration::from_secs(30),
    min_delay: Duration::from_secs(1),
    max_attempts: 12,
    request_timeout: Duration::from_secs(60),
};

const SANDBOX_TIMING: Timing = Timing {
    retry_first: Duration::from_millis(100),
    retry_cap: Duration::from_secs(2),
    poll_first: Duration::from_millis(100),
    poll_cap: Duration::from_secs(1),
    min_delay: Duration::from_millis(20),
    max_attempts: 12,
    request_timeout: Duration::from_secs(30),
};

/// The ARM agent pool client.
pub struct AksClient {
    http: reqwest::Client,
    arm: Url,
    scope: String,
    credential: Arc<dyn TokenCredential>,
    /// Which credential was chosen, for messages (never its secret).
    credential_kind: &'static str,
    timing: Timing,
}

impl fmt::Debug for AksClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AksClient")
            .field("arm", &self.arm.as_str())
            .field("credential", &self.credential_kind)
            .finish_non_exhaustive()
    }
}

fn http_client() -> Result<reqwest::Client, CloudError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            let message = format!("cannot build the HTTP client: {}", super::error_chain(&e));
            CloudError::Transport(Detail::caused_by(message, e))
        })
}

fn parse_base(url: &str, what: &str) -> Result<Url, CloudError> {
    let u = Url::parse(url.trim()).map_err(|e| {
        CloudError::Auth(Detail::caused_by(
            format!("{what} \"{url}\" is not a URL: {e}"),
            e,
        ))
    })?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(CloudError::Auth(
            format!("{what} \"{url}\" must be an http(s) URL with a host").into(),
        ));
    }
    Ok(u)
}

fn auth_err(what: &str, e: azure_core::Error) -> CloudError {
    let message = format!("{what}: {}", super::error_chain(&e));
    CloudError::Auth(Detail::caused_by(message, e))
}

impl AksClient {
    /// Chooses one credential from `cfg` (client secret, then OIDC / AKS workload identity, then managed
    /// identity, then the Azure CLI, as azurerm does). Nothing is sent until the first call.
    pub fn new(cfg: AksConfig) -> Result<AksClient, CloudError> {
        let http = http_client()?;
        if let Some(sb) = &cfg.sandbox {
            return Self::sandbox(cfg.clone(), sb, http);
        }
        let arm = parse_base(
            cfg.arm_endpoint.as_deref().unwrap_or(PUBLIC_ARM_ENDPOINT),
            "the ARM endpoint",
        )?;
        let scope = format!("{}/.default", arm.as_str().trim_end_matches('/'));
        let client_options = || {
            let mut o = azure_core::http::ClientOptions::default();
            if let Some(host) = &cfg.authority_host {
                let mut custom = azure_core::cloud::CustomConfiguration::default();
                custom.authority_host = host.clone();
                o.cloud = Some(Arc::new(custom.into()));
            }
            o
        };
        let tenant = cfg.tenant_id.clone().filter(|t| !t.trim().is_empty());
        let client = cfg.client_id.clone().filter(|t| !t.trim().is_empty());
        let secret = cfg.client_secret.clone().filter(|t| !t.trim().is_empty());
        let (credential, kind): (Arc<dyn TokenCredential>, &'static str) =
            if let (Some(t), Some(c), Some(s)) = (&tenant, &client, &secret) {
                let cred = azure_identity::ClientSecretCredential::new(
                    t,
                    c.clone(),
                    Secret::new(s.clone()),
                    Some(azure_identity::ClientSecretCredentialOptions {
                        client_options: client_options(),
                    }),
                )
                .map_err(|e| auth_err("ARM_CLIENT_SECRET (client secret) credential", e))?;
                (cred, "client secret")
            } else if let (true, Some(t), Some(c), Some(token)) =
                (cfg.use_oidc, &tenant, &client, &cfg.oidc_token)
            {
                let cred = azure_identity::ClientAssertionCredential::new(
                    t.clone(),
                    c.clone(),
                    StaticAssertion(Secret::new(token.clone())),
                    Some(azure_identity::ClientAssertionCredentialOptions {
                        client_options: client_options(),
                    }),
                )
                .map_err(|e| auth_err("ARM_OIDC_TOKEN (OIDC) credential", e))?;
                (cred, "OIDC token")
            } else if let (true, Some(t), Some(c), Some(path)) =
                (cfg.use_oidc, &tenant, &client, &cfg.oidc_token_file_path)
            {
                let cred = azure_identity::WorkloadIdentityCredential::new(Some(
                    azure_identity::WorkloadIdentityCredentialOptions {
                        credential_options: azure_identity::ClientAssertionCredentialOptions {
                            client_options: client_options(),
                        },
                        client_id: Some(c.clone()),
                        tenant_id: Some(t.clone()),
                        token_file_path: Some(path.into()),
                    },
                ))
                .map_err(|e| auth_err("ARM_OIDC_TOKEN_FILE_PATH (OIDC) credential", e))?;
                let kind = if cfg.use_aks_workload_identity {
                    "AKS workload identity"
                } else {
                    "OIDC token file"
                };
                (cred, kind)
            } else if cfg.use_msi {
                let cred = azure_identity::ManagedIdentityCredential::new(Some(
                    azure_identity::ManagedIdentityCredentialOptions {
                        user_assigned_id: client
                            .clone()
                            .map(azure_identity::UserAssignedId::ClientId),
                        client_options: client_options(),
                    },
                ))
                .map_err(|e| auth_err("ARM_USE_MSI (managed identity) credential", e))?;
                (cred, "managed identity")
            } else if cfg.use_cli && az_on_path() {
                let cred = azure_identity::AzureCliCredential::new(Some(
                    azure_identity::AzureCliCredentialOptions {
                        tenant_id: tenant.clone(),
                        ..Default::default()
                    },
                ))
                .map_err(|e| auth_err("Azure CLI credential", e))?;
                (cred, "Azure CLI")
            } else {
                let mut msg = NO_CREDENTIALS.to_string();
                if cfg.use_cli {
                    msg.push_str(" (the Azure CLI `az` is not on PATH)");
                }
                if cfg.use_oidc {
                    msg.push_str(
                        " (OIDC is enabled but the tenant id, client id or token is missing)",
                    );
                }
                if secret.is_some() {
                    msg.push_str(
                        " (ARM_CLIENT_SECRET is set but ARM_TENANT_ID or ARM_CLIENT_ID is missing)",
                    );
                }
                return Err(CloudError::Auth(msg.into()));
            };
        Ok(AksClient {
            http,
            arm,
            scope,
            credential,
            credential_kind: kind,
            timing: AZURE_TIMING,
        })
    }

    fn sandbox(cfg: AksConfig, base: &str, http: reqwest::Client) -> Result<AksClient, CloudError> {
        let base = parse_base(base, "the sandbox URL")?;
        let mut custom = azure_core::cloud::CustomConfiguration::default();
        custom.authority_host = format!("https://{SANDBOX_AUTHORITY_HOST}");
        let transport = SandboxTransport {
            http: http.clone(),
            base: base.clone(),
        };
        // A local sandbox that does not answer will not start answering in a minute (azure_core's
        // default): say so within seconds.
        let retry = azure_core::http::RetryOptions::exponential(
            azure_core::http::ExponentialRetryOptions {
                initial_delay: azure_core::time::Duration::milliseconds(100),
                max_retries: 3,
                max_total_elapsed: azure_core::time::Duration::seconds(5),
                max_delay: azure_core::time::Duration::seconds(1),
            },
        );
        let client_options = azure_core::http::ClientOptions {
            transport: Some(azure_core::http::Transport::new(Arc::new(transport))),
            cloud: Some(Arc::new(custom.into())),
            retry,
            ..Default::default()
        };
        let credential = azure_identity::ClientSecretCredential::new(
            cfg.tenant_id.as_deref().unwrap_or(SANDBOX_TENANT),
            cfg.client_id
                .clone()
                .unwrap_or_else(|| "fracgpu-sandbox".into()),
            Secret::new(cfg.client_secret.unwrap_or_else(|| "sandbox".into())),
            Some(azure_identity::ClientSecretCredentialOptions { client_options }),
        )
        .map_err(|e| auth_err("sandbox credential", e))?;
        Ok(AksClient {
            http,
            scope: format!("{}/.default", PUBLIC_ARM_ENDPOINT),
            arm: base,
            credential,
            credential_kind: "sandbox client secret",
            timing: SANDBOX_TIMING,
        })
    }

    /// The ARM resource ID of a pool.
    pub fn pool_id(location: &Location, name: &str) -> Result<String, CloudError> {
        let (sub, rg, cluster) = aks_location(location)?;
        Ok(format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{cluster}/agentPools/{name}"
        ))
    }

    fn pool_url(&self, location: &Location, name: &str) -> Result<Url, CloudError> {
        let (sub, rg, cluster) = aks_location(location)?;
        let mut u = self.arm.clone();
        {
            let mut seg = u
                .path_segments_mut()
                .map_err(|_| CloudError::Auth("the ARM endpoint cannot be a base URL".into()))?;
            seg.pop_if_empty().extend([
                "subscriptions",
                sub,
                "resourceGroups",
                rg,
                "providers",
                "Microsoft.ContainerService",
                "managedClusters",
                cluster,
                "agentPools",
                name,
            ]);
        }
        u.query_pairs_mut().append_pair("api-version", API_VERSION);
        Ok(u)
    }

    /// Whether a URL the server handed us (operation status) may receive our bearer token.
    fn same_origin(&self, u: &Url) -> bool {
        u.scheme() == self.arm.scheme()
            && u.host_str() == self.arm.host_str()
            && u.port_or_known_default() == self.arm.port_or_known_default()
    }

    // ------------------------------------------------------------------------------- HTTP

    async fn token(&self, ctx: &OpCtx) -> Result<String, CloudError> {
        let scope = self.scope.as_str();
        let fut = async {
            self.credential
                .get_token(&[scope], None)
                .await
                .map(|t| t.token.secret().to_string())
                .map_err(|e| {
                    let message = format!(
                        "could not get an Azure access token ({}): {}",
                        self.credential_kind,
                        super::error_chain(&e)
                    );
                    CloudError::Auth(Detail::caused_by(message, e))
                })
        };
        ctx.run("an Azure access token", fut).await?
    }

    /// One request, no retries. A response is returned whatever its status; transport failures (including a
    /// body cut short) are `Transport`.
    async fn send_once(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<&Value>,
        ctx: &OpCtx,
    ) -> Result<Resp, CloudError> {
        let token = self.token(ctx).await?;
        let remaining = ctx.deadline.saturating_duration_since(Instant::now());
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .bearer_auth(token)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(
                self.timing
                    .request_timeout
                    .min(remaining + Duration::from_secs(1)),
            );
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        tracing::debug!(method = %method, path = url.path(), "ARM request");
        let what = format!("{method} {}", url.path());
        let fut = async {
            let resp = req.send().await.map_err(|e| {
                let message = format!("{what}: {}", super::error_chain(&e));
                CloudError::Transport(Detail::caused_by(message, e))
            })?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = read_bounded(resp, &what).await?;
            Ok(Resp {
                status,
                headers,
                body,
            })
        };
        ctx.run(&what, fut).await?
    }

    /// A request retried on 429/5xx and transport failures, with backoff, Retry-After and jitter.
    /// Once the attempts are spent, the last answer is returned as it came.
    async fn send(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<&Value>,
        ctx: &OpCtx,
    ) -> Result<Resp, CloudError> {
        let method = &method;
        let waiting_for = &format!("a retry of {method} {}", url.path());
        let attempt = move || async move {
            let failed = |last, retry_after| {
                Attempt::Failed(Failure {
                    last,
                    retry_after,
                    waiting_for: waiting_for.clone(),
                })
            };
            match self.send_once(method.clone(), url, body, ctx).await {
                Ok(r) if retryable_status(r.status) => {
                    let retry_after = r.retry_after();
                    Ok(failed(Ok(r), retry_after))
                }
                Ok(r) => Ok(Attempt::Done(r)),
                Err(e @ CloudError::Transport(_)) => Ok(failed(Err(e), None)),
                Err(e) => Err(e),
            }
        };
        let log = |f: &Failure<Resp>, attempt: u32, _| match &f.last {
            Ok(r) => tracing::debug!(status = r.status, attempt, "ARM request will be retried"),
            Err(CloudError::Transport(m)) => {
                tracing::debug!(error = %m, attempt, "ARM request will be retried")
            }
            Err(_) => {}
        };
        retry(
            ctx,
            self.timing.retries(),
            self.timing.max_attempts,
            attempt,
            log,
        )
        .await
    }

    // ------------------------------------------------------------------------------- pools

    /// The pool's raw document, or None on 404.
    async fn get_raw(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Value>, CloudError> {
        let url = self.pool_url(location, name)?;
        let r = self.send(reqwest::Method::GET, &url, None, ctx).await?;
        match r.status {
            200 => r.json().map(Some),
            404 => {
                let e = r.api_error();
                match &e {
                    CloudError::Api { code, .. }
                        if matches!(
                            code.as_str(),
                            "NotFound" | "ResourceNotFound" | "ResourceGroupNotFound"
                        ) =>
                    {
                        Ok(None)
                    }
                    _ => Err(e),
                }
            }
            _ => Err(r.api_error()),
        }
    }

    async fn get_with(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        match self.get_raw(location, name, ctx).await? {
            None => Ok(None),
            Some(doc) => {
                let pool = to_pool(location, name, &doc)?;
                if pool.status.eq_ignore_ascii_case("Deleting") {
                    return Ok(None);
                }
                Ok(Some(pool))
            }
        }
    }

    /// Polls the pool until its provisioningState is terminal. Failed/Canceled become OperationFailed.
    async fn wait_pool(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
        retry_after: Option<Duration>,
    ) -> Result<Pool, CloudError> {
        let what = format!("agent pool '{name}' to finish provisioning");
        let start = Start::Sleep(retry_after);
        poll_until(ctx, self.timing.polls(), what, start, move |_| async move {
            let Some(doc) = self.get_raw(location, name, ctx).await? else {
                return Err(CloudError::OperationFailed {
                    code: "NotFound".into(),
                    message: format!("agent pool '{name}' disappeared while it was provisioning"),
                });
            };
            let pool = to_pool(location, name, &doc)?;
            match terminal(&pool.status) {
                Some(true) => Ok(Check::Done(pool)),
                Some(false) => Err(CloudError::OperationFailed {
                    code: format!("Provisioning{}", pool.status),
                    message: format!(
                        "agent pool '{name}' ended in provisioningState {}",
                        pool.status
                    ),
                }),
                None => Ok(Check::Pending {
                    retry_after: None,
                    waiting_for: None,
                }),
            }
        })
        .await
    }

    /// Waits for the operation a PUT or DELETE started: its Azure-AsyncOperation document, else its
    /// Location. Returns Ok when the operation succeeded or cannot be followed (the caller then checks
    /// the resource itself).
    async fn wait_operation(&self, r: &Resp, what: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let header = |h: &str| {
            r.headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| Url::parse(v).ok())
                .filter(|u| self.same_origin(u))
        };
        let start = Start::Sleep(r.retry_after());
        if let Some(op) = header("azure-asyncoperation") {
            let op = &op;
            return poll_until(
                ctx,
                self.timing.polls(),
                what.into(),
                start,
                move |_| async move {
                    let resp = self.send(reqwest::Method::GET, op, None, ctx).await?;
                    if resp.status == 404 {
                        return Ok(Check::Done(()));
                    }
                    if resp.status != 200 {
                        return Err(resp.api_error());
                    }
                    let doc: OperationDoc = serde_json::from_slice(&resp.body).map_err(|e| {
                        CloudError::BadResponse(Detail::caused_by(
                            format!("operation status document: {e}"),
                            e,
                        ))
                    })?;
                    match doc.status.as_str() {
                        s if s.eq_ignore_ascii_case("Succeeded") => Ok(Check::Done(())),
                        s if s.eq_ignore_ascii_case("Failed")
                            || s.eq_ignore_ascii_case("Canceled") =>
                        {
                            let e = doc.error.unwrap_or_default();
                            Err(CloudError::OperationFailed {
                                code: e.code.unwrap_or_else(|| format!("Operation{s}")),
                                message: e
                                    .message
                                    .unwrap_or_else(|| format!("the operation ended {s}")),
                            })
                        }
                        _ => Ok(Check::Pending {
                            retry_after: resp.retry_after(),
                            waiting_for: None,
                        }),
                    }
                },
            )
            .await;
        }
        if let Some(loc) = header("location") {
            // Each 202 may name the next URL to look at. (Behind a Mutex only because a check's
            // future must be Send.)
            let loc = &Mutex::new(loc);
            return poll_until(
                ctx,
                self.timing.polls(),
                what.into(),
                start,
                move |_| async move {
                    let url = loc.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    let resp = self.send(reqwest::Method::GET, &url, None, ctx).await?;
                    match resp.status {
                        202 => {
                            if let Some(next) = resp
                                .headers
                                .get("location")
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| Url::parse(v).ok())
                                .filter(|u| self.same_origin(u))
                            {
                                *loc.lock().unwrap_or_else(PoisonError::into_inner) = next;
                            }
                            Ok(Check::Pending {
                                retry_after: resp.retry_after(),
                                waiting_for: None,
                            })
                        }
                        200 | 201 | 204 | 404 => Ok(Check::Done(())),
                        _ => match resp.api_error() {
                            CloudError::Api { code, message, .. } => {
                                Err(CloudError::OperationFailed { code, message })
                            }
                            e => Err(e),
                        },
                    }
                },
            )
            .await;
        }
        Ok(())
    }

    /// A PUT answered 200/201: wait for its operation and return the pool as it ends up.
    async fn finish_put(
        &self,
        r: Resp,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let doc = r.json()?;
        let pool = to_pool(location, name, &doc)?;
        match terminal(&pool.status) {
            Some(true) => return Ok(pool),
            Some(false) => {
                return Err(CloudError::OperationFailed {
                    code: format!("Provisioning{}", pool.status),
                    message: format!(
                        "agent pool '{name}' is in provisioningState {}",
                        pool.status
                    ),
                });
            }
            None => {}
        }
        let what = format!("agent pool '{name}' to finish provisioning");
        self.wait_operation(&r, &what, ctx).await?;
        self.wait_pool(location, name, ctx, Some(Duration::ZERO))
            .await
    }

    /// Waits until GET answers 404. `retry_after` is the delay after the first look only.
    async fn wait_gone(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
        retry_after: Option<Duration>,
    ) -> Result<(), CloudError> {
        let what = format!("agent pool '{name}' to be deleted");
        let mut first = retry_after;
        poll_until(ctx, self.timing.polls(), what, Start::Now, move |_| {
            let retry_after = first.take();
            async move {
                let Some(doc) = self.get_raw(location, name, ctx).await? else {
                    return Ok(Check::Done(()));
                };
                let state = provisioning_state(&doc);
                if state.eq_ignore_ascii_case("Failed") {
                    return Err(CloudError::OperationFailed {
                        code: "DeleteFailed".into(),
                        message: format!(
                            "deleting agent pool '{name}' left it in provisioningState Failed"
                        ),
                    });
                }
                Ok(Check::Pending {
                    retry_after,
                    waiting_for: None,
                })
            }
        })
        .await
    }

    /// One PUT attempt of `body`.
    async fn put_attempt(
        &self,
        put: &PutTarget<'_>,
        body: &Value,
        ctx: &OpCtx,
    ) -> Result<Attempt<Pool>, CloudError> {
        let name = put.name;
        let failed = |last, retry_after| {
            Attempt::Failed(Failure {
                last,
                retry_after,
                waiting_for: format!("a retry of PUT agent pool '{name}'"),
            })
        };
        match self
            .send_once(reqwest::Method::PUT, put.url, Some(body), ctx)
            .await
        {
            Ok(r) if matches!(r.status, 200 | 201) => self
                .finish_put(r, put.location, name, ctx)
                .await
                .map(Attempt::Done),
            Ok(r) if retryable_status(r.status) => Ok(failed(Err(r.api_error()), r.retry_after())),
            Ok(r) => Err(r.api_error()),
            // The PUT may or may not have reached ARM: the next attempt reads the pool first.
            Err(e @ CloudError::Transport(_)) => Ok(failed(Err(e), None)),
            Err(e) => Err(e),
        }
    }
}

/// The debug line of a PUT about to be retried.
fn log_put_retry(f: &Failure<Pool>, _: u32, _: Duration) {
    if let Err(CloudError::Transport(m)) = &f.last {
        tracing::debug!(error = %m, "PUT will be retried");
    }
}

/// The pool a PUT goes to.
struct PutTarget<'a> {
    url: &'a Url,
    location: &'a Location,
    name: &'a str,
}

#[async_trait]
impl NodePools for AksClient {
    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        self.get_with(location, name, ctx).await
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let location = &spec.location;
        let name = spec.name.as_str();
        let url = self.pool_url(location, name)?;
        let body = create_body(spec);
        let put = PutTarget {
            url: &url,
            location,
            name,
        };
        let (put, body) = (&put, &body);
        let attempt = move || async move {
            // A previous attempt (this call's or an earlier apply's) may have created the pool already.
            if let Some(doc) = self.get_raw(location, name, ctx).await? {
                let pool = to_pool(location, name, &doc)?;
                let state = pool.status.clone();
                if state.eq_ignore_ascii_case("Deleting") {
                    self.wait_gone(location, name, ctx, None).await?;
                    return Ok(Attempt::Again);
                }
                let diff = spec_diff(&pool.spec, spec);
                if !diff.is_empty() {
                    return Err(CloudError::Api {
                        status: 409,
                        code: "AgentPoolAlreadyExists".into(),
                        message: format!(
                            "agent pool '{name}' already exists in cluster '{}' with other settings ({}). Import it with `terraform import <address> {}` to manage it, or choose another name.",
                            cluster_name(location),
                            diff.join(", "),
                            pool.id
                        ),
                    });
                }
                match terminal(&state) {
                    Some(true) => return Ok(Attempt::Done(pool)),
                    None => {
                        return self
                            .wait_pool(location, name, ctx, None)
                            .await
                            .map(Attempt::Done);
                    }
                    // Failed or Canceled: a PUT of the same pool makes ARM retry the provisioning.
                    Some(false) => {}
                }
            }
            self.put_attempt(put, body, ctx).await
        };
        let (backoff, max) = (self.timing.retries(), self.timing.max_attempts);
        retry(ctx, backoff, max, attempt, log_put_retry).await
    }

    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let location = &spec.location;
        let name = spec.name.as_str();
        let replace: Vec<&str> = spec_diff(&current.spec, spec)
            .into_iter()
            .filter(|f| !IN_PLACE.contains(f))
            .collect();
        if !replace.is_empty() {
            return Err(CloudError::Api {
                status: 400,
                code: "PropertyChangeNotAllowed".into(),
                message: format!(
                    "AKS cannot change {} of agent pool '{name}' in place: the pool must be replaced",
                    replace.join(", ")
                ),
            });
        }
        let url = self.pool_url(location, name)?;
        let put = PutTarget {
            url: &url,
            location,
            name,
        };
        let put = &put;
        let attempt = move || async move {
            let Some(doc) = self.get_raw(location, name, ctx).await? else {
                return Err(CloudError::Api {
                    status: 404,
                    code: "NotFound".into(),
                    message: format!("agent pool '{name}' no longer exists"),
                });
            };
            let pool = to_pool(location, name, &doc)?;
            if pool.status.eq_ignore_ascii_case("Deleting") {
                return Err(CloudError::Api {
                    status: 409,
                    code: "OperationNotAllowed".into(),
                    message: format!("agent pool '{name}' is being deleted"),
                });
            }
            match terminal(&pool.status) {
                Some(true) if pool.spec == *spec => return Ok(Attempt::Done(pool)),
                // Another operation (or our own PUT whose answer was lost) is running: let it finish.
                None => {
                    let done = self.wait_pool(location, name, ctx, None).await?;
                    if done.spec == *spec {
                        return Ok(Attempt::Done(done));
                    }
                    return Ok(Attempt::Again);
                }
                _ => {}
            }
            let body = update_body(&doc, spec);
            self.put_attempt(put, &body, ctx).await
        };
        let (backoff, max) = (self.timing.retries(), self.timing.max_attempts);
        retry(ctx, backoff, max, attempt, log_put_retry).await
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let url = self.pool_url(location, name)?;
        let r = self.send(reqwest::Method::DELETE, &url, None, ctx).await?;
        match r.status {
            204 | 404 => {
                // Only a missing pool is "already gone"; a missing cluster or subscription is an error.
                if r.status == 404
                    && let CloudError::Api { code, .. } = r.api_error()
                    && !matches!(code.as_str(), "NotFound" | "ResourceNotFound")
                {
                    return Err(r.api_error());
                }
                Ok(())
            }
            200 | 202 => {
                let what = format!("agent pool '{name}' to be deleted");
                self.wait_operation(&r, &what, ctx).await?;
                self.wait_gone(location, name, ctx, Some(Duration::ZERO))
                    .await
            }
            _ => Err(r.api_error()),
        }
    }
}

// ------------------------------------------------------------------------------------------- responses

struct Resp {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn retry_after(&self) -> Option<Duration> {
        retry_after_seconds(
            self.headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
        )
    }

    fn json(&self) -> Result<Value, CloudError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            CloudError::BadResponse(Detail::caused_by(format!("agent pool document: {e}"), e))
        })
    }

    /// The ARM error of a non-success answer; a 401 means the token was refused.
    fn api_error(&self) -> CloudError {
        let parsed: Option<ErrorEnvelope> = serde_json::from_slice(&self.body).ok();
        let (code, message) = match parsed.and_then(|p| p.error) {
            Some(e) => (
                e.code.unwrap_or_else(|| format!("HTTP{}", self.status)),
                e.message.unwrap_or_default(),
            ),
            None => {
                let text = String::from_utf8_lossy(&self.body);
                let text: String = text.chars().take(300).collect();
                (format!("HTTP{}", self.status), text)
            }
        };
        if self.status == 401 {
            return CloudError::Auth(
                format!("ARM refused the access token: {code}: {message}").into(),
            );
        }
        CloudError::Api {
            status: self.status,
            code,
            message,
        }
    }
}

async fn read_bounded(mut resp: reqwest::Response, what: &str) -> Result<Vec<u8>, CloudError> {
    if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(CloudError::BadResponse(
            format!("{what}: the answer is larger than {MAX_BODY} bytes").into(),
        ));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        let message = format!("{what}: {}", super::error_chain(&e));
        CloudError::Transport(Detail::caused_by(message, e))
    })? {
        if buf.len() + chunk.len() > MAX_BODY {
            return Err(CloudError::BadResponse(
                format!("{what}: the answer is larger than {MAX_BODY} bytes").into(),
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: Option<ErrorBody>,
}

#[derive(Deserialize, Default)]
struct ErrorBody {
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct OperationDoc {
    status: String,
    error: Option<ErrorBody>,
}

// ------------------------------------------------------------------------------------------- mapping

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
    mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing)]
    provisioning_state: Option<String>,
}

#[derive(Serialize, Deserialize, Default, Debug)]
struct AgentPool {
    #[serde(skip_serializing)]
    id: Option<String>,
    #[serde(default)]
    properties: AgentPoolProps,
}

fn aks_location(location: &Location) -> Result<(&str, &str, &str), CloudError> {
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
                other.cloud().to_ascii_uppercase()
            ),
        }),
    }
}

fn cluster_name(location: &Location) -> &str {
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

fn create_body(spec: &PoolSpec) -> Value {
    let mut defaults = Vec::new();
    if spec.disk_size_gb.is_none() {
        defaults.push("osDiskSizeGB");
    }
    if spec.os_sku.is_none() {
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
        os_sku: spec.os_sku.clone(),
        node_labels: Some(spec.labels.clone()),
        node_taints: Some(spec.taints.iter().map(taint_string).collect()),
        scale_set_priority: Some(if spec.spot { "Spot" } else { "Regular" }.into()),
        scale_set_eviction_policy: spec.spot.then(|| "Delete".into()),
        spot_max_price: spec.spot.then_some(-1.0),
        gpu_instance_profile: spec.gpu.aks_gpu_instance_profile.clone(),
        mode: Some("User".into()),
        tags: Some(BTreeMap::from([(
            DEFAULTS_TAG.to_string(),
            defaults.join(","),
        )])),
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
fn update_body(doc: &Value, spec: &PoolSpec) -> Value {
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

fn provisioning_state(doc: &Value) -> String {
    doc.pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Some(true) Succeeded, Some(false) Failed/Canceled, None still running.
fn terminal(state: &str) -> Option<bool> {
    if state.eq_ignore_ascii_case("Succeeded") {
        Some(true)
    } else if state.eq_ignore_ascii_case("Failed") || state.eq_ignore_ascii_case("Canceled") {
        Some(false)
    } else {
        None
    }
}

/// The pool document in the provider's terms. Values AKS chose by itself read back as "not set".
fn to_pool(location: &Location, name: &str, doc: &Value) -> Result<Pool, CloudError> {
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
            gpu: PoolGpu {
                count: gpu_count,
                aks_gpu_instance_profile: p.gpu_instance_profile,
                ..PoolGpu::default()
            },
            os_sku,
            eks: None,
        },
    })
}

/// Fields AKS changes with a PUT of the pool; everything else needs a new pool.
const IN_PLACE: &[&str] = &["scaling", "labels", "taints"];

/// Names of the fields in which two specs differ.
fn spec_diff(a: &PoolSpec, b: &PoolSpec) -> Vec<&'static str> {
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
    if a.gpu.aks_gpu_instance_profile != b.gpu.aks_gpu_instance_profile {
        d.push("gpu_instance_profile");
    }
    if a.os_sku != b.os_sku {
        d.push("os_sku");
    }
    d
}

// ------------------------------------------------------------------------------------------- credentials

/// An OIDC token given as a value (ARM_OIDC_TOKEN).
struct StaticAssertion(Secret);

impl fmt::Debug for StaticAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticAssertion")
    }
}

#[async_trait]
impl azure_identity::ClientAssertion for StaticAssertion {
    async fn secret(
        &self,
        _options: Option<azure_core::http::ClientMethodOptions<'_>>,
    ) -> azure_core::Result<String> {
        Ok(self.0.secret().to_string())
    }
}

fn az_on_path() -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        ["az", "az.cmd", "az.exe"]
            .iter()
            .any(|n| dir.join(n).is_file())
    })
}

/// azure_core transport for sandbox mode: requests for [`SANDBOX_AUTHORITY_HOST`] go to the sandbox over
/// plain http; nothing else may use it.
#[derive(Debug)]
struct SandboxTransport {
    http: reqwest::Client,
    base: Url,
}

#[async_trait]
impl azure_core::http::HttpClient for SandboxTransport {
    async fn execute_request(
        &self,
        request: &azure_core::http::Request,
    ) -> azure_core::Result<azure_core::http::AsyncRawResponse> {
        use azure_core::error::{Error, ErrorKind};
        let url = request.url();
        if url.host_str() != Some(SANDBOX_AUTHORITY_HOST) {
            return Err(Error::with_message(
                ErrorKind::Other,
                format!(
                    "the sandbox transport only serves {SANDBOX_AUTHORITY_HOST}, not {}",
                    url.host_str().unwrap_or("?")
                ),
            ));
        }
        let mut target = self.base.clone();
        target.set_path(&format!(
            "{}{}",
            self.base.path().trim_end_matches('/'),
            url.path()
        ));
        target.set_query(url.query());
        let method = match request.method() {
            azure_core::http::Method::Get => reqwest::Method::GET,
            azure_core::http::Method::Post => reqwest::Method::POST,
            azure_core::http::Method::Put => reqwest::Method::PUT,
            azure_core::http::Method::Delete => reqwest::Method::DELETE,
            azure_core::http::Method::Head => reqwest::Method::HEAD,
            azure_core::http::Method::Patch => reqwest::Method::PATCH,
            other => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    format!("the sandbox transport does not send {other:?} requests"),
                ));
            }
        };
        let mut req = self.http.request(method, target);
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        match request.body() {
            azure_core::http::Body::Bytes(b) => req = req.body(b.to_vec()),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    "the sandbox transport does not stream request bodies",
                ));
            }
        }
        let resp = req.send().await.map_err(|e| {
            let kind = if e.is_connect() {
                ErrorKind::Connection
            } else {
                ErrorKind::Io
            };
            Error::with_message(
                kind,
                format!("sandbox token endpoint: {}", super::error_chain(&e)),
            )
        })?;
        let status = resp.status().as_u16();
        let mut headers = azure_core::http::headers::Headers::new();
        for (k, v) in resp.headers() {
            if let Ok(v) = v.to_str() {
                headers.insert(k.as_str().to_string(), v.to_string());
            }
        }
        let body = read_bounded(resp, "sandbox token endpoint")
            .await
            .map_err(|e| Error::with_message(ErrorKind::Io, e.to_string()))?;
        Ok(azure_core::http::AsyncRawResponse::from_bytes(
            status.into(),
            headers,
            body,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc() -> Location {
        Location::Aks {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            cluster: "c".into(),
        }
    }

    #[test]
    fn cloud_defaults_read_back_as_unset_only_when_left_to_aks() {
        let mut doc = serde_json::json!({"properties": {"vmSize": "Standard_D2s_v3", "count": 1,
            "osDiskSizeGB": 128, "osSKU": "Ubuntu", "provisioningState": "Succeeded",
            "tags": {DEFAULTS_TAG: "osDiskSizeGB,osSKU"}}});
        let p = to_pool(&loc(), "np", &doc).unwrap();
        assert_eq!(p.spec.disk_size_gb, None);
        assert_eq!(p.spec.os_sku, None);
        // Created with explicit values that happen to equal AKS's defaults.
        doc["properties"]["tags"][DEFAULTS_TAG] = "".into();
        let p = to_pool(&loc(), "np", &doc).unwrap();
        assert_eq!(p.spec.disk_size_gb, Some(128));
        assert_eq!(p.spec.os_sku.as_deref(), Some("Ubuntu"));
        // No tag (made elsewhere): AKS's defaults count as not set, anything else as set.
        doc["properties"].as_object_mut().unwrap().remove("tags");
        doc["properties"]["osSKU"] = "AzureLinux".into();
        let p = to_pool(&loc(), "np", &doc).unwrap();
        assert_eq!(p.spec.disk_size_gb, None);
        assert_eq!(p.spec.os_sku.as_deref(), Some("AzureLinux"));
        assert!(p.id.ends_with("/managedClusters/c/agentPools/np"));
    }

    #[test]
    fn spot_label_and_taint_added_by_aks_are_not_the_users() {
        let doc = serde_json::json!({"properties": {"vmSize": "Standard_D2s_v3", "count": 1,
            "scaleSetPriority": "Spot",
            "nodeLabels": {SPOT_KEY: "spot", "team": "ml"},
            "nodeTaints": ["kubernetes.azure.com/scalesetpriority=spot:NoSchedule", "a=b:NoExecute", "k:NoSchedule"]}});
        let p = to_pool(&loc(), "np", &doc).unwrap();
        assert!(p.spec.spot);
        assert_eq!(
            p.spec.labels,
            BTreeMap::from([("team".to_string(), "ml".to_string())])
        );
        assert_eq!(
            p.spec.taints,
            vec![
                PoolTaint {
                    key: "a".into(),
                    value: "b".into(),
                    effect: "NoExecute".into()
                },
                PoolTaint {
                    key: "k".into(),
                    value: "".into(),
                    effect: "NoSchedule".into()
                },
            ]
        );
        // An update keeps what AKS added.
        let mut spec = p.spec.clone();
        spec.labels.insert("x".into(), "y".into());
        let body = update_body(&doc, &spec);
        assert_eq!(body["properties"]["nodeLabels"][SPOT_KEY], "spot");
        assert_eq!(body["properties"]["nodeLabels"]["x"], "y");
        let taints = body["properties"]["nodeTaints"].as_array().unwrap();
        assert_eq!(taints.len(), 3);
    }

    #[test]
    fn config_debug_hides_secrets() {
        let cfg = AksConfig {
            client_secret: Some("hunter2-secret".into()),
            oidc_token: Some("eyJ-token".into()),
            ..Default::default()
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("hunter2") && !s.contains("eyJ"), "{s}");
    }
}
