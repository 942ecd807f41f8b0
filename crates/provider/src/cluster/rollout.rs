//! Restarting daemonsets and watching them roll out, as `kubectl rollout restart` and `kubectl
//! rollout status` do: the restart bumps an annotation of the pod template (kubectl's
//! `kubectl.kubernetes.io/restartedAt`; this provider writes its own, [`RESTART_ANNOTATION`], the
//! one `fracgpu_device_plugin_config` writes), the daemonset controller replaces the pods, and the
//! rollout is done when the controller has seen the new generation and every scheduled pod is
//! updated and ready (kubectl's DaemonSetStatusViewer, staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go:
//! observedGeneration >= generation, updatedNumberScheduled == desiredNumberScheduled,
//! numberAvailable == desiredNumberScheduled; readiness is what this provider waits for).

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::delivery::{Cluster, FIELD_MANAGER, RESTART_ANNOTATION};
use super::error::KubeError;

/// The GPU operator's operands that read the device plugin config, in the order they restart.
pub const OPERANDS: [&str; 3] = [
    super::delivery::DEVICE_PLUGIN_DAEMONSET,
    "gpu-feature-discovery",
    "nvidia-device-plugin-mps-control-daemon",
];

/// Where one daemonset's rollout stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolloutStatus {
    pub generation: i64,
    pub observed_generation: i64,
    pub desired: i32,
    pub updated: i32,
    pub ready: i32,
}

impl RolloutStatus {
    /// The controller has seen the restart and every node runs a new, ready pod.
    pub fn done(&self) -> bool {
        self.observed_generation >= self.generation
            && self.updated == self.desired
            && self.ready == self.desired
    }
}

impl std::fmt::Display for RolloutStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} pods updated, {} ready",
            self.updated, self.desired, self.ready
        )
    }
}

impl Cluster {
    /// Bumps the restart annotation of a daemonset's pod template; Ok(false) when the daemonset
    /// does not exist.
    pub async fn restart_daemonset(
        &self,
        ns: &str,
        name: &str,
        at: &str,
    ) -> Result<bool, KubeError> {
        let api: Api<DaemonSet> = Api::namespaced(self.client(), ns);
        let patch =
            json!({"spec": {"template": {"metadata": {"annotations": {RESTART_ANNOTATION: at}}}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        match api.patch(name, &params, &Patch::Merge(patch)).await {
            Ok(_) => Ok(true),
            Err(e) => match KubeError::from_kube(&self.target, e) {
                e if e.is_not_found() => Ok(false),
                e => Err(e),
            },
        }
    }

    /// The daemonsets of `ns` that read the device plugin config, by name: the operator's operands
    /// (`known`: the device plugin, GPU feature discovery and the MPS control daemon all mount
    /// the ConfigMap, gpu-operator controllers/object_controls.go `handleDevicePluginConfig`),
    /// and every other daemonset whose pod template mounts the ConfigMap `configmap` as a
    /// volume. Listing daemonsets is optional: where it is forbidden, the known names stand alone.
    pub async fn config_readers(
        &self,
        ns: &str,
        configmap: Option<&str>,
        known: &[&str],
    ) -> Result<Vec<String>, KubeError> {
        let mut names: Vec<String> = known.iter().map(|n| n.to_string()).collect();
        let Some(configmap) = configmap else {
            return Ok(names);
        };
        let api: Api<DaemonSet> = Api::namespaced(self.client(), ns);
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) => match KubeError::from_kube(&self.target, e) {
                KubeError::Api { code: 403, .. } => return Ok(names),
                e => return Err(e),
            },
        };
        for ds in &list.items {
            let volumes = ds
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref());
            let mounts = volumes
                .into_iter()
                .flatten()
                .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == configmap));
            let name = ds.metadata.name.clone().unwrap_or_default();
            if mounts && !names.contains(&name) {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// Restarts every daemonset that reads the device plugin config ([`Cluster::config_readers`]):
    /// the names restarted (a known operand that does not exist is skipped).
    pub async fn restart_config_readers(
        &self,
        ns: &str,
        configmap: Option<&str>,
        at: &str,
    ) -> Result<Vec<String>, KubeError> {
        let mut restarted = Vec::new();
        for name in self.config_readers(ns, configmap, &OPERANDS).await? {
            if self.restart_daemonset(ns, &name, at).await? {
                restarted.push(name);
            }
        }
        Ok(restarted)
    }

    /// The rollout status of a daemonset; None when it does not exist.
    pub async fn daemonset_status(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<RolloutStatus>, KubeError> {
        let api: Api<DaemonSet> = Api::namespaced(self.client(), ns);
        let Some(ds) = api
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?
        else {
            return Ok(None);
        };
        let st = ds.status.unwrap_or_default();
        Ok(Some(RolloutStatus {
            generation: ds.metadata.generation.unwrap_or(0),
            observed_generation: st.observed_generation.unwrap_or(0),
            desired: st.desired_number_scheduled,
            updated: st.updated_number_scheduled.unwrap_or(0),
            ready: st.number_ready,
        }))
    }

    /// A daemonset's pod selector as a label selector (`k=v,...`); None when the daemonset does
    /// not exist or selects by labels it does not list (`matchExpressions` only).
    pub(crate) async fn daemonset_selector(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<String>, KubeError> {
        let dss: Api<DaemonSet> = Api::namespaced(self.client(), ns);
        let Some(ds) = dss
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?
        else {
            return Ok(None);
        };
        let selector = ds
            .spec
            .selector
            .match_labels
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        Ok((!selector.is_empty()).then_some(selector))
    }

    /// The pods of a daemonset (by its selector's labels) that are not ready, or still carry
    /// the template from before `restarted_at`: `name (on node)`, for a diagnostic.
    pub async fn lagging_pods(
        &self,
        ns: &str,
        name: &str,
        restarted_at: &str,
    ) -> Result<Vec<String>, KubeError> {
        let Some(selector) = self.daemonset_selector(ns, name).await? else {
            return Ok(Vec::new());
        };
        let pods: Api<Pod> = Api::namespaced(self.client(), ns);
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| {
                let new = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(RESTART_ANNOTATION))
                    .is_some_and(|a| a.as_str() == restarted_at);
                !(new && pod_ready(p))
            })
            .map(|p| {
                let node = p
                    .spec
                    .and_then(|s| s.node_name)
                    .unwrap_or_else(|| "no node".into());
                format!("{} (on {node})", p.metadata.name.unwrap_or_default())
            })
            .collect())
    }
}

/// The pod's Ready condition is True.
pub(crate) fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
