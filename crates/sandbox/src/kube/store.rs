//! One cluster's objects and the API server's write path: validation, resourceVersion, generation,
//! managedFields, and the device plugin twin that reacts to writes.

use super::kinds::{self, Kind};
use super::patch::{self, FieldPath};
use super::status::{ApiError, FieldError};
use super::twin::{self, NodeTwin, PluginInputs};
use super::util;
use super::validate;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub const OPERATOR_NS: &str = "gpu-operator";
pub const DEVICE_PLUGIN_DS: &str = "nvidia-device-plugin-daemonset";
pub const CLUSTER_POLICY: &str = "cluster-policy";
const ERROR_ANNOTATION: &str = "sandbox.fracgpu.dev/device-plugin-error";
const MAX_OBJECT_DATA: usize = 1024 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cluster {
    pub cloud: String,
    pub name: String,
    pub token: String,
    /// The cluster-wide resourceVersion counter.
    pub rv: u64,
    /// qualified resource -> "namespace/name" -> object
    pub objects: BTreeMap<String, BTreeMap<String, Value>>,
    /// node name -> its hardware and device plugin state
    pub twins: BTreeMap<String, NodeTwin>,
    /// The device plugin daemonset's pod template as last seen; a change is a restart.
    pub restart_marker: Option<String>,
    /// Recent changes for watches (not persisted: a restored cluster starts a new history).
    #[serde(skip)]
    pub events: VecDeque<WatchEvent>,
    /// Watches may resume from any resourceVersion at or after this one.
    #[serde(skip)]
    pub events_base: u64,
}

/// One change, as a watch streams it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub rv: u64,
    pub kind: String,
    pub namespace: String,
    pub event_type: &'static str,
    pub object: Value,
}

/// How many changes a cluster remembers for watches that resume from a resourceVersion.
const MAX_EVENTS: usize = 1024;

pub fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata")
}

/// What a write is: who does it, and whether it is an update or a server-side apply.
pub struct WriteCtx<'a> {
    pub manager: &'a str,
    pub apply: Option<BTreeSet<FieldPath>>,
}

impl Cluster {
    pub fn new(cloud: &str, name: &str) -> Self {
        let mut c = Cluster {
            cloud: cloud.to_string(),
            name: name.to_string(),
            token: format!("sandbox-{}", util::uuid4().replace('-', "")),
            rv: 0,
            objects: BTreeMap::new(),
            twins: BTreeMap::new(),
            restart_marker: None,
            events: VecDeque::new(),
            events_base: 0,
        };
        c.seed();
        c
    }

