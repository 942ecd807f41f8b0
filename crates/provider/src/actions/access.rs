//! What every action shares to reach its cluster: the `kubernetes` block, the connection it
//! makes (the action's own block, else the provider's), the diagnostic of a failed request, and
//! a node selector written as a label selector.

use std::collections::BTreeMap;

use crate::cluster::{self as k, Cluster, KubeError};
use crate::model::{self, KubernetesArgs};
use crate::state::ProviderState;
use tfplugin::Diagnostic;
use tfplugin::object::SingleBlock;
use tfplugin::schema::Block;

/// The `kubernetes` block of every action.
pub(super) fn kubernetes_block() -> Block {
    model::kubernetes_block(
        "How to reach the cluster; unset: the provider's `kubernetes` block, then \
        `KUBECONFIG`, `~/.kube/config`, in-cluster.",
    )
}

/// A client for the action's own `kubernetes` block, else the provider's.
pub(super) async fn connect(
    state: &ProviderState,
    own: &SingleBlock<KubernetesArgs>,
) -> Result<Cluster, Diagnostic> {
    let own = own.0.as_ref().map(|k| k.settings()).unwrap_or_default();
    k::connect(&own.or(&state.settings().kubernetes))
        .await
        .map_err(|e| kube_error("connect to the cluster", &e))
}

pub(super) fn kube_error(what: &str, e: &KubeError) -> Diagnostic {
    Diagnostic::error(
        "Kubernetes API error",
        format!(
            "Could not {what}: {e}. Check the action's `kubernetes` block (or the provider's)."
        ),
    )
}

/// A node selector as a label selector: `k=v,k2=v2`.
pub(super) fn selector_text(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
