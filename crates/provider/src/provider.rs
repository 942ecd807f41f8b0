//! The fracgpu provider: its configuration (credentials and endpoints per cloud, or one sandbox
//! for all), the cloud clients built from it on first use, and the registry of its resources,
//! data sources and functions.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::cloud::{CloudError, NodePools, StopSignal};
use tfplugin::api::{DataSource, Function, Provider, Resource};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::{Diagnostics, Value};

/// The sandbox's default world: its AKS subscription, GKE project and EKS region stand in for the
/// provider defaults when the sandbox is configured and none is named.
pub const SANDBOX_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
pub const SANDBOX_PROJECT: &str = "sandbox-project";
pub const SANDBOX_REGION: &str = "us-east-1";

// The settings hold credentials: they derive no Debug, so no log line or panic message can print
// them.
#[derive(Clone, Default)]
pub struct AzureSettings {
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
    pub endpoint: Option<String>,
}

#[derive(Clone, Default)]
pub struct GoogleSettings {
    pub project: Option<String>,
    pub credentials: Option<String>,
    pub access_token: Option<String>,
    pub endpoint: Option<String>,
}

#[derive(Clone, Default)]
pub struct AwsSettings {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub endpoint: Option<String>,
}

/// The provider block as configured, with environment fallbacks applied where a default is
/// needed at plan time (subscription, project, region).
#[derive(Clone, Default)]
pub struct Settings {
    pub sandbox: Option<String>,
    pub azure: AzureSettings,
    pub google: GoogleSettings,
    pub aws: AwsSettings,
    /// The `kubernetes` block: the default cluster access of `fracgpu_device_plugin_config`.
    pub kubernetes: KubernetesSettings,
}

// ---- Kubernetes (fracgpu_device_plugin_config) ----------------------------------------------
pub use crate::kube::KubernetesSettings;

fn kubernetes_settings(config: &Value) -> KubernetesSettings {
    crate::resources::device_plugin_config::kubernetes_settings(config.get("kubernetes"))
}

fn kubernetes_schema(block: Block) -> Block {
    block.single_block(
        "kubernetes",
        crate::resources::device_plugin_config::kubernetes_block(
            "Default cluster access of `fracgpu_device_plugin_config` (a resource's own `kubernetes` block wins). Unset: `KUBECONFIG`, `~/.kube/config`, then in-cluster.",
        ),
    )
}
// ---- end Kubernetes ---------------------------------------------------------------------------

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Settings {
    pub fn from_config(config: &Value) -> Settings {
        let s = |v: &Value, k: &str| v.get(k).as_str().map(str::to_string);
        let b = |v: &Value, k: &str| v.get(k).as_bool();
        let block = |name: &str| {
            config
                .get(name)
                .elements()
                .first()
                .cloned()
                .unwrap_or(Value::Null)
        };
        let (az, g, a) = (block("azure"), block("google"), block("aws"));
        let sandbox = s(config, "sandbox")
            .or_else(|| env("FRACGPU_SANDBOX"))
            .map(|u| u.trim_end_matches('/').to_string());
        Settings {
            azure: AzureSettings {
                subscription_id: s(&az, "subscription_id")
                    .or_else(|| env("ARM_SUBSCRIPTION_ID"))
                    .or_else(|| sandbox.as_ref().map(|_| SANDBOX_SUBSCRIPTION.to_string())),
                tenant_id: s(&az, "tenant_id"),
                client_id: s(&az, "client_id"),
                client_secret: s(&az, "client_secret"),
                use_cli: b(&az, "use_cli"),
                use_msi: b(&az, "use_msi"),
                use_oidc: b(&az, "use_oidc"),
                oidc_token: s(&az, "oidc_token"),
                oidc_token_file_path: s(&az, "oidc_token_file_path"),
                use_aks_workload_identity: b(&az, "use_aks_workload_identity"),
                endpoint: s(&az, "endpoint"),
            },
            google: GoogleSettings {
                project: s(&g, "project")
                    .or_else(|| env("GOOGLE_PROJECT"))
                    .or_else(|| env("GOOGLE_CLOUD_PROJECT"))
                    .or_else(|| sandbox.as_ref().map(|_| SANDBOX_PROJECT.to_string())),
                credentials: s(&g, "credentials"),
                access_token: s(&g, "access_token"),
                endpoint: s(&g, "endpoint"),
            },
            aws: AwsSettings {
                region: s(&a, "region")
                    .or_else(|| env("AWS_REGION"))
                    .or_else(|| env("AWS_DEFAULT_REGION"))
                    .or_else(|| sandbox.as_ref().map(|_| SANDBOX_REGION.to_string())),
                profile: s(&a, "profile"),
                access_key: s(&a, "access_key"),
                secret_key: s(&a, "secret_key"),
                endpoint: s(&a, "endpoint"),
            },
            sandbox,
            kubernetes: kubernetes_settings(config),
        }
    }
}

/// Shared by the provider and its resources: the settings, the clients made from them on first
/// use (a cloud nobody uses needs no credentials), and the stop signal.
#[derive(Default)]
pub struct ProviderState {
    settings: RwLock<Settings>,
    pub stop: StopSignal,
    aks: OnceCell<Arc<dyn NodePools>>,
    gke: OnceCell<Arc<dyn NodePools>>,
    eks: OnceCell<Arc<dyn NodePools>>,
}

