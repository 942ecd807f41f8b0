//! The objects the GPU operator reads: the ConfigMap of named device plugin configs, the
//! ClusterPolicy's pointer at it, and the device plugin daemonset that must be restarted before a
//! changed config reaches the nodes (the operator does not watch the ConfigMap).
//!
//! Every write is a server-side apply under [`FIELD_MANAGER`]. On the ClusterPolicy, which the
//! operator's Helm release owns, the field ownership is chosen from what helm does next:
//! - A field held by a manager that used server-side apply (Helm 4 installs and upgrades with
//!   apply, pkg/kube/client.go `patchResourceServerSide`, without forcing conflicts) is never
//!   taken: forcing it, or changing it with an update, would make that manager's next apply (the
//!   next `helm upgrade` of the operator) fail with a conflict. The caller reports it instead.
//! - A field held by update managers (Helm 3, and Helm 4 on releases it did not install, patch
//!   with a two-way merge of the old and new manifest, which never conflicts) is taken with a
//!   forced apply: helm's next upgrade leaves it alone unless the chart's own value changes, and
//!   then the new value shows as drift. The caller keeps what was there ([`TakenField`]) and
//!   [`Cluster::give_back`] returns it, under its manager, before the final empty apply gives up
//!   this manager's fields. Without that, the empty apply would delete a field (e.g.
//!   `spec.mig.strategy`) that nobody else owns any more.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::KubeError;

pub const FIELD_MANAGER: &str = "terraform-provider-fracgpu";
pub const CLUSTER_POLICY: &str = "cluster-policy";
pub const DEVICE_PLUGIN_DAEMONSET: &str = "nvidia-device-plugin-daemonset";
/// The pod template annotation bumped to restart the device plugin, like `kubectl rollout restart`.
pub const RESTART_ANNOTATION: &str = "fracgpu.dev/restartedAt";
pub const CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";

/// What the ClusterPolicy says about the device plugin config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyPointer {
    pub name: Option<String>,
    pub default: Option<String>,
    pub mig_strategy: Option<String>,
    /// Where the operator runs its operands (the daemonset) and reads the ConfigMap from:
    /// `status.namespace` once the operator has reconciled, else the namespace of the Helm
    /// release that made the ClusterPolicy (helm 3.2 and later annotate every object they
    /// create with `meta.helm.sh/release-namespace`, pkg/action/validate.go), which is where
    /// the chart runs the operator.
    pub operand_namespace: Option<String>,
    /// Whether our field manager owns spec.mig.strategy (so an import can tell the strategy is
    /// part of this resource).
    pub mig_strategy_ours: bool,
    /// The Helm release that made the ClusterPolicy, (name, namespace), from the annotations
    /// helm puts on what it creates.
    pub release: Option<(String, String)>,
    /// `spec.migManager.config.name`: the ConfigMap the MIG manager reads its configs from; None
    /// (or empty) when it generates each node's from its GPUs (operator v26.3 and later).
    pub mig_configs: Option<String>,
    /// Whether our field manager applied the pointer (`spec.devicePlugin.config.name`): a
    /// `cluster_policy` delivery's, where a Helm release's chart would own it otherwise.
    pub pointer_ours: bool,
    /// `spec.devicePlugin.version`: the device plugin image tag the operator runs (`v0.18.1`).
    pub plugin_version: Option<String>,
}

/// A field of the ClusterPolicy (a dotted path such as `spec.mig.strategy`) as it is now: its
/// value and the other field managers that hold it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyField {
    pub path: String,
    pub value: Option<Value>,
    /// (manager, operation) of every other manager that owns the field; operation is `Apply`
    /// or `Update`.
    pub owners: Vec<(String, String)>,
}

impl PolicyField {
    /// The managers that used server-side apply: a field they hold is not ours to take.
    pub fn appliers(&self) -> Vec<&str> {
        self.owners
            .iter()
            .filter(|(_, op)| op == "Apply")
            .map(|(m, _)| m.as_str())
            .collect()
    }
}

/// What a ClusterPolicy field held before this provider took it, to give back on destroy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TakenField {
    pub value: Value,
    /// The update manager that held it (Kubernetes names fields that predate field tracking
    /// `before-first-apply`).
    pub manager: String,
}

/// The fieldsV1 pointer of a dotted path: `spec.mig.strategy` -> `/f:spec/f:mig/f:strategy`.
fn fields_v1_pointer(path: &str) -> String {
    path.split('.').map(|k| format!("/f:{k}")).collect()
}

