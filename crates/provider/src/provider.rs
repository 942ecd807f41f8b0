//! The fracgpu provider: its schema (the provider block, each target's block from its
//! descriptor), its configure and stop, and the registry of its resources, data sources,
//! functions, lists and actions. The configuration they share is in `state`.

use std::sync::Arc;

use async_trait::async_trait;

use crate::cloud::registry::TARGETS;
use crate::model;
use crate::state::{ProviderState, Settings};
use tfplugin::api::{Action, DataSource, Function, ListResource, Provider, Resource};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::{Diagnostics, Value};

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
    let block = Block::new(
        "Declares fractional NVIDIA GPUs (MIG, time-slicing, MPS) on AKS, GKE \
        and EKS.",
    )
    .attr(Attribute::string("sandbox").optional().describe(
        "Base URL of a running `fracgpu-sandbox`; every cloud and Kubernetes API is then \
                    served by it and no cloud account is needed. Also read from `FRACGPU_SANDBOX`.",
    ));
    let block = TARGETS.iter().fold(block, |b, t| {
        b.single_block(t.provider_block_name(), t.provider_block())
    });
    Schema::new(
        0,
        block.single_block(
            "kubernetes",
            model::kubernetes_block(
                "Default cluster access of `fracgpu_device_plugin_config` (a resource's own \
                    `kubernetes` block wins). Unset: `KUBECONFIG`, `~/.kube/config`, then \
                    in-cluster.",
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
        Settings::check(config, diags);
        let settings = Settings::from_config(config);
        tracing::info!(
            sandbox = settings.cloud.sandbox.is_some(),
            "provider configured"
        );
        self.state.configure(settings);
        self.state.warm_up();
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

    fn actions(&self) -> Vec<Arc<dyn Action>> {
        crate::actions::all(&self.state)
    }

    fn stop(&self) {
        self.state.stop.stop();
    }
}