impl ProviderState {
    pub fn settings(&self) -> Settings {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// The node pool client of a cloud ("aks", "gke", "eks"), built on first use.
    pub async fn node_pools(&self, cloud: &str) -> Result<Arc<dyn NodePools>, CloudError> {
        let settings = self.settings();
        let cell = match cloud {
            "aks" => &self.aks,
            "gke" => &self.gke,
            _ => &self.eks,
        };
        cell.get_or_try_init(|| crate::cloud::connect(cloud, &settings))
            .await
            .cloned()
    }
}

pub struct FracGpu {
    state: Arc<ProviderState>,
}

impl FracGpu {
    pub fn new() -> Arc<FracGpu> {
        Arc::new(FracGpu {
            state: Arc::new(ProviderState::default()),
        })
    }
}

pub fn provider_schema() -> Schema {
    let azure = Block::new("Azure (AKS). Unset arguments fall back to the `ARM_*` environment variables, as the azurerm provider reads them.")
        .attr(Attribute::string("subscription_id").optional().describe("Default subscription of `aks` blocks (`ARM_SUBSCRIPTION_ID`)."))
        .attr(Attribute::string("tenant_id").optional().describe("Tenant of the service principal (`ARM_TENANT_ID`)."))
        .attr(Attribute::string("client_id").optional().describe("Client ID of the service principal (`ARM_CLIENT_ID`)."))
        .attr(Attribute::string("client_secret").optional().sensitive().describe("Client secret (`ARM_CLIENT_SECRET`)."))
        .attr(Attribute::bool("use_cli").optional().describe("Use the Azure CLI's login (`ARM_USE_CLI`)."))
        .attr(Attribute::bool("use_msi").optional().describe("Use a managed identity (`ARM_USE_MSI`)."))
        .attr(Attribute::bool("use_oidc").optional().describe("Use an OIDC token as client assertion (`ARM_USE_OIDC`)."))
        .attr(Attribute::string("oidc_token").optional().sensitive().describe("The OIDC token (`ARM_OIDC_TOKEN`)."))
        .attr(Attribute::string("oidc_token_file_path").optional().describe("A file holding the OIDC token (`ARM_OIDC_TOKEN_FILE_PATH`)."))
        .attr(Attribute::bool("use_aks_workload_identity").optional().describe("Use AKS workload identity (`ARM_USE_AKS_WORKLOAD_IDENTITY`)."))
        .attr(Attribute::string("endpoint").optional().describe("Azure Resource Manager endpoint. Default `https://management.azure.com`."));
    let google = Block::new("Google Cloud (GKE). Credentials default to Application Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's ADC file, the metadata server).")
        .attr(Attribute::string("project").optional().describe("Default project of `gke` blocks (`GOOGLE_PROJECT`, `GOOGLE_CLOUD_PROJECT`)."))
        .attr(Attribute::string("credentials").optional().sensitive().describe("A service account key: the JSON itself or a path to it."))
        .attr(Attribute::string("access_token").optional().sensitive().describe("An OAuth2 access token to use instead."))
        .attr(Attribute::string("endpoint").optional().describe("GKE API endpoint. Default `https://container.googleapis.com`."));
    let aws = Block::new("AWS (EKS). Credentials default to the AWS default chain (environment, shared config and credentials files, web identity, ECS, IMDSv2).")
        .attr(Attribute::string("region").optional().describe("Default region of `eks` blocks (`AWS_REGION`, `AWS_DEFAULT_REGION`)."))
        .attr(Attribute::string("profile").optional().describe("A profile of the shared config files (`AWS_PROFILE`)."))
        .attr(Attribute::string("access_key").optional().sensitive().describe("Static access key ID."))
        .attr(Attribute::string("secret_key").optional().sensitive().describe("Static secret access key."))
        .attr(Attribute::string("endpoint").optional().describe("EKS API endpoint override."));
    let block = Block::new("Declares fractional NVIDIA GPUs (MIG, time-slicing, MPS) on AKS, GKE and EKS.")
            .attr(Attribute::string("sandbox").optional().describe(
                "Base URL of a running `fracgpu-sandbox`; every cloud and Kubernetes API is then served by it and no cloud account is needed. Also read from `FRACGPU_SANDBOX`.",
            ))
            .single_block("azure", azure)
            .single_block("google", google)
            .single_block("aws", aws);
    Schema::new(0, kubernetes_schema(block))
}

#[async_trait]
impl Provider for FracGpu {
    fn type_name(&self) -> &'static str {
        "fracgpu"
    }

    fn schema(&self) -> Schema {
        provider_schema()
    }

    async fn configure(&self, _terraform_version: &str, config: &Value, _diags: &mut Diagnostics) {
        let settings = Settings::from_config(config);
        tracing::info!(sandbox = settings.sandbox.is_some(), "provider configured");
        if let Ok(mut s) = self.state.settings.write() {
            *s = settings;
        }
    }

    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        crate::data_sources::all()
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        crate::resources::all(&self.state)
    }

    fn functions(&self) -> Vec<Arc<dyn Function>> {
        crate::functions::all()
    }

    fn stop(&self) {
        self.state.stop.stop();
    }
}
