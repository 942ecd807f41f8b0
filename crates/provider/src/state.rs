//! The configuration every resource, data source and list shares: the provider block's
//! settings and the clients made from them on first use, with the stop signal and the refresh's
//! shared reads. A module of its own, apart from the registry in `provider` that imports every
//! resource, so that the resources can depend on it without depending on each other.

use std::sync::{Arc, RwLock};

use gpu::Cloud;
use tokio::sync::OnceCell;

use crate::cloud::registry::TARGETS;
use crate::cloud::target::env;
use crate::cloud::{CloudError, CloudSettings, NodePools, SharedReads};
use crate::cluster::KubernetesSettings;
use crate::model;
use crate::operation::{OpCtx, StopSignal};
use tfplugin::object::{FromValue, Known, SingleBlock};
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
    /// Settings read a configuration with unknowns as unset; one that does not fit is a bug,
    /// reported here.
    pub fn check(config: &Value, diags: &mut Diagnostics) {
        if let Err(e) = ProviderArgs::from_value(config)
            && !e.is_unknown()
        {
            diags.push(e.diagnostic());
        }
    }

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

/// How long a client's warm-up may take (an access token): a first call still waiting then asks
/// on its own.
const WARM_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// Takes the provider block's settings: terraform configures the provider once per walk,
    /// so a new refresh begins and its shared reads start afresh.
    pub fn configure(&self, settings: Settings) {
        if let Ok(mut s) = self.settings.write() {
            *s = settings;
        }
        self.shared_reads.clear();
    }

    /// Starts, in the background, what the clients can do before their first call
    /// ([`NodePools::warm_up`]) for the targets worth it ([`TargetSettings::warms_up`]):
    /// terraform configures the provider just before a walk's first read, and that read, or the
    /// first of a later resource block, would otherwise wait a round trip for it. A client that
    /// cannot be built is left to its first use to report.
    ///
    /// [`TargetSettings::warms_up`]: crate::cloud::target::TargetSettings::warms_up
    pub fn warm_up(self: &Arc<Self>) {
        let settings = self.settings();
        for target in TARGETS {
            let cloud = target.cloud();
            if !settings.cloud.of(cloud).warms_up() {
                continue;
            }
            let state = Arc::clone(self);
            tokio::spawn(async move {
                if let Ok(client) = state.node_pools(cloud).await {
                    let ctx = OpCtx::new(WARM_UP_LIMIT, state.stop.clone());
                    client.warm_up(&ctx).await;
                }
            });
        }
    }

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