    /// A cluster without the GPU operator: no gpu-operator namespace, CRD, ClusterPolicy or daemonset.
    pub fn without_operator(cloud: &str, name: &str) -> Self {
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
        self.seed_object(
            kinds::CRDS,
            json!({"metadata": {"name": kinds::CLUSTERPOLICY_CRD, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                "spec": {"group": "nvidia.com", "scope": "Cluster",
                    "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy", "listKind": "ClusterPolicyList"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}}),
            "helm",
        );
        // The chart's defaults: no device plugin config, MIG strategy single, MIG manager with its own config.
        self.seed_object(
            kinds::CLUSTERPOLICIES,
            json!({"metadata": {"name": CLUSTER_POLICY, "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
                "spec": {
                    "operator": {"defaultRuntime": "containerd"},
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
        self.restart_marker = self.daemonset_marker();
    }

    fn seed_object(&mut self, kind: Kind, body: Value, manager: &str) {
        let ns = meta_str(&body, "namespace").unwrap_or_default().to_string();
        let ctx = WriteCtx {
            manager,
            apply: None,
        };
        if let Err(e) = self.create(kind, &ns, body, &ctx) {
            debug_assert!(false, "seed object rejected: {e:?}");
        }
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    pub fn get(&self, kind: Kind, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&kind.qualified())
            .and_then(|m| m.get(&key(ns, name)))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.qualified(), name))
    }

    fn get_ref(&self, kind: Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&kind.qualified())
            .and_then(|m| m.get(&key(ns, name)))
    }

    pub fn crd_present(&self) -> bool {
        self.get_ref(kinds::CRDS, "", kinds::CLUSTERPOLICY_CRD)
            .is_some()
    }

    pub fn list(
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

    /// Fills identity fields from the URL and rejects bodies that contradict it.
    fn normalize(
        kind: Kind,
        ns: &str,
        name: Option<&str>,
        mut body: Value,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: the body is not a JSON object",
                kind.kind, kind.version, kind.kind
            )));
        }
        match body.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(k)) if k == kind.kind => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the body of the request is a {other}, but a {} was expected",
                    kind.kind
                )));
            }
        }
        match body.get("apiVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if *v == kind.api_version() => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({other}) does not match the expected API version ({})",
                    kind.api_version()
                )));
            }
        }
        // The typed decoder of the real server rejects these shapes before anything else looks at them.
        for f in [
            "metadata",
            "spec",
            "status",
            "data",
            "binaryData",
            "stringData",
        ] {
            if body.get(f).is_some_and(|m| !m.is_object() && !m.is_null()) {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: {f} must be an object",
                    kind.kind, kind.version, kind.kind
                )));
            }
        }
        body["kind"] = json!(kind.kind);
        body["apiVersion"] = json!(kind.api_version());
        let m = meta_mut(&mut body);
        if kind.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        if let Some(name) = name {
            match m.get("name").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {
                    m.insert("name".into(), json!(name));
                }
            }
        }
        Ok(body)
    }

    pub fn create(
        &mut self,
        kind: Kind,
        ns: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let mut body = Self::normalize(kind, ns, None, body)?;
        let m = meta_mut(&mut body);
        if m.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
            && let Some(g) = m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
        {
            let suffix: String = (0..5)
                .map(|_| fastrand::alphanumeric().to_ascii_lowercase())
                .collect();
            let n = format!("{g}{suffix}");
            m.insert("name".into(), json!(n));
        }
        let name = meta_str(&body, "name").unwrap_or_default().to_string();
        self.check_namespace(kind, ns)?;
        if self.get_ref(kind, ns, &name).is_some() {
            validate_object(kind, &body, None)?;
            return Err(ApiError::already_exists(&kind.qualified(), &name));
        }
        self.write(kind, ns, &name, None, body, ctx)
    }

    pub fn replace(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let body = Self::normalize(kind, ns, Some(name), body)?;
        let old = self.get(kind, ns, name)?;
        match meta_str(&body, "resourceVersion") {
            Some(rv) if !rv.is_empty() && Some(rv) != meta_str(&old, "resourceVersion") => {
                return Err(ApiError::modified(&kind.qualified(), name));
            }
            _ if !kind.unconditional_update => {
                return Err(ApiError::invalid(
                    &format!("{}.{}", kind.kind, kind.group),
                    name,
                    &[FieldError::invalid(
                        "metadata.resourceVersion",
                        "0x0",
                        "must be specified for an update",
                    )],
                ));
            }
            _ => {}
        }
        self.write(kind, ns, name, Some(old), body, ctx)
    }

    /// Merge, JSON and strategic-merge patches (the last treated as a merge: none of these kinds has a list
    /// that strategic merge would merge by key in a way that matters here).
    pub fn patch(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let old = self.get(kind, ns, name)?;
        let mut new = old.clone();
        match ptype {
            PatchType::Merge | PatchType::Strategic => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                if ptype == PatchType::Strategic {
                    patch::merge_patch(&mut new, &patch::strategic_to_merge(body));
                } else {
                    patch::merge_patch(&mut new, body);
                }
            }
            PatchType::Json => patch::json_patch(&mut new, body).map_err(|e| match e {
                patch::JsonPatchError::Malformed(m) => ApiError::bad_request(m),
                patch::JsonPatchError::Failed(m) => ApiError::new(422, "Invalid", m),
            })?,
        }
        // A resourceVersion in the patch is a precondition.
        if let (Some(want), Some(have)) = (
            meta_str(&new, "resourceVersion"),
            meta_str(&old, "resourceVersion"),
        ) && want != have
            && !want.is_empty()
        {
            return Err(ApiError::modified(&kind.qualified(), name));
        }
        let new = Self::normalize(kind, ns, Some(name), new)?;
        self.write(kind, ns, name, Some(old), new, ctx)
    }

    /// Server-side apply: creates when absent; conflicts when another manager owns a field whose value the
    /// applied configuration changes, unless forced.
    pub fn apply(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        applied: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        if !applied.is_object() {
            return Err(ApiError::bad_request("an apply patch must be an object"));
        }
        for f in ["apiVersion", "kind"] {
            if applied
                .get(f)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::bad_request(format!(
                    "invalid object type: {f} must be set in an apply configuration"
                )));
            }
        }
        let applied = Self::normalize(kind, ns, Some(name), applied)?;
        let paths = patch::leaf_paths(&applied);
        let ctx = WriteCtx {
            manager,
            apply: Some(paths.clone()),
        };
        let Some(old) = self.get_ref(kind, ns, name).cloned() else {
            self.check_namespace(kind, ns)?;
            let mut fresh = applied.clone();
            meta_mut(&mut fresh).remove("managedFields");
            return self.write(kind, ns, name, None, fresh, &ctx);
        };
        let mut owners = managed_entries(&old);
        // Keyed by the whole entry, as the API server keys managers (manager, operation,
        // apiVersion, time): "helm" that applied and "helm" that updated are two managers.
        let mut conflicts: BTreeMap<String, Vec<FieldPath>> = BTreeMap::new();
        for p in &paths {
            let live = patch::get_path(&old, p);
            if live.is_none() || live == patch::get_path(&applied, p) {
                continue;
            }
            for e in owners
                .iter()
                .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            {
                if e.fields.contains(p) {
                    conflicts
                        .entry(e.describe(&kind.api_version()))
                        .or_default()
                        .push(p.clone());
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(apply_conflict(&conflicts));
        }
        if force {
            for e in owners
                .iter_mut()
                .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            {
                e.fields.retain(|p| {
                    !(paths.contains(p) && patch::get_path(&old, p) != patch::get_path(&applied, p))
                });
            }
        }
        let mut new = old.clone();
        let previous: BTreeSet<FieldPath> = owners
            .iter()
            .find(|e| e.manager == manager && e.operation == "Apply")
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        for p in previous.difference(&paths) {
            let shared = owners
                .iter()
                .any(|e| !(e.manager == manager && e.operation == "Apply") && e.fields.contains(p));
            if !shared {
                patch::remove_path(&mut new, p);
            }
        }
        for p in &paths {
            let v = patch::get_path(&applied, p).cloned().unwrap_or(Value::Null);
            if v.as_object().is_some_and(Map::is_empty)
                && patch::get_path(&new, p).is_some_and(Value::is_object)
            {
                continue;
            }
            patch::set_path(&mut new, p, v);
        }
        set_managed(&mut new, &owners, &kind.api_version());
        self.write(kind, ns, name, Some(old), new, &ctx)
    }

    pub fn delete(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        precondition_rv: Option<&str>,
    ) -> Result<Value, ApiError> {
        if kind == kinds::NAMESPACES && ["default", "kube-system", "kube-public"].contains(&name) {
            // The namespace lifecycle admission plugin protects these.
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            )
            .with_details(json!({"name": name, "kind": "namespaces"})));
        }
        let old = self.get(kind, ns, name)?;
        if let Some(rv) = precondition_rv
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                &kind.qualified(),
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion").unwrap_or_default()
                ),
            ));
        }
        self.unstore(&kind.qualified(), ns, name);
        if kind == kinds::NAMESPACES {
            for k in kinds::ALL.iter().filter(|k| k.namespaced) {
                let q = k.qualified();
                let inside: Vec<String> = self
                    .objects
                    .get(&q)
                    .map(|m| {
                        m.values()
                            .filter(|o| meta_str(o, "namespace") == Some(name))
                            .filter_map(|o| meta_str(o, "name").map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                for n in inside {
                    self.unstore(&q, name, &n);
                }
            }
        }
        if kind == kinds::CRDS && name == kinds::CLUSTERPOLICY_CRD {
            let q = kinds::CLUSTERPOLICIES.qualified();
            let all: Vec<String> = self
                .objects
                .get(&q)
                .map(|m| {
                    m.values()
                        .filter_map(|o| meta_str(o, "name").map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            for n in all {
                self.unstore(&q, "", &n);
            }
            self.objects.remove(&q);
        }
        if kind == kinds::NODES {
            self.twins.remove(name);
        }
        self.reconcile(None);
        let uid = meta_str(&old, "uid").unwrap_or_default();
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": kind.group, "kind": kind.plural, "uid": uid}}),
        )
    }

    /// The one write path: validation, bookkeeping, storage, and the twin's reaction.
    fn write(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        old: Option<Value>,
        mut new: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        if kind == kinds::SECRETS {
            fold_string_data(&mut new)?;
        }
        validate_object(kind, &new, old.as_ref())?;
        let now = crate::dates::now_rfc3339_secs();
        {
            let m = meta_mut(&mut new);
            for f in ["selfLink", "deletionTimestamp"] {
                m.remove(f);
            }
        }
        match &old {
            Some(o) => {
                let keep = |f: &str| o.get("metadata").and_then(|m| m.get(f)).cloned();
                let (uid, created, generation) =
                    (keep("uid"), keep("creationTimestamp"), keep("generation"));
                if kind.status_subresource {
                    match o.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            new.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                }
                let spec_changed = strip_meta_status(o) != strip_meta_status(&new);
                let m = meta_mut(&mut new);
                m.insert("uid".into(), uid.unwrap_or_else(|| json!(util::uuid4())));
                m.insert(
                    "creationTimestamp".into(),
                    created.unwrap_or_else(|| json!(now.clone())),
                );
                let g = generation.and_then(|g| g.as_i64()).unwrap_or(1);
                m.insert(
                    "generation".into(),
                    json!(if spec_changed { g + 1 } else { g }),
                );
            }
            None => {
                let m = meta_mut(&mut new);
                m.insert("uid".into(), json!(util::uuid4()));
                m.insert("creationTimestamp".into(), json!(now.clone()));
                m.insert("generation".into(), json!(1));
                if kind == kinds::NAMESPACES {
                    new["spec"] = json!({"finalizers": ["kubernetes"]});
                    new["status"] = json!({"phase": "Active"});
                }
            }
        }
        if kind == kinds::NAMESPACES {
            let labels = meta_mut(&mut new)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        // managedFields: an apply owns exactly its configuration; an update owns what it changed.
        let mut owners = match &old {
            Some(_) if ctx.apply.is_some() => managed_entries(&new),
            Some(o) => managed_entries(o),
            None => Vec::new(),
        };
        let present = patch::leaf_paths(&new);
        match &ctx.apply {
            Some(paths) => {
                owners.retain(|e| !(e.manager == ctx.manager && e.operation == "Apply"));
                owners.push(Managed {
                    manager: ctx.manager.to_string(),
                    operation: "Apply".into(),
                    fields: paths.clone(),
                    time: now.clone(),
                });
            }
            None => {
                let changed = match &old {
                    Some(o) => patch::changed_paths(o, &new),
                    None => present.clone(),
                };
                for e in owners
                    .iter_mut()
                    .filter(|e| !(e.manager == ctx.manager && e.operation == "Update"))
                {
                    e.fields.retain(|p| !changed.contains(p));
                }
                match owners
                    .iter_mut()
                    .find(|e| e.manager == ctx.manager && e.operation == "Update")
                {
                    Some(e) => {
                        e.fields.extend(changed.iter().cloned());
                        if !changed.is_empty() {
                            e.time = now.clone();
                        }
                    }
                    None if !changed.is_empty() => owners.push(Managed {
                        manager: ctx.manager.to_string(),
                        operation: "Update".into(),
                        fields: changed.clone(),
                        time: now.clone(),
                    }),
                    None => {}
                }
            }
        }
        for e in owners.iter_mut() {
            e.fields.retain(|p| present.contains(p));
        }
        owners.retain(|e| !e.fields.is_empty());
        set_managed(&mut new, &owners, &kind.api_version());
        if old
            .as_ref()
            .is_some_and(|o| without_volatile(o) == without_volatile(&new))
        {
            // A no-op write does not bump resourceVersion, as on the real server.
            return Ok(old.unwrap_or(new));
        }
        let new = self.store(&kind.qualified(), ns, name, new);
        if kind == kinds::CRDS && name == kinds::CLUSTERPOLICY_CRD {
            self.objects
                .entry(kinds::CLUSTERPOLICIES.qualified())
                .or_default();
        }
        self.reconcile((kind == kinds::NODES).then_some(name));
        // The twin may have rewritten the object (a node's labels): answer with what is stored.
        Ok(self.get_ref(kind, ns, name).cloned().unwrap_or(new))
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
    pub fn events_since(&self, rv: u64, kind: Kind, ns: Option<&str>) -> Option<Vec<WatchEvent>> {
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
    pub fn after_restore(&mut self) {
        self.events.clear();
        self.events_base = self.rv;
    }

    fn daemonset_marker(&self) -> Option<String> {
        self.get_ref(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
            // Any pod template change rolls the pods (a restart bumps an annotation of it).
            .map(|d| {
                d.pointer("/spec/template")
                    .cloned()
                    .unwrap_or(Value::Null)
                    .to_string()
            })
    }

    /// The device plugin's inputs as they are in the API right now.
    pub fn current_inputs(&self) -> PluginInputs {
        let cp = self.get_ref(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY);
        let s = |p: &str| {
            cp.and_then(|c| c.pointer(p))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let config_name = s("/spec/devicePlugin/config/name");
        let configmap = if config_name.is_empty() {
            None
        } else {
            self.get_ref(kinds::CONFIGMAPS, OPERATOR_NS, &config_name)
                .map(|cm| {
                    cm.get("data")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| {
                                    (k.clone(), v.as_str().unwrap_or_default().to_string())
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                })
        };
        PluginInputs {
            config_name,
            config_default: s("/spec/devicePlugin/config/default"),
            mig_strategy: s("/spec/mig/strategy"),
            configmap,
        }
    }

    /// Brings the nodes' advertisements up to date after a write: every node when the device plugin
    /// daemonset was restarted, else only the node that was written (its labels may select another config).
    /// ConfigMap and ClusterPolicy writes change no node by themselves: that is the operator's behaviour.
    pub fn reconcile(&mut self, written_node: Option<&str>) {
        let marker = self.daemonset_marker();
        let restarted = marker.is_some() && marker != self.restart_marker;
        if marker.is_some() {
            self.restart_marker = marker;
        }
        let current = self.current_inputs();
        let names: Vec<String> = if restarted {
            self.twins.keys().cloned().collect()
        } else {
            written_node
                .filter(|n| self.twins.contains_key(*n))
                .map(str::to_string)
                .into_iter()
                .collect()
        };
        for n in names {
            let Some(node) = self.get_ref(kinds::NODES, "", &n).cloned() else {
                self.twins.remove(&n);
                continue;
            };
            let Some(t) = self.twins.get_mut(&n) else {
                continue;
            };
            let labels = labels_of(&node);
            let mig_label = labels.get(twin::MIG_CONFIG_LABEL).cloned();
            if restarted || (t.cloud == "eks" && mig_label != t.seen_mig_label) {
                t.loaded = current.clone();
                t.seen_mig_label = mig_label;
            }
            let updated = render_node(&node, t);
            if updated != node {
                self.put_internal(kinds::NODES, "", &n, updated);
            }
        }
        // The daemonset controller: the rollout completes at once, on every non-GKE GPU node.
        let gpu_nodes = self
            .twins
            .values()
            .filter(|t| t.gpus > 0 && t.cloud != "gke")
            .count();
        if let Some(mut ds) = self
            .get_ref(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
            .cloned()
        {
            let generation = ds
                .pointer("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            let status = json!({"currentNumberScheduled": gpu_nodes, "desiredNumberScheduled": gpu_nodes, "numberReady": gpu_nodes,
                "numberAvailable": gpu_nodes, "updatedNumberScheduled": gpu_nodes, "numberMisscheduled": 0, "observedGeneration": generation});
            if ds.get("status") != Some(&status) {
                ds["status"] = status;
                self.put_internal(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS, ds);
            }
        }
    }

    /// Creates, updates or removes the Node objects of one pool.
    pub fn pool_changed(&mut self, p: &super::PoolNodes) {
        let names = node_names(p.cloud, &p.cluster, &p.pool, p.node_count);
        let stale: Vec<String> = self
            .twins
            .iter()
            .filter(|(n, t)| t.pool == p.pool && !names.contains(n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            self.twins.remove(&n);
            self.unstore("nodes", "", &n);
        }
        let current = self.current_inputs();
        for (i, n) in names.iter().enumerate() {
            let old_twin = self.twins.get(n).cloned();
            let mut t = NodeTwin {
                cloud: p.cloud.to_string(),
                pool: p.pool.clone(),
                gpu_product: p.gpu_product.clone(),
                gpus: if p.gpu_product.is_some() {
                    p.gpus_per_node
                } else {
                    0
                },
                gpu_memory_mib: p.gpu_memory_mib,
                mig_profile: p.mig_profile.clone(),
                mig_instances_per_gpu: p.mig_instances_per_gpu,
                gke_sharing: p.gke_sharing.clone(),
                pool_labels: p.labels.clone(),
                loaded: current.clone(),
                seen_mig_label: None,
            };
            if let Some(o) = &old_twin {
                // The plugin pod on an existing node keeps what it loaded.
                t.loaded = o.loaded.clone();
                t.seen_mig_label = o.seen_mig_label.clone();
            }
            let mut node = match self.get_ref(kinds::NODES, "", n) {
                Some(existing) => existing.clone(),
                None => new_node(p, n, i),
            };
            let mut labels = labels_of(&node);
            if let Some(o) = &old_twin {
                for k in o.pool_labels.keys() {
                    labels.remove(k);
                }
            }
            for (k, v) in standard_labels(p, n) {
                labels.entry(k).or_insert(v);
            }
            if p.cloud == "gke" {
                for (k, v) in twin::gke_labels(&t) {
                    labels.entry(k).or_insert(v);
                }
            }
            labels.extend(p.labels.clone());
            let mig_label = labels.get(twin::MIG_CONFIG_LABEL).cloned();
            if t.cloud == "eks" && mig_label != t.seen_mig_label {
                // The MIG manager repartitions and restarts the device plugin on this node.
                t.loaded = current.clone();
                t.seen_mig_label = mig_label;
            }
            node["metadata"]["labels"] = json!(labels);
            let taints: Vec<Value> = p
                .taints
                .iter()
                .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
                .collect();
            if taints.is_empty() {
                node["spec"].as_object_mut().map(|s| s.remove("taints"));
            } else {
                node["spec"]["taints"] = json!(taints);
            }
            self.twins.insert(n.clone(), t);
            let t = &self.twins[n];
            let rendered = render_node(&node, t);
            if self.get_ref(kinds::NODES, "", n) != Some(&rendered) {
                self.put_internal(kinds::NODES, "", n, rendered);
            }
        }
        self.reconcile(None);
    }

    pub fn pool_deleted(&mut self, pool: &str) {
        let gone: Vec<String> = self
            .twins
            .iter()
            .filter(|(_, t)| t.pool == pool)
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.twins.remove(&n);
            self.unstore("nodes", "", &n);
        }
    }
}

/// Writes the advertisement into a node (or, when the plugin refused its config, only notes why).
fn render_node(node: &Value, t: &NodeTwin) -> Value {
    let mut node = node.clone();
    let mut labels = labels_of(&node);
    let (_, state) = twin::mig_manager(t, &labels);
    match state {
        Some(s) => {
            labels.insert(twin::MIG_STATE_LABEL.into(), s.into());
        }
        None => {
            labels.remove(twin::MIG_STATE_LABEL);
        }
    }
    let mut annotations: BTreeMap<String, String> = node
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    match twin::advertise(t, &labels) {
        Ok(a) => {
            annotations.remove(ERROR_ANNOTATION);
            labels.retain(|k, _| !twin::is_gfd_label(k));
            labels.extend(a.labels);
            for f in ["capacity", "allocatable"] {
                let mut m: Map<String, Value> = node
                    .pointer(&format!("/status/{f}"))
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                m.retain(|k, _| !k.starts_with("nvidia.com/"));
                for (r, n) in &a.resources {
                    m.insert(r.clone(), json!(n.to_string()));
                }
                node["status"][f] = Value::Object(m);
            }
        }
        Err(e) => {
            annotations.insert(ERROR_ANNOTATION.into(), e);
        }
    }
    node["metadata"]["labels"] = json!(labels);
    if annotations.is_empty() {
        meta_mut(&mut node).remove("annotations");
    } else {
        node["metadata"]["annotations"] = json!(annotations);
    }
    node
}

/// Node names as each cloud makes them, stable for a given cluster, pool and index.
pub fn node_names(cloud: &str, cluster: &str, pool: &str, count: u32) -> Vec<String> {
    let h = util::fnv1a(&format!("{cloud}/{cluster}/{pool}"));
    (0..count)
        .map(|i| match cloud {
            "aks" => format!(
                "aks-{pool}-{:08}-vmss{}",
                h % 100_000_000,
                base36(i as u64, 6)
            ),
            "gke" => {
                let c: String = cluster
                    .chars()
                    .take(20)
                    .collect::<String>()
                    .trim_end_matches('-')
                    .to_string();
                let p: String = pool
                    .chars()
                    .take(20)
                    .collect::<String>()
                    .trim_end_matches('-')
                    .to_string();
                let suffix = base36(util::fnv1a(&format!("{h}/{i}")) % 36u64.pow(4), 4);
                format!("gke-{c}-{p}-{:08x}-{suffix}", h as u32)
            }
            _ => {
                let n = i as u64 + 10;
                format!(
                    "ip-10-{}-{}-{}.ec2.internal",
                    h % 256,
                    ((h >> 8) % 200) + n / 250,
                    n % 250
                )
            }
        })
        .collect()
}

fn base36(mut n: u64, width: usize) -> String {
    const D: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    while n > 0 {
        s.push(D[(n % 36) as usize]);
        n /= 36;
    }
    while s.len() < width {
        s.push(b'0');
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

fn standard_labels(p: &super::PoolNodes, name: &str) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".into(), "linux".into()),
        ("kubernetes.io/arch".into(), "amd64".into()),
        ("beta.kubernetes.io/os".into(), "linux".into()),
        ("beta.kubernetes.io/arch".into(), "amd64".into()),
    ]);
    match p.cloud {
        "aks" => {
            l.insert("agentpool".into(), p.pool.clone());
            l.insert("kubernetes.azure.com/agentpool".into(), p.pool.clone());
            l.insert("kubernetes.azure.com/mode".into(), "user".into());
        }
        "gke" => {
            l.insert("cloud.google.com/gke-nodepool".into(), p.pool.clone());
        }
        _ => {
            l.insert("eks.amazonaws.com/nodegroup".into(), p.pool.clone());
            l.insert("eks.amazonaws.com/capacityType".into(), "ON_DEMAND".into());
        }
    }
    if p.gpu_product.is_some() && p.cloud != "gke" {
        l.insert("nvidia.com/gpu.deploy.device-plugin".into(), "true".into());
    }
    l
}

fn new_node(p: &super::PoolNodes, name: &str, index: usize) -> Value {
    let h = util::fnv1a(name);
    let ip = format!("10.{}.{}.{}", h % 200 + 10, (h >> 8) % 250, index % 250 + 4);
    let provider_id = match p.cloud {
        "aks" => format!(
            "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_sandbox/providers/Microsoft.Compute/virtualMachineScaleSets/aks-{}-vmss/virtualMachines/{index}",
            p.pool
        ),
        "gke" => format!("gce://sandbox-project/us-central1-a/{name}"),
        _ => format!("aws:///us-east-1a/i-{:017x}", h & 0x0fff_ffff_ffff_ffff),
    };
    let now = crate::dates::now_rfc3339_secs();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": util::uuid4(), "creationTimestamp": now, "generation": 1, "labels": {}},
        "spec": {"providerID": provider_id},
        "status": {
            "capacity": {"cpu": "8", "memory": "65842656Ki", "pods": "110", "ephemeral-storage": "129886128Ki"},
            "allocatable": {"cpu": "7820m", "memory": "57289696Ki", "pods": "110", "ephemeral-storage": "119703055367"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.32.4", "kubeProxyVersion": "v1.32.4",
                "containerRuntimeVersion": "containerd://1.7.27", "osImage": "Ubuntu 22.04.5 LTS", "kernelVersion": "5.15.0-1079",
                "machineID": format!("{h:032x}"), "systemUUID": util::uuid4(), "bootID": util::uuid4()},
        },
    })
}

#[derive(Debug, Clone)]
struct Managed {
    manager: String,
    operation: String,
    fields: BTreeSet<FieldPath>,
    time: String,
}

fn managed_entries(obj: &Value) -> Vec<Managed> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Managed {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    fields: e
                        .get("fieldsV1")
                        .map(patch::from_fields_v1)
                        .unwrap_or_default(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn set_managed(obj: &mut Value, owners: &[Managed], api_version: &str) {
    let list: Vec<Value> = owners
        .iter()
        .map(|e| {
            json!({"manager": e.manager, "operation": e.operation, "apiVersion": api_version, "time": e.time,
                "fieldsType": "FieldsV1", "fieldsV1": patch::to_fields_v1(&e.fields)})
        })
        .collect();
    let m = meta_mut(obj);
    if list.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

impl Managed {
    /// How the API server names a manager in a conflict (printManager in
    /// k8s.io/apimachinery pkg/util/managedfields/internal/conflict.go): the quoted name, and
    /// for an update manager also the API version and time of its last write.
    fn describe(&self, api_version: &str) -> String {
        if self.operation == "Update" {
            format!("{:?} using {api_version} at {}", self.manager, self.time)
        } else {
            format!("{:?}", self.manager)
        }
    }
}

fn apply_conflict(conflicts: &BTreeMap<String, Vec<FieldPath>>) -> ApiError {
    let total: usize = conflicts.values().map(Vec::len).sum();
    let mut causes = Vec::new();
    let mut parts = Vec::new();
    for (m, paths) in conflicts {
        for p in paths {
            causes.push(json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": patch::dotted(p)}));
        }
        if total == 1 {
            parts.push(format!("conflict with {m}: {}", patch::dotted(&paths[0])));
        } else {
            let list: Vec<String> = paths
                .iter()
                .map(|p| format!("- {}", patch::dotted(p)))
                .collect();
            parts.push(format!("conflicts with {m}:\n{}", list.join("\n")));
        }
    }
    let plural = if total == 1 { "conflict" } else { "conflicts" };
    ApiError::new(
        409,
        "Conflict",
        format!("Apply failed with {total} {plural}: {}", parts.join("\n")),
    )
    .with_details(json!({"causes": causes}))
}

fn strip_meta_status(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    o
}

fn without_volatile(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        if let Some(Value::Array(a)) = m.get_mut("managedFields") {
            for e in a.iter_mut() {
                e.as_object_mut().map(|e| e.remove("time"));
            }
        }
    }
    o
}

/// Secret stringData is write-only sugar for data; data values must be base64.
fn fold_string_data(obj: &mut Value) -> Result<(), ApiError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(Value::Object(data)) = obj.get("data") {
        for (k, v) in data {
            let s = v.as_str().ok_or_else(|| ApiError::bad_request(format!("Secret in version \"v1\" cannot be handled as a Secret: data[{k}] must be a string")))?;
            b64.decode(s).map_err(|e| {
                ApiError::bad_request(format!("Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data[{k}]: {e}"))
            })?;
        }
    }
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        let data = obj
            .as_object_mut()
            .expect("object")
            .entry("data")
            .or_insert_with(|| json!({}));
        for (k, v) in sd {
            let s = v.as_str().unwrap_or_default();
            data[k] = json!(b64.encode(s));
        }
    }
    if obj.get("type").is_none() {
        obj["type"] = json!("Opaque");
    }
    Ok(())
}

/// What the real API validates for these kinds (a representative subset).
pub fn validate_object(kind: Kind, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let mut errs = validate::object_name(&name, kind == kinds::NAMESPACES);
    for (field, values) in [("metadata.labels", true), ("metadata.annotations", false)] {
        let ptr = if values {
            "/metadata/labels"
        } else {
            "/metadata/annotations"
        };
        match obj.pointer(ptr) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    errs.extend(validate::qualified_key(field, k));
                    match v.as_str() {
                        Some(s) if values => {
                            errs.extend(validate::label_value(&format!("{field}[{k}]"), s))
                        }
                        Some(_) => {}
                        None => {
                            return Err(ApiError::bad_request(format!(
                                "{} in version \"{}\" cannot be handled as a {}: {field}[{k}] must be a string",
                                kind.kind, kind.version, kind.kind
                            )));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "{field} must be a map of strings"
                )));
            }
        }
    }
    let data_keys = |field: &str, errs: &mut Vec<FieldError>| -> Result<usize, ApiError> {
        let mut size = 0;
        match obj.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    errs.extend(validate::config_key(&format!("{field}[{k}]"), k));
                    let s = v.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!("{} in version \"v1\" cannot be handled as a {}: {field}[{k}] must be a string", kind.kind, kind.kind))
                    })?;
                    size += k.len() + s.len();
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {field} must be a map",
                    kind.kind, kind.kind
                )));
            }
        }
        Ok(size)
    };
    if kind == kinds::CONFIGMAPS || kind == kinds::SECRETS {
        let mut size = data_keys("data", &mut errs)?;
        if kind == kinds::CONFIGMAPS {
            size += data_keys("binaryData", &mut errs)?;
            if let (Some(Value::Object(d)), Some(Value::Object(b))) =
                (obj.get("data"), obj.get("binaryData"))
            {
                for k in d.keys().filter(|k| b.contains_key(*k)) {
                    errs.push(FieldError::invalid(
                        format!("data[{k}]"),
                        k,
                        "duplicate of key present in binaryData",
                    ));
                }
            }
        }
        if size > MAX_OBJECT_DATA {
            errs.push(FieldError::too_long("data", MAX_OBJECT_DATA));
        }
        if let Some(o) = old {
            if o.get("immutable") == Some(&json!(true)) {
                for f in ["data", "binaryData"] {
                    if o.get(f) != obj.get(f) {
                        errs.push(FieldError::forbidden(
                            f,
                            "field is immutable when `immutable` is set",
                        ));
                    }
                }
                if obj.get("immutable") != Some(&json!(true)) {
                    errs.push(FieldError::forbidden(
                        "immutable",
                        "field is immutable when `immutable` is set",
                    ));
                }
            }
            if kind == kinds::SECRETS && o.get("type") != obj.get("type") {
                errs.push(FieldError::invalid(
                    "type",
                    obj.get("type").and_then(Value::as_str).unwrap_or_default(),
                    "field is immutable",
                ));
            }
        }
    }
    if kind == kinds::DAEMONSETS {
        let sel = obj
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object);
        match sel {
            None => errs.push(FieldError::required("spec.selector", "")),
            Some(sel) => {
                let tl = obj
                    .pointer("/spec/template/metadata/labels")
                    .and_then(Value::as_object);
                let ok = tl.is_some_and(|tl| sel.iter().all(|(k, v)| tl.get(k) == Some(v)));
                if !ok {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        &format!("{:?}", tl.map(|m| m.len())),
                        "`selector` does not match template `labels`",
                    ));
                }
                if let Some(o) = old
                    && o.pointer("/spec/selector") != obj.pointer("/spec/selector")
                {
                    errs.push(FieldError::invalid(
                        "spec.selector",
                        "",
                        "field is immutable",
                    ));
                }
            }
        }
    }
    if kind == kinds::CLUSTERPOLICIES {
        if let Some(s) = obj.pointer("/spec/mig/strategy") {
            let v = s.as_str().unwrap_or_default();
            if !["none", "single", "mixed"].contains(&v) {
                errs.push(FieldError {
                    field: "spec.mig.strategy".into(),
                    reason: "FieldValueNotSupported",
                    value: None,
                    detail: format!(
                        "Unsupported value: {s}: supported values: \"none\", \"single\", \"mixed\""
                    ),
                });
            }
        }
        for f in ["name", "default"] {
            if let Some(v) = obj.pointer(&format!("/spec/devicePlugin/config/{f}"))
                && !v.is_string()
                && !v.is_null()
            {
                errs.push(FieldError::invalid(
                    format!("spec.devicePlugin.config.{f}"),
                    &v.to_string(),
                    format!("spec.devicePlugin.config.{f} in body must be of type string"),
                ));
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        let kind_name = if kind.group.is_empty() {
            kind.kind.to_string()
        } else {
            format!("{}.{}", kind.kind, kind.group)
        };
        Err(ApiError::invalid(&kind_name, &name, &errs))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

/// A parsed label selector: equality- and set-based requirements.
#[derive(Debug, Default, Clone)]
pub struct Selector(Vec<LabelReq>);

#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Selector {
    pub fn parse(s: &str) -> Result<Selector, ApiError> {
        let mut reqs = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        let mut parts = Vec::new();
        for c in s.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                parts.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        let bad = |p: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{p}', expected: identifier"
            ))
        };
        let check_key = |k: &str| -> Result<String, ApiError> {
            let k = k.trim();
            if validate::qualified_key("key", k).is_empty() {
                Ok(k.to_string())
            } else {
                Err(bad(k))
            }
        };
        for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let set = |rest: &str| -> Result<Vec<String>, ApiError> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| bad(p))?;
                Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            if let Some(k) = p.strip_prefix('!') {
                reqs.push(LabelReq::NotExists(check_key(k)?));
            } else if let Some((k, v)) = p.split_once("!=") {
                reqs.push(LabelReq::NotEq(check_key(k)?, v.trim().to_string()));
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                reqs.push(LabelReq::Eq(check_key(k)?, v.trim().to_string()));
            } else if let Some((k, rest)) = p.split_once(" notin ") {
                reqs.push(LabelReq::NotIn(check_key(k)?, set(rest)?));
            } else if let Some((k, rest)) = p.split_once(" in ") {
                reqs.push(LabelReq::In(check_key(k)?, set(rest)?));
            } else {
                reqs.push(LabelReq::Exists(check_key(p)?));
            }
        }
        Ok(Selector(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// A field selector requirement on metadata.name / metadata.namespace (and Secret type).
#[derive(Debug, Clone)]
pub struct FieldReq {
    path: &'static str,
    value: String,
    negate: bool,
}

impl FieldReq {
    pub fn parse(kind: Kind, s: &str) -> Result<Vec<FieldReq>, ApiError> {
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v, negate) = if let Some((k, v)) = p.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (k, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{p}'"
                )));
            };
            let path = match k.trim() {
                "metadata.name" => "/metadata/name",
                "metadata.namespace" => "/metadata/namespace",
                "type" if kind == kinds::SECRETS => "/type",
                "spec.unschedulable" if kind == kinds::NODES => "/spec/unschedulable",
                "spec.nodeName" if kind == kinds::PODS => "/spec/nodeName",
                "status.phase" if kind == kinds::PODS => "/status/phase",
                "involvedObject.kind" if kind == kinds::EVENTS => "/involvedObject/kind",
                "involvedObject.name" if kind == kinds::EVENTS => "/involvedObject/name",
                "involvedObject.namespace" if kind == kinds::EVENTS => "/involvedObject/namespace",
                "involvedObject.uid" if kind == kinds::EVENTS => "/involvedObject/uid",
                other => {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {other}"
                    )));
                }
            };
            out.push(FieldReq {
                path,
                value: v.trim().to_string(),
                negate,
            });
        }
        Ok(out)
    }

    pub fn matches(&self, o: &Value) -> bool {
        let have = match o.pointer(self.path) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            None if self.path == "/spec/unschedulable" => "false".into(),
            _ => String::new(),
        };
        (have == self.value) != self.negate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(m: &str) -> WriteCtx<'_> {
        WriteCtx {
            manager: m,
            apply: None,
        }
    }

    fn cp_apply(spec: Value) -> Value {
        json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": CLUSTER_POLICY}, "spec": spec})
    }

    #[test]
    fn apply_owns_removes_and_prunes() {
        let mut c = Cluster::new("aks", "t");
        let p = kinds::CLUSTERPOLICIES;
        let v = c
            .apply(
                p,
                "",
                CLUSTER_POLICY,
                cp_apply(json!({"devicePlugin": {"config": {"name": "cm", "default": "all"}}})),
                "fracgpu",
                false,
            )
            .unwrap();
        assert_eq!(
            v["spec"]["devicePlugin"]["config"],
            json!({"name": "cm", "default": "all"})
        );
        assert_eq!(v["spec"]["devicePlugin"]["enabled"], true);
        let mine = managed_entries(&v)
            .into_iter()
            .find(|e| e.manager == "fracgpu")
            .unwrap();
        assert_eq!(mine.operation, "Apply");
        assert_eq!(mine.fields.len(), 2);
        // Applying an empty configuration gives the fields up: removed, and the empty map with them.
        let v = c
            .apply(p, "", CLUSTER_POLICY, cp_apply(json!({})), "fracgpu", false)
            .unwrap();
        assert!(v["spec"]["devicePlugin"].get("config").is_none(), "{v}");
        assert_eq!(
            v["spec"]["devicePlugin"]["enabled"], true,
            "helm's fields stay"
        );
        assert!(managed_entries(&v).iter().all(|e| e.manager != "fracgpu"));
    }

    #[test]
    fn updates_steal_fields_and_apply_conflicts_until_forced() {
        let mut c = Cluster::new("aks", "t");
        let p = kinds::CLUSTERPOLICIES;
        c.apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
            "fracgpu",
            false,
        )
        .unwrap();
        c.patch(
            p,
            "",
            CLUSTER_POLICY,
            PatchType::Merge,
            &json!({"spec": {"devicePlugin": {"config": {"name": "other"}}}}),
            &ctx("kubectl-patch"),
        )
        .unwrap();
        let same = c.apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"devicePlugin": {"config": {"name": "other"}}})),
            "fracgpu",
            false,
        );
        assert!(same.is_ok(), "same value: shared ownership, no conflict");
        let e = c
            .apply(
                p,
                "",
                CLUSTER_POLICY,
                cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
                "fracgpu",
                false,
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert!(
            e.message.contains("\"kubectl-patch\"")
                && e.message.contains(".spec.devicePlugin.config.name"),
            "{}",
            e.message
        );
        let v = c
            .apply(
                p,
                "",
                CLUSTER_POLICY,
                cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
                "fracgpu",
                true,
            )
            .unwrap();
        assert_eq!(v["spec"]["devicePlugin"]["config"]["name"], "cm");
        let theirs = managed_entries(&v)
            .into_iter()
            .find(|e| e.manager == "kubectl-patch");
        assert!(theirs.is_none_or(|e| !e.fields.contains(&vec![
            "spec".to_string(),
            "devicePlugin".into(),
            "config".into(),
            "name".into()
        ])));
    }

    #[test]
    fn conflicts_name_update_managers_with_version_and_time_and_appliers_alone() {
        // As printManager (k8s.io/apimachinery, pkg/util/managedfields/internal/conflict.go)
        // writes them: `"m" using v1 at <time>` for an update, `"m"` for an apply.
        let mut c = Cluster::new("aks", "t");
        let p = kinds::CLUSTERPOLICIES;
        c.apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"mig": {"strategy": "mixed"}})),
            "helm",
            true,
        )
        .unwrap();
        let e = c
            .apply(
                p,
                "",
                CLUSTER_POLICY,
                cp_apply(json!({"mig": {"strategy": "none"}})),
                "fracgpu",
                false,
            )
            .unwrap_err();
        assert!(
            e.message
                .ends_with("conflict with \"helm\": .spec.mig.strategy"),
            "{}",
            e.message
        );
        c.patch(
            p,
            "",
            CLUSTER_POLICY,
            PatchType::Merge,
            &json!({"spec": {"mig": {"strategy": "single"}}}),
            &ctx("kubectl-patch"),
        )
        .unwrap();
        let e = c
            .apply(
                p,
                "",
                CLUSTER_POLICY,
                cp_apply(json!({"mig": {"strategy": "none"}})),
                "fracgpu",
                false,
            )
            .unwrap_err();
        assert!(
            e.message
                .contains("conflict with \"kubectl-patch\" using nvidia.com/v1 at 20"),
            "{}",
            e.message
        );
    }

    #[test]
    fn generation_resource_version_and_restart() {
        let mut c = Cluster::new("eks", "t");
        let ds = c
            .get(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
            .unwrap();
        let g = ds["metadata"]["generation"].as_i64().unwrap();
        let rv0 = c.rv;
        let v = c
            .patch(
                kinds::DAEMONSETS,
                OPERATOR_NS,
                DEVICE_PLUGIN_DS,
                PatchType::Merge,
                &json!({"metadata": {"labels": {"x": "y"}}}),
                &ctx("t"),
            )
            .unwrap();
        assert_eq!(
            v["metadata"]["generation"].as_i64(),
            Some(g),
            "labels are not spec"
        );
        assert!(c.rv > rv0);
        let v = c.patch(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS, PatchType::Strategic,
            &json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}), &ctx("t")).unwrap();
        assert_eq!(v["metadata"]["generation"].as_i64(), Some(g + 1));
        let ds = c
            .get(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
            .unwrap();
        assert_eq!(ds["status"]["observedGeneration"].as_i64(), Some(g + 1));
        // Status through the main resource is ignored.
        let v = c
            .patch(
                kinds::DAEMONSETS,
                OPERATOR_NS,
                DEVICE_PLUGIN_DS,
                PatchType::Merge,
                &json!({"status": {"numberReady": 99}}),
                &ctx("t"),
            )
            .unwrap();
        assert_ne!(v["status"]["numberReady"], 99);
    }

    #[test]
    fn bare_cluster_has_no_operator() {
        let c = Cluster::without_operator("aks", "bare");
        assert!(!c.crd_present());
        assert!(c.get(kinds::NAMESPACES, "", OPERATOR_NS).is_err());
        assert!(c.get(kinds::NAMESPACES, "", "default").is_ok());
        assert!(c.get(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY).is_err());
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z./-]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("metadata".to_string()),
                        Just("spec".to_string()),
                        Just("data".to_string()),
                        Just("labels".to_string()),
                        Just("name".to_string()),
                        Just("status".to_string()),
                        Just("template".to_string()),
                        "[a-z.$/]{1,6}"
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// Whatever arrives, every verb answers (Ok or a Status error) and the twin keeps working.
        #[test]
        fn arbitrary_bodies_never_panic(body in arb_json(), patch in arb_json()) {
            let mut c = Cluster::new("eks", "fuzz");
            let pool = crate::kube::PoolNodes {
                cloud: "eks", cluster: "fuzz".into(), pool: "ng".into(), node_count: 1, labels: BTreeMap::new(), taints: vec![],
                gpu_product: Some("NVIDIA-A100-SXM4-40GB".into()), gpus_per_node: 8, gpu_memory_mib: 40960,
                mig_profile: None, mig_instances_per_gpu: 0, gke_sharing: None,
            };
            c.pool_changed(&pool);
            let node = node_names("eks", "fuzz", "ng", 1).remove(0);
            for kind in kinds::ALL {
                let ns = if kind.namespaced { OPERATOR_NS } else { "" };
                let name = match kind {
                    k if k == kinds::NODES => node.as_str(),
                    k if k == kinds::DAEMONSETS => DEVICE_PLUGIN_DS,
                    k if k == kinds::CLUSTERPOLICIES => CLUSTER_POLICY,
                    _ => "x",
                };
                let _ = c.create(kind, ns, body.clone(), &ctx("fuzz"));
                let _ = c.replace(kind, ns, name, body.clone(), &ctx("fuzz"));
                for t in [PatchType::Merge, PatchType::Json, PatchType::Strategic] {
                    let _ = c.patch(kind, ns, name, t, &patch, &ctx("fuzz"));
                }
                let _ = c.apply(kind, ns, name, patch.clone(), "fuzz", false);
                let _ = c.apply(kind, ns, name, body.clone(), "fuzz", true);
            }
            c.pool_changed(&pool);
            proptest::prop_assert!(c.get(kinds::NODES, "", &node).is_ok() || c.twins.is_empty());
        }
    }

    #[test]
    fn node_names_look_like_the_clouds() {
        let aks = node_names("aks", "c", "gpu", 2);
        assert!(
            aks[0].starts_with("aks-gpu-")
                && aks[0].ends_with("-vmss000000")
                && aks[1].ends_with("-vmss000001"),
            "{aks:?}"
        );
        let gke = node_names("gke", "sandbox-gke", "pool", 1);
        assert!(
            gke[0].starts_with("gke-sandbox-gke-pool-")
                && gke[0].len() == "gke-sandbox-gke-pool-".len() + 13,
            "{gke:?}"
        );
        let eks = node_names("eks", "c", "ng", 300);
        assert!(eks[0].starts_with("ip-10-") && eks[0].ends_with(".ec2.internal"));
        let unique: BTreeSet<&String> = eks.iter().collect();
        assert_eq!(unique.len(), 300);
        assert_eq!(node_names("aks", "c", "gpu", 2), aks, "stable");
    }
}
