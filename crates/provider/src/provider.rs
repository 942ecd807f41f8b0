//! The fracgpu provider: its configuration (credentials and endpoints per cloud, or one sandbox
//! for all), the cloud clients built from it on first use, and the registry of its resources,
//! data sources and functions.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use gpu::Cloud;
use tokio::sync::OnceCell;

use crate::cloud::registry::TARGETS;
use crate::cloud::target::env;
use crate::cloud::{CloudError, CloudSettings, NodePools, SharedReads};
use crate::cluster::KubernetesSettings;
use crate::model;
use crate::operation::StopSignal;
use tfplugin::api::{DataSource, Function, ListResource, Provider, Resource};
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::{Diagnostics, Value};

/// The provider block as configured, with environment fallbacks applied where a default is
/// needed at plan time (subscription, project, region). The cloud part is the targets' own
/// settings; nothing here derives Debug, so no log line or panic message can print a credential.
#[derive(Clone, Default)]
pub struct Settings {
    pub cloud: CloudSettings,
    /// The `kubernetes` block: the default cluster access of `fracgpu_device_plugin_config`.
    pub kubernetes: KubernetesSettings,
}

tfplugin::object! {
    /// The provider block's own arguments; each target reads its block itself (`cloud::registry`).
    struct ProviderArgs {
        sandbox: Known<String>,
        kubernetes: SingleBlock<model::KubernetesArgs>,
    }
}

impl Settings {
    pub fn from_config(config: &Value) -> Settings {
        let args = ProviderArgs::from_value(config).unwrap_or_default();
        let sandbox = args
            .sandbox
            .0
            .or_else(|| env("FRACGPU_SANDBOX"))
            .map(|u| u.trim_end_matches('/').to_string());
        Settings {
            cloud: CloudSettings::from_config(config, sandbox),
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
    /// One client per target, in the order of `cloud::registry::TARGETS`.
    clients: [OnceCell<Arc<dyn NodePools>>; TARGETS.len()],
    /// The refresh's per-cluster snapshots of the node pools (see `cloud::SharedReads`).
    pub shared_reads: SharedReads,
}

impl ProviderState {
    pub fn settings(&self) -> Settings {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// The node pool client of a cloud, built on first use.
    pub async fn node_pools(&self, cloud: Cloud) -> Result<Arc<dyn NodePools>, CloudError> {
        let settings = self.settings();
        let i = TARGETS
            .iter()
            .position(|t| t.cloud() == cloud)
            .expect("every cloud has a target");
        self.clients[i]
            .get_or_try_init(|| settings.cloud.connect(cloud))
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
    let block = Block::new("Declares fractional NVIDIA GPUs (MIG, time-slicing, MPS) on AKS, GKE and EKS.")
            .attr(Attribute::string("sandbox").optional().describe(
                "Base URL of a running `fracgpu-sandbox`; every cloud and Kubernetes API is then served by it and no cloud account is needed. Also read from `FRACGPU_SANDBOX`.",
            ))
            ;
    let block = TARGETS.iter().fold(block, |b, t| {
        b.single_block(t.provider_block_name(), t.provider_block())
    });
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

    async fn configure(&self, _terraform_version: &str, config: &Value, _diags: &mut Diagnostics) {
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
