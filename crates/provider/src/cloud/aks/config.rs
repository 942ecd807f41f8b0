//! How the provider reaches Azure: the `azure {}` block and the ARM_* environment variables azurerm
//! reads, resolved into one [`AksConfig`]. Sandbox mode keeps real credentials from the environment
//! away from the (plain http) sandbox.

use std::fmt;

use crate::cloud::error::CloudError;

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
                        "ARM_ENVIRONMENT \"{other}\" is not supported: use public, usgovernment or \
                            china, or set the ARM endpoint and authority host explicitly"
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
