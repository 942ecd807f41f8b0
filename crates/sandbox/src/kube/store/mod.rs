//! One cluster's objects, as its API server stores them: the seed a fresh cluster holds, reads,
//! and the storage every write ends in (resourceVersion, the change history watches resume from).
//! The write path itself is in `write.rs` (server-side apply in `apply.rs`, the fields the server
//! sets in `system_fields.rs`), managedFields in `managed.rs`, and the twin's reaction
//! to writes (Node objects, the device plugin's advertisement) in `nodes.rs`: each is a separate
//! concern of the real API server too. `demand.rs` reads what the twin's cluster-autoscaler needs.

mod apply;
pub(crate) mod demand;
mod jobs;
mod kubelet;
mod managed;
mod nodes;
mod operands;
mod plugin_stack;
mod system_fields;
#[cfg(test)]
mod tests;
mod write;

use super::kinds::{self, Kind};
use super::meta::{labels_of, meta_mut, meta_str};
use super::patch::FieldPath;
use super::select::{FieldReq, Selector};
use super::status::ApiError;
use super::twin::NodeTwin;
use super::util;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub(crate) const OPERATOR_NS: &str = "gpu-operator";
pub(crate) const DEVICE_PLUGIN_DS: &str = "nvidia-device-plugin-daemonset";
/// The other operands that read the device plugin config (the operator's daemonset names).
pub(crate) const GFD_DS: &str = "gpu-feature-discovery";
pub(crate) const MPS_DS: &str = "nvidia-device-plugin-mps-control-daemon";
pub(crate) const CLUSTER_POLICY: &str = "cluster-policy";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Cluster {
    pub(crate) cloud: String,
    pub(crate) name: String,
    pub(crate) token: String,
    /// The tokens the TokenRequest API issued (see `kube/auth.rs`).
    #[serde(default)]
    pub(crate) sa_tokens: BTreeMap<String, crate::kube::identity::SaToken>,
    /// The cluster-wide resourceVersion counter.
    pub(crate) rv: u64,
    /// qualified resource -> "namespace/name" -> object
    pub(crate) objects: BTreeMap<String, BTreeMap<String, Value>>,
    /// node name -> its hardware and device plugin state
    pub(crate) twins: BTreeMap<String, NodeTwin>,
    /// The device plugin daemonset's pod template as last seen; a change is a restart.
    pub(crate) restart_marker: Option<String>,
    /// The same for GPU feature discovery's and the MPS control daemon's daemonsets, by
    /// namespace/name.
    #[serde(default)]
    pub(crate) operand_markers: BTreeMap<String, String>,
    /// node name -> why the API server refused the node its machine tried to register (or the
    /// change its cloud tried to make to it), while that lasts.
    #[serde(default)]
    pub(crate) registration_errors: BTreeMap<String, String>,
    /// Recent changes for watches (not persisted: a restored cluster starts a new history).
    #[serde(skip)]
    pub(crate) events: VecDeque<WatchEvent>,
    /// Watches may resume from any resourceVersion at or after this one.
    #[serde(skip)]
    pub(crate) events_base: u64,
    /// The `Warning` headers of the request being served (the HTTP layer takes them).
    #[serde(skip)]
    pub(crate) warnings: Vec<String>,
    /// Whether the twin plays the cluster's GPU stack and controllers here. A bare control plane
    /// (`fracgpu-sandbox apiserver`, as envtest's) runs none: what a test plays, it plays
    /// through the API.
    #[serde(default = "yes")]
    pub(crate) controllers: bool,
    /// The kinds the established CRDs serve (rebuilt from the stored CRDs after each CRD write
    /// and after a restore).
    #[serde(skip)]
    pub(crate) crd_kinds: Vec<Kind>,
}

fn yes() -> bool {
    true
}

/// One change, as a watch streams it.
#[derive(Debug, Clone)]
pub(crate) struct WatchEvent {
    pub(crate) rv: u64,
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) event_type: &'static str,
    pub(crate) object: Value,
}

/// How many changes a cluster remembers for watches that resume from a resourceVersion.
const MAX_EVENTS: usize = 1024;

/// `/spec/replicas` for the dotted `.spec.replicas` (or `spec.replicas`) a CRD's scale
/// subresource names.
pub(crate) fn json_pointer(dotted: &str) -> String {
    dotted
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, part| format!("{acc}/{part}"))
}

pub(crate) fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

