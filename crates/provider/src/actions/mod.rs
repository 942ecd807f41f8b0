//! Actions (terraform 1.14 and later): operations a user runs with `terraform apply
//! -invoke=action.<type>.<name>` or ties to a resource's lifecycle with `action_trigger`. They
//! keep no state, and nothing else depends on them (OpenTofu has no actions), so every resource
//! works without them.

pub mod device_plugin_rollout;
pub mod mig_reconfigure;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::{self as k, Cluster, KubeError};
use crate::model::{self, KubernetesArgs};
use crate::state::ProviderState;
use tfplugin::Diagnostic;
use tfplugin::api::Action;
use tfplugin::object::SingleBlock;
use tfplugin::schema::Block;

pub fn all(state: &Arc<ProviderState>) -> Vec<Arc<dyn Action>> {
    vec![
        Arc::new(device_plugin_rollout::DevicePluginRollout::new(
            state.clone(),
        )),
        Arc::new(mig_reconfigure::MigReconfigure::new(state.clone())),
    ]
}

/// The `kubernetes` block of every action.
fn kubernetes_block() -> Block {
    model::kubernetes_block(
        "How to reach the cluster; unset: the provider's `kubernetes` block, then \
        `KUBECONFIG`, `~/.kube/config`, in-cluster.",
    )
}

/// A client for the action's own `kubernetes` block, else the provider's.
async fn connect(
    state: &ProviderState,
    own: &SingleBlock<KubernetesArgs>,
) -> Result<Cluster, Diagnostic> {
    let own = own.0.as_ref().map(|k| k.settings()).unwrap_or_default();
    k::connect(&own.or(&state.settings().kubernetes))
        .await
        .map_err(|e| kube_error("connect to the cluster", &e))
}

fn kube_error(what: &str, e: &KubeError) -> Diagnostic {
    Diagnostic::error(
        "Kubernetes API error",
        format!(
            "Could not {what}: {e}. Check the action's `kubernetes` block (or the provider's)."
        ),
    )
}

/// A node selector as a label selector: `k=v,k2=v2`.
fn selector_text(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
