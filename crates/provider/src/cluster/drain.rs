//! Nodes taken out of service and back, as `kubectl cordon`, `kubectl drain` and `kubectl label`
//! do it: the cordon is `spec.unschedulable`; a drain evicts (policy/v1 Eviction, so the API
//! server refuses with 429 what a PodDisruptionBudget does not allow, and the caller tries again)
//! every pod of the node but those kubectl's drain leaves too (kubectl
//! staging/src/k8s.io/kubectl/pkg/drain/filters.go: DaemonSet pods, which the daemonset
//! controller would put straight back; mirror pods, which the kubelet owns), and it refuses pods
//! no controller would recreate unless told to force; the drain is over when the evicted pods
//! (by UID) are gone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::delivery::{Cluster, FIELD_MANAGER};
use super::error::KubeError;

/// The annotation of a mirror pod (a static pod's reflection in the API).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A node as the actions need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub unschedulable: bool,
}

impl NodeView {
    fn from(n: Node) -> NodeView {
        NodeView {
            name: n.metadata.name.unwrap_or_default(),
            labels: n.metadata.labels.unwrap_or_default(),
            unschedulable: n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
        }
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// A pod of a node, named `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a drain of one node has to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Pods to evict.
    pub evict: Vec<PodRef>,
    /// Pods already being deleted: waited for, not evicted again.
    pub terminating: Vec<PodRef>,
    /// Pods no controller owns (they would not come back), left out unless forced.
    pub unowned: Vec<PodRef>,
}

/// How one eviction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted (or the pod was already gone).
    Done,
    /// Refused for now, with the server's reason (a PodDisruptionBudget allows no disruption).
    Refused(String),
}

impl Cluster {
    /// The nodes matching a label selector (`k=v,k2=v2`), sorted by name.
    pub async fn nodes_matching(&self, selector: &str) -> Result<Vec<NodeView>, KubeError> {
        let api: Api<Node> = Api::all(self.client());
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        let mut nodes: Vec<NodeView> = list.items.into_iter().map(NodeView::from).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// One node; None when it does not exist.
    pub async fn node(&self, name: &str) -> Result<Option<NodeView>, KubeError> {
        let api: Api<Node> = Api::all(self.client());
        api.get_opt(name)
            .await
            .map(|n| n.map(NodeView::from))
            .map_err(|e| KubeError::from_kube(&self.target, e))
    }

    async fn patch_node(&self, name: &str, patch: Value) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| KubeError::from_kube(&self.target, e))
    }

    /// Cordons (true) or uncordons (false) a node.
    pub async fn set_unschedulable(&self, name: &str, on: bool) -> Result<(), KubeError> {
        // `null` removes the field, as `kubectl uncordon` leaves it.
        let v = if on { json!(true) } else { Value::Null };
        self.patch_node(name, json!({"spec": {"unschedulable": v}}))
            .await
    }

    /// Sets (Some) or removes (None) node labels in one write.
    pub async fn label_node(
        &self,
        name: &str,
        labels: &[(&str, Option<&str>)],
    ) -> Result<(), KubeError> {
        let m: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.map_or(Value::Null, |v| json!(v))))
            .collect();
        self.patch_node(name, json!({"metadata": {"labels": m}}))
            .await
    }

    /// The pods on a node, sorted into what a drain evicts, waits for and refuses.
    pub async fn drain_plan(&self, node: &str) -> Result<DrainPlan, KubeError> {
        let api: Api<Pod> = Api::all(self.client());
        let list = api
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        let mut plan = DrainPlan::default();
        for p in list.items {
            let owner = p
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
                .map(|o| o.kind.clone());
            let mirror = p
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
            if mirror || owner.as_deref() == Some("DaemonSet") {
                continue;
            }
            let finished = p
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
            let r = PodRef {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                uid: p.metadata.uid.clone().unwrap_or_default(),
            };
            if p.metadata.deletion_timestamp.is_some() {
                plan.terminating.push(r);
            } else if owner.is_none() && !finished {
                plan.unowned.push(r);
            } else {
                plan.evict.push(r);
            }
        }
        Ok(plan)
    }

    /// Asks the API server to evict a pod, once: a refusal is the caller's to retry.
    pub async fn evict(&self, pod: &PodRef) -> Result<Eviction, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.unretried_client(), &pod.namespace);
        match api.evict(&pod.name, &EvictParams::default()).await {
            Ok(_) => Ok(Eviction::Done),
            Err(e) => match KubeError::from_kube(&self.target, e) {
                e if e.is_not_found() => Ok(Eviction::Done),
                // The eviction subresource's answer when a budget allows no disruption now
                // (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go).
                KubeError::Api {
                    code: 429, message, ..
                } => Ok(Eviction::Refused(message)),
                e => Err(e),
            },
        }
    }

    /// Which of `pods` still exist (the same UID: a pod recreated under its name is another pod).
    pub async fn pods_still_there(&self, pods: &[PodRef]) -> Result<Vec<PodRef>, KubeError> {
        let mut left = Vec::new();
        for p in pods {
            let api: Api<Pod> = Api::namespaced(self.client(), &p.namespace);
            let got = api
                .get_opt(&p.name)
                .await
                .map_err(|e| KubeError::from_kube(&self.target, e))?;
            if got.is_some_and(|g| g.metadata.uid.as_deref() == Some(p.uid.as_str())) {
                left.push(p.clone());
            }
        }
        Ok(left)
    }

    /// Deletes the pods of a daemonset (by its selector) on the given nodes, so that the
    /// daemonset controller starts new ones there; returns the daemonset's pod selector and what
    /// was deleted, with its node. Ok(None) when the daemonset does not exist.
    pub async fn delete_daemonset_pods_on(
        &self,
        ns: &str,
        daemonset: &str,
        nodes: &[String],
    ) -> Result<Option<(String, Vec<(PodRef, String)>)>, KubeError> {
        let Some(selector) = self.daemonset_selector(ns, daemonset).await? else {
            return Ok(None);
        };
        let api: Api<Pod> = Api::namespaced(self.client(), ns);
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        let mut deleted = Vec::new();
        for p in list.items {
            let Some(on) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            if !nodes.contains(&on) {
                continue;
            }
            let name = p.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(e) => match KubeError::from_kube(&self.target, e) {
                    e if e.is_not_found() => {}
                    e => return Err(e),
                },
            }
            let pod = PodRef {
                namespace: ns.to_string(),
                name,
                uid: p.metadata.uid.unwrap_or_default(),
            };
            deleted.push((pod, on));
        }
        Ok(Some((selector, deleted)))
    }

    /// For each node, whether a ready pod of the daemonset (its pod `selector`, as
    /// [`Cluster::delete_daemonset_pods_on`] returns it) other than the `replaced` ones runs
    /// there: the nodes that still wait for theirs.
    pub async fn daemonset_nodes_waiting(
        &self,
        ns: &str,
        selector: &str,
        nodes: &[String],
        replaced: &[PodRef],
    ) -> Result<Vec<String>, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client(), ns);
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        let ready_on: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                let uid = p.metadata.uid.as_deref().unwrap_or_default();
                !replaced.iter().any(|r| r.uid == uid)
                    && p.metadata.deletion_timestamp.is_none()
                    && super::rollout::pod_ready(p)
            })
            .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
            .collect();
        Ok(nodes
            .iter()
            .filter(|n| !ready_on.contains(n))
            .cloned()
            .collect())
    }
}
