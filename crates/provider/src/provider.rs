//! The fracgpu provider: its configuration (credentials and endpoints per cloud, or one sandbox
//! for all), the cloud clients built from it on first use, and the registry of its resources,
//! data sources and functions.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::cloud::aks::AzureSettings;
use crate::cloud::eks::EksConfig;
use crate::cloud::gke::GkeConfig;
use crate::cloud::{CloudError, CloudSettings, NodePools, SharedReads};
use crate::cluster::KubernetesSettings;
use crate::model;
use crate::operation::StopSignal;
use tfplugin::api::{DataSource, Function, ListResource, Provider, Resource};
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::{Diagnostics, Value};

/// The sandbox's default world: its AKS subscription, GKE project and EKS region stand in for the
/// provider defaults when the sandbox is configured and none is named.
pub const SANDBOX_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
pub const SANDBOX_PROJECT: &str = "sandbox-project";
pub const SANDBOX_REGION: &str = "us-east-1";

/// The provider block as configured, with environment fallbacks applied where a default is
/// needed at plan time (subscription, project, region). The cloud part is the clients' own
/// settings; nothing here derives Debug, so no log line or panic message can print a credential.
#[derive(Clone, Default)]
pub struct Settings {
    pub cloud: CloudSettings,
    /// The `kubernetes` block: the default cluster access of `fracgpu_device_plugin_config`.
    pub kubernetes: KubernetesSettings,
}

tfplugin::object! {
    /// The `azure` block. Values not known yet (computed elsewhere in the configuration) read as
    /// unset, here and in the blocks below.
    struct AzureArgs {
        subscription_id: Known<String>,
        tenant_id: Known<String>,
        client_id: Known<String>,
        client_secret: Known<String>,
        use_cli: Known<bool>,
        use_msi: Known<bool>,
        use_oidc: Known<bool>,
        oidc_token: Known<String>,
        oidc_token_file_path: Known<String>,
        use_aks_workload_identity: Known<bool>,
        endpoint: Known<String>,
    }
}

tfplugin::object! {
    /// The `google` block.
    struct GoogleArgs {
        project: Known<String>,
        credentials: Known<String>,
        access_token: Known<String>,
        endpoint: Known<String>,
    }
}

tfplugin::object! {
    /// The `aws` block.
    struct AwsArgs {
        region: Known<String>,
        profile: Known<String>,
        access_key: Known<String>,
        secret_key: Known<String>,
        endpoint: Known<String>,
    }
}

tfplugin::object! {
    /// The provider block.
    struct ProviderArgs {
        sandbox: Known<String>,
        azure: SingleBlock<AzureArgs>,
        google: SingleBlock<GoogleArgs>,
        aws: SingleBlock<AwsArgs>,
        kubernetes: SingleBlock<model::KubernetesArgs>,
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Settings {
    pub fn from_config(config: &Value) -> Settings {
        let args = ProviderArgs::from_value(config).unwrap_or_default();
        let sandbox = args
            .sandbox
            .0
            .or_else(|| env("FRACGPU_SANDBOX"))
            .map(|u| u.trim_end_matches('/').to_string());
        let in_sandbox = |v: &str| sandbox.as_ref().map(|_| v.to_string());
        let (az, g, a) = (
            args.azure.0.unwrap_or_default(),
            args.google.0.unwrap_or_default(),
            args.aws.0.unwrap_or_default(),
        );
        Settings {
            cloud: CloudSettings {
                azure: AzureSettings {
                    subscription_id: az
                        .subscription_id
                        .0
                        .or_else(|| env("ARM_SUBSCRIPTION_ID"))
                        .or_else(|| in_sandbox(SANDBOX_SUBSCRIPTION)),
                    tenant_id: az.tenant_id.0,
                    client_id: az.client_id.0,
                    client_secret: az.client_secret.0,
                    use_cli: az.use_cli.0,
                    use_msi: az.use_msi.0,
                    use_oidc: az.use_oidc.0,
                    oidc_token: az.oidc_token.0,
                    oidc_token_file_path: az.oidc_token_file_path.0,
                    use_aks_workload_identity: az.use_aks_workload_identity.0,
                    arm_endpoint: az.endpoint.0,
                    ..AzureSettings::default()
                },
                google: GkeConfig {
                    project: g
                        .project
                        .0
                        .or_else(|| env("GOOGLE_PROJECT"))
                        .or_else(|| env("GOOGLE_CLOUD_PROJECT"))
                        .or_else(|| in_sandbox(SANDBOX_PROJECT)),
                    credentials: g.credentials.0,
                    access_token: g.access_token.0,
                    endpoint: g.endpoint.0,
                    sandbox: None,
                },
                aws: EksConfig {
                    region: a
                        .region
                        .0
                        .or_else(|| env("AWS_REGION"))
                        .or_else(|| env("AWS_DEFAULT_REGION"))
                        .or_else(|| in_sandbox(SANDBOX_REGION)),
                    profile: a.profile.0,
                    access_key: a.access_key.0,
                    secret_key: a.secret_key.0,
                    endpoint: a.endpoint.0,
                    ..EksConfig::default()
                },
                sandbox,
            },
            kubernetes: args.kubernetes.0.map(|k| k.settings()).unwrap_or_default(),
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
    /// The refresh's per-cluster snapshots of the node pools (see `cloud::SharedReads`).
    pub shared_reads: SharedReads,
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
        cell.get_or_try_init(|| crate::cloud::connect(cloud, &settings.cloud))
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
    Schema::new(
        0,
        block.single_block(
            "kubernetes",
            model::kubernetes_block(
                "Default cluster access of `fracgpu_device_plugin_config` (a resource's own `kubernetes` block wins). Unset: `KUBECONFIG`, `~/.kube/config`, then in-cluster.",
            ),
        ),
    )
}

#[async_trait]
impl Provider for FracGpu {
    fn type_name(&self) -> &'static str {
        "fracgpu"
    }

    fn schema(&self) -> Schema {
        provider_schema()
    }

    async fn configure(&self, _terraform_version: &str, config: &Value, diags: &mut Diagnostics) {
        // Settings read a configuration with unknowns as unset; one that does not fit is a bug.
        if let Err(e) = ProviderArgs::from_value(config)
            && !e.is_unknown()
        {
            diags.push(e.diagnostic());
        }
        let settings = Settings::from_config(config);
        tracing::info!(
            sandbox = settings.cloud.sandbox.is_some(),
            "provider configured"
        );
        if let Ok(mut s) = self.state.settings.write() {
            *s = settings;
        }
        // Terraform configures the provider once per walk: a new refresh begins.
        self.state.shared_reads.clear();
    }

    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        crate::data_sources::all(&self.state)
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        crate::resources::all(&self.state)
    }

    fn functions(&self) -> Vec<Arc<dyn Function>> {
        crate::functions::all()
    }

    fn list_resources(&self) -> Vec<Arc<dyn ListResource>> {
        crate::list_resources::all(&self.state)
    }

    fn stop(&self) {
        self.state.stop.stop();
    }
}