/// A JSON pointer of a dotted path.
fn pointer(path: &str) -> String {
    path.split('.').map(|k| format!("/{k}")).collect()
}

/// A connected cluster.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    /// The same client without kube's built-in retries, for the answers that are meant, not
    /// transient: an eviction's 429 says a PodDisruptionBudget refuses it now, and the caller
    /// decides (and bounds) when to ask again. With kube's retry layer (on by default: 15 tries,
    /// backoff up to 1000 s: kube-client 5, `RetryPolicy::server_retry`) one
    /// refused eviction held the caller for some 350 s, past its own timeout and stop.
    unretried: kube::Client,
    /// Where it is, for diagnostics.
    pub target: String,
}

fn cluster_policy_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy"),
        "clusterpolicies",
    )
}

fn apply_params(force: bool) -> PatchParams {
    let mut p = PatchParams::apply(FIELD_MANAGER);
    p.force = force;
    p
}

impl Cluster {
    pub fn new(client: kube::Client, unretried: kube::Client, target: String) -> Cluster {
        Cluster {
            client,
            unretried,
            target,
        }
    }

    pub(crate) fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// See the field's comment.
    pub(crate) fn unretried_client(&self) -> kube::Client {
        self.unretried.clone()
    }

    fn err(&self, e: kube::Error) -> KubeError {
        KubeError::from_kube(&self.target, e)
    }

