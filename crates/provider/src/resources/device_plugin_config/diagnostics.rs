//! The diagnostics every handler and delivery of this resource shares: a Kubernetes error in the
//! user's words (which attribute to check, which permissions each delivery needs), and the
//! warnings about what the operator or the nodes will make of the configs as delivered.

use std::collections::BTreeMap;

use tfplugin::{AttrPath, Diagnostic, Diagnostics};

use super::desired::Desired;
use crate::cluster::{Cluster, KubeError};

pub(super) fn kube_diagnostic(action: &str, access: Option<&str>, e: &KubeError) -> Diagnostic {
    let check = match access {
        Some(a) => format!("Check {}", AttrPath::parse(a)),
        None => {
            "Check the provider's `kubernetes` block (or KUBECONFIG, ~/.kube/config)".to_string()
        }
    };
    let (summary, hint, path) = match e {
        KubeError::Unreachable { .. } => (
            "Kubernetes cluster unreachable",
            format!("{check} and that the API server is up."),
            access.map(AttrPath::parse),
        ),
        KubeError::BadResponse { .. } => (
            "Unreadable Kubernetes API answer",
            "The API server (or a proxy in front of it) answered with something that is not a \
                Kubernetes object of a sane size; check what serves that address."
                .to_string(),
            access.map(AttrPath::parse),
        ),
        KubeError::Config(_) => (
            "Invalid Kubernetes settings",
            format!(
                "{check}: the kubeconfig path, its context, or \
                host/token/cluster_ca_certificate."
            ),
            access.map(AttrPath::parse),
        ),
        KubeError::MissingCrd | KubeError::MissingClusterPolicy(_) => (
            "NVIDIA GPU operator not installed",
            "delivery = \"cluster_policy\" needs the GPU operator (its ClusterPolicy \
                `cluster-policy`). Install the operator chart first, or use delivery = \"helm\" \
                with its release."
                .to_string(),
            Some(AttrPath::attr("delivery")),
        ),
        KubeError::Helm(_) => (
            "Helm release problem",
            "Check the helm block.".to_string(),
            Some(AttrPath::attr("helm").with_index(0).with_attr("release")),
        ),
        // The API server's message (kept above) names the verb, the resource and the namespace
        // it refused; the hint lists the whole set, as the guide's manifests grant it.
        KubeError::Api {
            code: 401 | 403, ..
        } => (
            "Kubernetes permission denied",
            if matches!(e, KubeError::Api { code: 401, .. }) {
                format!(
                    "{check}: the API server did not accept the credentials (an expired or \
                    revoked token, or a certificate it does not trust)."
                )
            } else {
                format!(
                    "{check}: the credentials lack the permission named above. delivery = \
                    \"cluster_policy\" needs, in the ConfigMap's namespace, configmaps get, \
                    create, patch, delete and daemonsets patch (nvidia-device-plugin-daemonset), \
                    and cluster-wide clusterpolicies.nvidia.com get, patch (cluster-policy) and \
                    nodes list. delivery = \"helm\" needs secrets list and daemonsets patch in the \
                    release's namespace, nodes list, and what `helm upgrade` of the operator's \
                    chart needs. delivery = \"argocd\" and \"flux\" need get and update on the \
                    Application or HelmRelease in its namespace, and nodes list. The guide \"Where \
                    your GPU operator lives\" (Least privilege) has them as Role and ClusterRole \
                    manifests."
                )
            },
            access.map(AttrPath::parse),
        ),
        KubeError::Api { .. } => ("Kubernetes API error", String::new(), None),
    };
    let d = Diagnostic::error(
        summary,
        format!("Could not {action}: {e}. {hint}")
            .trim_end()
            .to_string(),
    );
    match path {
        Some(p) => d.at(p),
        None => d,
    }
}

