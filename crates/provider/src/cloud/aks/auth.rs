//! Tokens for ARM: one `azure_identity` credential, chosen from the configuration in the order
//! azurerm documents. In sandbox mode the real `ClientSecretCredential` talks to the sandbox's token
//! endpoint through [`SandboxTransport`], since azure_identity refuses an authority host that is not
//! https.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::{Secret, TokenCredential};
use reqwest::Url;

use super::client::{AZURE_TIMING, AksClient, SANDBOX_TIMING};
use super::config::AksConfig;
use super::http::read_bounded;
use crate::cloud::answer::http_client;
use crate::cloud::error::{CloudError, Detail, error_chain};
use crate::operation::OpCtx;

const PUBLIC_ARM_ENDPOINT: &str = "https://management.azure.com";
/// The made-up https authority host the credential uses in sandbox mode (`.invalid` never resolves, so a
/// request for it can only ever reach the sandbox through [`SandboxTransport`]).
const SANDBOX_AUTHORITY_HOST: &str = "login.sandbox.invalid";
const SANDBOX_TENANT: &str = "00000000-0000-0000-0000-000000000000";
/// The kind of the credential that runs `az` for its tokens.
pub(super) const CLI_CREDENTIAL: &str = "Azure CLI";

const NO_CREDENTIALS: &str = "no Azure credentials are configured. Set ARM_TENANT_ID, \
    ARM_CLIENT_ID and ARM_CLIENT_SECRET (a service principal); or ARM_USE_OIDC=true with \
    ARM_TENANT_ID, ARM_CLIENT_ID and ARM_OIDC_TOKEN or ARM_OIDC_TOKEN_FILE_PATH; or \
    ARM_USE_AKS_WORKLOAD_IDENTITY=true (with the AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and \
    AZURE_TENANT_ID the pod gets); or ARM_USE_MSI=true (with ARM_CLIENT_ID for a user-assigned \
    identity); or log in with `az login` and leave ARM_USE_CLI unset or true. The same settings \
    exist as arguments of the provider's azure {} block";

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
    let message = format!("{what}: {}", error_chain(&e));
    CloudError::Auth(Detail::caused_by(message, e))
}

/// The credential `cfg` chooses (client secret, then OIDC / AKS workload identity, then managed
/// identity, then the Azure CLI, as azurerm does), and its kind as errors name it; an error that
/// says what to set when none is configured.
fn credential(cfg: &AksConfig) -> Result<(Arc<dyn TokenCredential>, &'static str), CloudError> {
    let client_options = || client_options(cfg);
    let tenant = cfg.tenant_id.clone().filter(|t| !t.trim().is_empty());
    let client = cfg.client_id.clone().filter(|t| !t.trim().is_empty());
    let secret = cfg.client_secret.clone().filter(|t| !t.trim().is_empty());
    let chosen: (Arc<dyn TokenCredential>, &'static str) =
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
                    user_assigned_id: client.clone().map(azure_identity::UserAssignedId::ClientId),
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
            (cred, CLI_CREDENTIAL)
        } else {
            let mut msg = NO_CREDENTIALS.to_string();
            if cfg.use_cli {
                msg.push_str(" (the Azure CLI `az` is not on PATH)");
            }
            if cfg.use_oidc {
                msg.push_str(" (OIDC is enabled but the tenant id, client id or token is missing)");
            }
            if secret.is_some() {
                msg.push_str(
                    " (ARM_CLIENT_SECRET is set but ARM_TENANT_ID or ARM_CLIENT_ID is missing)",
                );
            }
            return Err(CloudError::Auth(msg.into()));
        };
    Ok(chosen)
}

/// The options of every credential: the authority host, when `cfg` names one (a sovereign cloud).
fn client_options(cfg: &AksConfig) -> azure_core::http::ClientOptions {
    let mut o = azure_core::http::ClientOptions::default();
    if let Some(host) = &cfg.authority_host {
        let mut custom = azure_core::cloud::CustomConfiguration::default();
        custom.authority_host = host.clone();
        o.cloud = Some(Arc::new(custom.into()));
    }
    o
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
        let (credential, kind) = credential(&cfg)?;
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

    pub(super) async fn token(&self, ctx: &OpCtx) -> Result<String, CloudError> {
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
                        error_chain(&e)
                    );
                    CloudError::Auth(Detail::caused_by(message, e))
                })
        };
        ctx.run("an Azure access token", fut).await?
    }
}

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
            Error::with_message(kind, format!("sandbox token endpoint: {}", error_chain(&e)))
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