    /// The ConfigMap's data, None when it does not exist.
    pub async fn configmap(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client(), ns);
        match api.get_opt(name).await.map_err(|e| self.err(e))? {
            Some(cm) => Ok(Some(cm.data.unwrap_or_default())),
            None => Ok(None),
        }
    }

    /// Creates or updates the ConfigMap; keys this manager applied before and no longer lists
    /// are removed by the API server.
    pub async fn apply_configmap(
        &self,
        ns: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<(), KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client(), ns);
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns,
                "labels": {"app.kubernetes.io/managed-by": "terraform-provider-fracgpu"}},
            "data": data,
        });
        api.patch(name, &apply_params(true), &Patch::Apply(body))
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    pub async fn delete_configmap(&self, ns: &str, name: &str) -> Result<(), KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client(), ns);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) => match self.err(e) {
                e if e.is_not_found() => Ok(()),
                e => Err(e),
            },
        }
    }

    /// Fails with [`KubeError::MissingCrd`] when the operator's API group is not served.
    pub async fn check_operator(&self) -> Result<(), KubeError> {
        match self.client.list_api_group_resources("nvidia.com/v1").await {
            Ok(list) if list.resources.iter().any(|r| r.name == "clusterpolicies") => Ok(()),
            Ok(_) => Err(KubeError::MissingCrd),
            Err(e) => match self.err(e) {
                e if e.is_not_found() => Err(KubeError::MissingCrd),
                e => Err(e),
            },
        }
    }

    pub async fn cluster_policy(&self) -> Result<PolicyPointer, KubeError> {
        self.check_operator().await?;
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let obj = api
            .get_opt(CLUSTER_POLICY)
            .await
            .map_err(|e| self.err(e))?
            .ok_or_else(|| KubeError::MissingClusterPolicy(CLUSTER_POLICY.to_string()))?;
        let s = |p: &str| {
            obj.data
                .pointer(p)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let ours = |field: &str| {
            obj.metadata
                .managed_fields
                .iter()
                .flatten()
                .filter(|m| m.manager.as_deref() == Some(FIELD_MANAGER))
                .filter_map(|m| m.fields_v1.as_ref())
                .any(|f| f.0.pointer(field).is_some())
        };
        Ok(PolicyPointer {
            name: s("/spec/devicePlugin/config/name"),
            default: s("/spec/devicePlugin/config/default"),
            mig_strategy: s("/spec/mig/strategy"),
            mig_configs: s("/spec/migManager/config/name").filter(|n| !n.is_empty()),
            plugin_version: s("/spec/devicePlugin/version").filter(|v| !v.is_empty()),
            operand_namespace: s("/status/namespace")
                .filter(|n| !n.is_empty())
                .or_else(|| {
                    obj.metadata
                        .annotations
                        .as_ref()?
                        .get("meta.helm.sh/release-namespace")
                        .cloned()
                }),
            release: {
                let a = obj.metadata.annotations.as_ref();
                let get = |k: &str| a.and_then(|a| a.get(k)).cloned();
                get("meta.helm.sh/release-name").zip(get("meta.helm.sh/release-namespace"))
            },
            mig_strategy_ours: ours("/f:spec/f:mig/f:strategy"),
            pointer_ours: ours("/f:spec/f:devicePlugin/f:config/f:name"),
        })
    }

    /// The names of the cluster's GPUClusters (`nvidia.com/v1alpha1`, cluster-scoped: the GPU
    /// operator v26's DRA-based stack, deployed instead of a ClusterPolicy). None where the kind is
    /// not served or may not be listed: there is then no knowing, and nothing to say.
    pub async fn gpu_clusters(&self) -> Option<Vec<String>> {
        let gvk = GroupVersionKind::gvk("nvidia.com", "v1alpha1", "GPUCluster");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "gpuclusters");
        let api: Api<DynamicObject> = Api::all_with(self.client(), &ar);
        let list = api.list(&ListParams::default()).await.ok()?;
        Some(
            list.items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect(),
        )
    }

    /// The ClusterPolicy's fields at `paths`, with the managers other than this provider that
    /// hold them.
    pub async fn policy_fields(&self, paths: &[&str]) -> Result<Vec<PolicyField>, KubeError> {
        self.check_operator().await?;
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let obj = api
            .get_opt(CLUSTER_POLICY)
            .await
            .map_err(|e| self.err(e))?
            .ok_or_else(|| KubeError::MissingClusterPolicy(CLUSTER_POLICY.to_string()))?;
        let managed = obj.metadata.managed_fields.unwrap_or_default();
        Ok(paths
            .iter()
            .map(|path| PolicyField {
                path: path.to_string(),
                value: obj.data.pointer(&pointer(path)).cloned(),
                owners: managed
                    .iter()
                    .filter(|m| m.manager.as_deref() != Some(FIELD_MANAGER))
                    .filter(|m| {
                        m.fields_v1
                            .as_ref()
                            .is_some_and(|f| f.0.pointer(&fields_v1_pointer(path)).is_some())
                    })
                    .map(|m| {
                        (
                            m.manager.clone().unwrap_or_default(),
                            m.operation.clone().unwrap_or_default(),
                        )
                    })
                    .collect(),
            })
            .collect())
    }

    /// Gives a field back to the update manager that held it: a merge patch under its name
    /// sets the old value, and the API server moves the field's ownership to that manager.
    pub async fn give_back(&self, path: &str, taken: &TakenField) -> Result<(), KubeError> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let patch = path
            .rsplit('.')
            .fold(taken.value.clone(), |acc, k| json!({ k: acc }));
        let params = PatchParams {
            field_manager: Some(taken.manager.clone()),
            ..PatchParams::default()
        };
        api.patch(CLUSTER_POLICY, &params, &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The managers other than this provider that wrote the ClusterPolicy with an update (helm
    /// 3, kubectl edit), the one holding the most fields first: the chart's, as a rule.
    pub async fn update_managers(&self) -> Result<Vec<String>, KubeError> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let Some(obj) = api.get_opt(CLUSTER_POLICY).await.map_err(|e| self.err(e))? else {
            return Ok(Vec::new());
        };
        let mut managers: Vec<(usize, String)> = obj
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.operation.as_deref() == Some("Update"))
            .filter(|m| m.manager.as_deref() != Some(FIELD_MANAGER))
            .filter_map(|m| {
                let size = m.fields_v1.as_ref().map_or(0, |f| f.0.to_string().len());
                Some((size, m.manager.clone()?))
            })
            .collect();
        managers.sort_by_key(|m| std::cmp::Reverse(m.0));
        Ok(managers.into_iter().map(|(_, m)| m).collect())
    }

    /// Whether this provider's apply still holds the field (nobody changed it since).
    pub async fn holds(&self, path: &str) -> Result<bool, KubeError> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let Some(obj) = api.get_opt(CLUSTER_POLICY).await.map_err(|e| self.err(e))? else {
            return Ok(false);
        };
        Ok(obj.metadata.managed_fields.iter().flatten().any(|m| {
            m.manager.as_deref() == Some(FIELD_MANAGER)
                && m.operation.as_deref() == Some("Apply")
                && m.fields_v1
                    .as_ref()
                    .is_some_and(|f| f.0.pointer(&fields_v1_pointer(path)).is_some())
        }))
    }

    /// Points the ClusterPolicy at our ConfigMap (Some) or gives the fields up (None): an apply
    /// with an empty set removes what only this manager owned.
    pub async fn apply_pointer(
        &self,
        pointer: Option<(&str, Option<&str>, Option<&str>)>,
    ) -> Result<(), KubeError> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let mut body = json!({
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": CLUSTER_POLICY},
        });
        if let Some((name, default, mig)) = pointer {
            let mut config = json!({"name": name});
            if let Some(d) = default {
                config["default"] = d.into();
            }
            body["spec"] = json!({"devicePlugin": {"config": config}});
            if let Some(m) = mig {
                // The operator passes spec.mig.strategy to the plugin as MIG_STRATEGY, which beats
                // flags.migStrategy in the config file: the strategy must be set here.
                body["spec"]["mig"] = json!({"strategy": m});
            }
        }
        api.patch(CLUSTER_POLICY, &apply_params(true), &Patch::Apply(body))
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Gives up the pointer: an apply that holds nothing more, or only the MIG strategy at
    /// `keep_strategy` (its current value), so that what only this manager owned goes.
    pub async fn release_pointer(&self, keep_strategy: Option<&str>) -> Result<(), KubeError> {
        let Some(strategy) = keep_strategy else {
            return self.apply_pointer(None).await;
        };
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_policy_resource());
        let body = json!({
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": CLUSTER_POLICY},
            "spec": {"mig": {"strategy": strategy}},
        });
        api.patch(CLUSTER_POLICY, &apply_params(true), &Patch::Apply(body))
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Restarts every daemonset that reads the config of the ConfigMap `configmap`: the device
    /// plugin, GPU feature discovery and the MPS control daemon load it only when they start
    /// (k8s-device-plugin: nothing watches the file, and the config-manager sidecar reacts to a
    /// change of the node's label only). Ok(None) when none exists (no GPU node yet, or the
    /// operator runs them under other names and mounts no such ConfigMap).
    pub async fn restart_device_plugin(
        &self,
        ns: &str,
        configmap: Option<&str>,
        at: &str,
    ) -> Result<Option<String>, KubeError> {
        let restarted = self.restart_config_readers(ns, configmap, at).await?;
        Ok((!restarted.is_empty()).then(|| at.to_string()))
    }

    /// The `nvidia.com/device-plugin.config` label of every node that has one: node -> value.
    pub async fn node_config_labels(&self) -> Result<BTreeMap<String, String>, KubeError> {
        let api: Api<Node> = Api::all(self.client());
        let list = api
            .list(&ListParams::default().labels(CONFIG_LABEL))
            .await
            .map_err(|e| self.err(e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| {
                let name = n.metadata.name?;
                let v = n.metadata.labels?.get(CONFIG_LABEL)?.clone();
                Some((name, v))
            })
            .collect())
    }

    /// Helm hook Jobs in `ns` that have not completed, as `Job ns/name (pre-upgrade hook: 1
    /// active, 0 succeeded)`: what `helm upgrade` waits for when it stops at a hook.
    pub async fn unfinished_hook_jobs(&self, ns: &str) -> Result<Vec<String>, KubeError> {
        let api: Api<Job> = Api::namespaced(self.client(), ns);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| self.err(e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|j| {
                let hook = j
                    .metadata
                    .annotations
                    .as_ref()?
                    .get("helm.sh/hook")?
                    .clone();
                let status = j.status.unwrap_or_default();
                let done =
                    status.conditions.iter().flatten().any(|c| {
                        (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                    });
                (!done).then(|| {
                    format!(
                        "Job {ns}/{} ({hook} hook: {} active, {} succeeded)",
                        j.metadata.name.unwrap_or_default(),
                        status.active.unwrap_or(0),
                        status.succeeded.unwrap_or(0)
                    )
                })
            })
            .collect())
    }

    /// The release Secrets of one Helm release: (name, labels, data.release bytes).
    pub async fn release_secrets(
        &self,
        ns: &str,
        release: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>, Vec<u8>)>, KubeError> {
        let api: Api<Secret> = Api::namespaced(self.client(), ns);
        let list = api
            .list(&ListParams::default().labels(&format!("owner=helm,name={release}")))
            .await
            .map_err(|e| self.err(e))?;
        Ok(list
            .items
            .into_iter()
            .filter(|s| s.type_.as_deref() == Some("helm.sh/release.v1"))
            .map(|s| {
                let bytes = s
                    .data
                    .as_ref()
                    .and_then(|d| d.get("release"))
                    .map(|b| b.0.clone())
                    .unwrap_or_default();
                (
                    s.metadata.name.unwrap_or_default(),
                    s.metadata.labels.unwrap_or_default(),
                    bytes,
                )
            })
            .collect())
    }
}