/// Warns about what the operator will do with the configs as delivered, which no error stops:
/// - A config with the mixed MIG strategy (`nvidia.com/mig-<profile>` resources) while
///   `mig_strategy` is unset and the operator's is another: the operator passes
///   ClusterPolicy `spec.mig.strategy` to the device plugin as MIG_STRATEGY (NVIDIA/gpu-operator
///   object_controls.go), which beats the file's `flags.migStrategy` (k8s-device-plugin's
///   precedence: flag, environment, file), and the chart sets `single`: pods that ask for a
///   mixed-strategy resource never schedule.
/// - A ConfigMap outside the operator's namespace: the operator mounts the config from a
///   ConfigMap in its own namespace only, so the configs reach no node. Only a delivery that
///   places the ConfigMap itself, or reads where the chart goes, passes `operator_namespace`; a
///   chart that renders it into its release's namespace cannot miss.
pub(super) fn warn_operator_mismatch(
    d: &Desired,
    operator_namespace: Option<&str>,
    operator_strategy: Option<&str>,
    diags: &mut Diagnostics,
) {
    let mixed: Vec<&String> = d
        .configs
        .iter()
        .filter(|(_, c)| c.mig_strategy == Some(gpu::device_plugin::MigStrategyFlag::Mixed))
        .map(|(name, _)| name)
        .collect();
    if d.mig_strategy.is_none() && !mixed.is_empty() && operator_strategy != Some("mixed") {
        let theirs = operator_strategy.map_or("unset".to_string(), |s| format!("{s:?}"));
        diags.push(
            Diagnostic::warning(
                "MIG strategy overridden by the ClusterPolicy",
                format!(
                    "Config {} asks for the mixed MIG strategy (resources \
                        nvidia.com/mig-<profile>), but the GPU operator's spec.mig.strategy is \
                        {theirs}, and the operator hands it to the device plugin, overriding the \
                        config's own flag: nodes advertise no nvidia.com/mig-* resource and pods \
                        asking for one never schedule. Set mig_strategy = \"mixed\".",
                    quoted(&mixed),
                ),
            )
            .at(AttrPath::attr("mig_strategy")),
        );
    }
    if let Some(ns) = operator_namespace.filter(|ns| *ns != d.namespace) {
        diags.push(
            Diagnostic::warning(
                "ConfigMap outside the operator's namespace",
                format!(
                    "The GPU operator runs in namespace {ns:?} and reads its device plugin config \
                        from a ConfigMap there only; this one goes to {:?}, so no node gets these \
                        configs. Set namespace = {ns:?}.",
                    d.namespace
                ),
            )
            .at(AttrPath::attr("namespace")),
        );
    }
}

/// Warns about nodes whose label names no config of this resource.
pub(super) async fn warn_unknown_labels(c: &Cluster, d: &Desired, diags: &mut Diagnostics) {
    let Ok(labels) = c.node_config_labels().await else {
        return;
    };
    let mut unknown: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, value) in &labels {
        if !d.configs.contains_key(value) {
            unknown.entry(value).or_default().push(node);
        }
    }
    for (value, nodes) in unknown {
        diags.push(
            Diagnostic::warning(
                "Node label names no config",
                format!(
                    "{} node(s) ({}) carry nvidia.com/device-plugin.config={value:?}, which is \
                        not a config of this resource. NVIDIA's config-manager finds no such \
                        config there: a device plugin pod that starts on them stops at its \
                        init container (\"specified config {value} does not exist\") and a \
                        running one that sees the label fails to reload, so the nodes serve \
                        no GPU. Add `config {{ name = {value:?} ... }}` or relabel the nodes.",
                    nodes.len(),
                    nodes.join(", ")
                ),
            )
            .at(AttrPath::attr("config")),
        );
    }
}

pub(super) fn quoted(names: &[&String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A warning for the settings of `desired` that the device plugin release the cluster runs
/// (`version`, read from `source`) passes over; None when it reads them all or the version says
/// nothing.
pub(super) fn ignored_by_plugin(
    desired: &Desired,
    version: &str,
    source: &str,
) -> Option<Diagnostic> {
    use gpu::device_plugin::releases::{SHARING_OPTIONS_SINCE, ignored_by, release_of};
    let release = release_of(version)?;
    let lines: Vec<String> = desired
        .configs
        .iter()
        .filter_map(|(name, cfg)| {
            let ignored = ignored_by(cfg, release);
            (!ignored.is_empty()).then(|| format!("{name:?}: {}", ignored.join(", ")))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let (a, b, c) = SHARING_OPTIONS_SINCE;
    Some(Diagnostic::warning(
        "The device plugin passes over settings of these configs",
        format!(
            "The cluster runs device plugin {version} ({source}), which does not read {}. Until \
            it is v{a}.{b}.{c} or later (GPU operator v26.7.0, or NVIDIA's device plugin chart \
            0.20.0), shared GPUs are handed out `distributed` and a container asking for more \
            than one MPS slice is refused. The configs are written as declared and take effect \
            once the plugin is upgraded; to stop this warning, upgrade it or drop the settings.",
            lines.join("; ")
        ),
    ))
}