/// What a write is: who does it, and whether it is an update or a server-side apply.
#[derive(Clone)]
pub(crate) struct WriteCtx<'a> {
    pub(crate) manager: &'a str,
    pub(crate) apply: Option<BTreeSet<FieldPath>>,
    /// `?fieldValidation=`: what happens to fields the schema does not declare.
    pub(crate) validation: Validation,
    /// A PATCH (a strict refusal then names the patched object rather than the body).
    pub(crate) patch: bool,
    /// The subresource written (`status`): only its part of the object changes.
    pub(crate) subresource: Option<&'a str>,
}

/// Server-side field validation (KEP-2885, GA in v1.27): unknown fields are dropped silently,
/// dropped with a `Warning` header each (the default), or refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Validation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl Cluster {
    pub(crate) fn new(cloud: &str, name: &str) -> Self {
        let mut c = Cluster {
            cloud: cloud.to_string(),
            name: name.to_string(),
            token: format!("sandbox-{}", util::uuid4().replace('-', "")),
            sa_tokens: BTreeMap::new(),
            rv: 0,
            objects: BTreeMap::new(),
            twins: BTreeMap::new(),
            restart_marker: None,
            operand_markers: BTreeMap::new(),
            registration_errors: BTreeMap::new(),
            events: VecDeque::new(),
            events_base: 0,
            warnings: Vec::new(),
            crd_kinds: Vec::new(),
            controllers: true,
        };
        c.seed();
        c
    }

    /// A cluster without the GPU operator: no gpu-operator namespace, CRD, ClusterPolicy or daemonset.
    pub(crate) fn without_operator(cloud: &str, name: &str) -> Self {
        let mut c = Cluster::new(cloud, name);
        let _ = c.delete(kinds::CRDS, "", kinds::CLUSTERPOLICY_CRD, None);
        let _ = c.delete(kinds::NAMESPACES, "", OPERATOR_NS, None);
        c
    }

    /// What a fresh cluster with the GPU operator chart installed holds.
    fn seed(&mut self) {
        for ns in [
            "default",
            "kube-system",
            "kube-public",
            "kube-node-lease",
            OPERATOR_NS,
        ] {
            self.seed_object(
                kinds::NAMESPACES,
                json!({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}),
                "kube-apiserver",
            );
        }
        self.seed_rbac();
        self.seed_object(
            kinds::CRDS,
            json!({"metadata": {"name": kinds::CLUSTERPOLICY_CRD, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                "spec": {"group": "nvidia.com", "scope": "Cluster",
                    "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy", "listKind": "ClusterPolicyList"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": super::schema::clusterpolicy_schema()}}]}}),
            "helm",
        );
        // The chart's defaults: no device plugin config, MIG strategy single, MIG manager with its own config.
        // The CRD requires daemonsets, dcgm, dcgmExporter, devicePlugin, driver, gfd, nodeStatusExporter,
        // operator and toolkit (`spec.required` of nvidia.com_clusterpolicies.yaml, gpu-operator v25.10.1).
        self.seed_object(
            kinds::CLUSTERPOLICIES,
            json!({"metadata": {"name": CLUSTER_POLICY, "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
                "spec": {
                    "operator": {"defaultRuntime": "containerd"},
                    "daemonsets": {"priorityClassName": "system-node-critical", "updateStrategy": "RollingUpdate"},
                    "dcgm": {"enabled": false},
                    "nodeStatusExporter": {"enabled": false},
                    "driver": {"enabled": true},
                    "toolkit": {"enabled": true},
                    "devicePlugin": {"enabled": true, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin", "version": "v0.18.0"},
                    "gfd": {"enabled": true},
                    "mig": {"strategy": "single"},
                    "migManager": {"enabled": true, "config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
                    "dcgmExporter": {"enabled": true},
                },
                "status": {"state": "ready", "namespace": OPERATOR_NS}}),
            "helm",
        );
        self.seed_object(
            kinds::DAEMONSETS,
            json!({"metadata": {"name": DEVICE_PLUGIN_DS, "namespace": OPERATOR_NS, "labels": {"app": "nvidia-device-plugin-daemonset"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}},
                    "updateStrategy": {"type": "RollingUpdate"},
                    "template": {
                        "metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}},
                        "spec": {
                            "nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
                            "containers": [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}],
                        },
                    },
                },
                "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0, "numberMisscheduled": 0}}),
            "gpu-operator",
        );
        for (name, selector) in [
            (
                GFD_DS,
                json!({"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"}),
            ),
            (
                MPS_DS,
                json!({"nvidia.com/gpu.deploy.mps-control-daemon": "true", "nvidia.com/mps.capable": "true"}),
            ),
        ] {
            self.seed_object(
                kinds::DAEMONSETS,
                json!({"metadata": {"name": name, "namespace": OPERATOR_NS, "labels": {"app": name}},
                    "spec": {
                        "selector": {"matchLabels": {"app": name}},
                        "updateStrategy": {"type": "RollingUpdate"},
                        "template": {
                            "metadata": {"labels": {"app": name}},
                            "spec": {"nodeSelector": selector, "containers": [{"name": name, "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}]},
                        },
                    },
                    "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0, "numberMisscheduled": 0}}),
                "gpu-operator",
            );
        }
        self.restart_marker = self.daemonset_marker();
        self.operand_markers = self.operand_marker_map();
    }

    /// The bootstrap ClusterRoles and their bindings a fresh API server writes.
    fn seed_rbac(&mut self) {
        for (role, groups) in crate::kube::identity::bootstrap() {
            let name = role["metadata"]["name"].clone();
            let subjects: Vec<Value> = groups
                .iter()
                .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
                .collect();
            let binding = json!({"metadata": {"name": name, "labels": role["metadata"]["labels"],
                    "annotations": role["metadata"]["annotations"]},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects});
            self.seed_object(kinds::CLUSTERROLES, role, "kube-apiserver");
            self.seed_object(kinds::CLUSTERROLEBINDINGS, binding, "kube-apiserver");
        }
    }

    fn seed_object(&mut self, kind: Kind, body: Value, manager: &str) {
        let ns = meta_str(&body, "namespace").unwrap_or_default().to_string();
        let ctx = WriteCtx {
            manager,
            apply: None,
            validation: Validation::Warn,
            patch: false,
            subresource: None,
        };
        if let Err(e) = self.create(kind, &ns, body, &ctx) {
            debug_assert!(false, "seed object rejected: {e:?}");
        }
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    pub(crate) fn get(&self, kind: Kind, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&kind.qualified())
            .and_then(|m| m.get(&key(ns, name)))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))
    }

    pub(crate) fn get_ref(&self, kind: Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&kind.qualified())
            .and_then(|m| m.get(&key(ns, name)))
    }

    /// The structural schema writes of `kind` are held to: a custom resource's from its stored
    /// CRD, and for ConfigMaps and Secrets their top-level fields (core/v1 types.go), so that an
    /// unknown one is dropped or refused as the typed decoder does.
    pub(crate) fn schema_of(&self, kind: Kind) -> Option<Value> {
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let top = |fields: &[&str]| {
            let props: Map<String, Value> = fields
                .iter()
                .map(|f| (f.to_string(), open.clone()))
                .collect();
            Some(json!({"type": "object", "properties": props}))
        };
        if kind == kinds::CONFIGMAPS {
            return top(&["data", "binaryData", "immutable"]);
        }
        if kind == kinds::SECRETS {
            return top(&["data", "stringData", "type", "immutable"]);
        }
        if !kind.custom {
            return None;
        }
        let crd = self.get_ref(kinds::CRDS, "", &kind.qualified())?;
        crd.pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v["name"] == kind.version)?
            .pointer("/schema/openAPIV3Schema")
            .cloned()
    }

    /// Every kind this cluster serves: the built-in ones, then those of its established CRDs.
    pub(crate) fn served(&self) -> impl Iterator<Item = Kind> + '_ {
        kinds::TABLE
            .iter()
            .copied()
            .chain(self.crd_kinds.iter().copied())
    }

    /// Rebuilds the kinds the CRDs serve, after a CRD changed (or the cluster was restored).
    pub(crate) fn refresh_kinds(&mut self) {
        self.crd_kinds = self
            .objects
            .get(&kinds::CRDS.qualified())
            .into_iter()
            .flat_map(|m| m.values())
            .flat_map(kinds::of_crd)
            .collect();
    }

    /// Where the scale subresource reads and writes: spec replicas, status replicas and the
    /// status selector, as dotted paths (a CRD's from its `subresources.scale`).
    pub(crate) fn scale_paths(&self, kind: Kind) -> (String, String, String) {
        let builtin = || {
            (
                ".spec.replicas".to_string(),
                ".status.replicas".to_string(),
                ".status.selector".to_string(),
            )
        };
        if !kind.custom {
            return builtin();
        }
        let Some(scale) = self
            .get_ref(kinds::CRDS, "", &kind.qualified())
            .and_then(|crd| crd.pointer("/spec/versions")?.as_array().cloned())
            .and_then(|vs| {
                vs.into_iter()
                    .find(|v| v["name"] == kind.version)?
                    .pointer("/subresources/scale")
                    .cloned()
            })
        else {
            return builtin();
        };
        let s = |k: &str| scale[k].as_str().unwrap_or_default().to_string();
        (
            s("specReplicasPath"),
            s("statusReplicasPath"),
            s("labelSelectorPath"),
        )
    }

    #[cfg(test)]
    pub(crate) fn crd_present(&self) -> bool {
        self.get_ref(kinds::CRDS, "", kinds::CLUSTERPOLICY_CRD)
            .is_some()
    }

    pub(crate) fn list(
        &self,
        kind: Kind,
        ns: Option<&str>,
        labels: &Selector,
        fields: &[FieldReq],
    ) -> Value {
        let items: Vec<Value> = self
            .objects
            .get(&kind.qualified())
            .map(|m| {
                m.values()
                    .filter(|o| {
                        ns.is_none_or(|n| meta_str(o, "namespace").unwrap_or_default() == n)
                    })
                    .filter(|o| labels.matches(&labels_of(o)))
                    .filter(|o| fields.iter().all(|f| f.matches(o)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": items,
        })
    }

    fn check_namespace(&self, kind: Kind, ns: &str) -> Result<(), ApiError> {
        if kind.namespaced && self.get_ref(kinds::NAMESPACES, "", ns).is_none() {
            return Err(ApiError::not_found("namespaces", ns));
        }
        Ok(())
    }

    /// Internal write that skips validation and managedFields: the kubelet and feature discovery.
    fn put_internal(&mut self, kind: Kind, ns: &str, name: &str, obj: Value) {
        self.store(&kind.qualified(), ns, name, obj);
    }

    /// Stores an object under a fresh resourceVersion and records the change for watches.
    fn store(&mut self, kind_q: &str, ns: &str, name: &str, mut obj: Value) -> Value {
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv));
        let existed = self
            .objects
            .get(kind_q)
            .is_some_and(|m| m.contains_key(&key(ns, name)));
        self.record(kind_q, ns, if existed { "MODIFIED" } else { "ADDED" }, &obj);
        self.objects
            .entry(kind_q.to_string())
            .or_default()
            .insert(key(ns, name), obj.clone());
        obj
    }

    /// Removes an object; its last state, under a fresh resourceVersion, is the DELETED event.
    fn unstore(&mut self, kind_q: &str, ns: &str, name: &str) -> Option<Value> {
        let mut obj = self.objects.get_mut(kind_q)?.remove(&key(ns, name))?;
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv));
        self.record(kind_q, ns, "DELETED", &obj);
        Some(obj)
    }

    /// Removes every object of `kind_q` that `pick` chooses (a namespace's contents, a CRD's
    /// objects), each with its DELETED event.
    fn unstore_where(&mut self, kind_q: &str, pick: impl Fn(&Value) -> bool) {
        let chosen: Vec<(String, String)> = self
            .objects
            .get(kind_q)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|o| pick(o))
            .map(|o| {
                let s = |f| meta_str(o, f).unwrap_or_default().to_string();
                (s("namespace"), s("name"))
            })
            .collect();
        for (ns, n) in chosen {
            self.unstore(kind_q, &ns, &n);
        }
    }

    fn record(&mut self, kind_q: &str, ns: &str, event_type: &'static str, obj: &Value) {
        self.events.push_back(WatchEvent {
            rv: self.rv,
            kind: kind_q.to_string(),
            namespace: ns.to_string(),
            event_type,
            object: obj.clone(),
        });
        while self.events.len() > MAX_EVENTS {
            if let Some(e) = self.events.pop_front() {
                self.events_base = e.rv;
            }
        }
    }

    /// Changes after `rv` to objects of one kind (and namespace), or None when they are no longer known.
    pub(crate) fn events_since(
        &self,
        rv: u64,
        kind: Kind,
        ns: Option<&str>,
    ) -> Option<Vec<WatchEvent>> {
        if rv < self.events_base {
            return None;
        }
        let q = kind.qualified();
        Some(
            self.events
                .iter()
                .filter(|e| e.rv > rv && e.kind == q && ns.is_none_or(|n| e.namespace == n))
                .cloned()
                .collect(),
        )
    }

    /// A restored cluster has no history: watches resume only from now on.
    pub(crate) fn after_restore(&mut self) {
        self.events.clear();
        self.events_base = self.rv;
        self.refresh_kinds();
    }
}
