//! An in-memory Kubernetes API server, one per emulated cluster, served under `/k8s/{cloud}/{cluster}/`
//! (or one cluster at the root of its own address, [`KubeApi::root_router`], as
//! `fracgpu-sandbox apiserver` serves it) so that kubectl, helm and the kube crate can talk to it.
//! Serve it over HTTPS ([`KubeApi::serve_tls`] or a [`TlsListener`]): kubectl only sends a
//! kubeconfig's bearer token to an https server.
//!
//! It serves every built-in resource of kube-apiserver v1.34 ([`kinds`]) and the kinds of every
//! CustomResourceDefinition a client installs, with the real server's semantics: discovery (legacy
//! and aggregated) and OpenAPI v2 and v3 documents ([`discovery`], [`openapi`]), resourceVersion
//! conflicts, generation, managedFields and server-side apply conflicts, status and scale
//! subresources, watches (streaming lists included), Status errors, name and key validation, CRD
//! structural schemas (pruning with warnings, defaulting, validation), bearer tokens, ServiceAccount
//! tokens, impersonation and RBAC with the real 403 wording ([`auth`], [`rbac`]), and validating
//! admission webhooks ([`admission`]). Its nodes are a digital twin of the cloud's node pools: they
//! advertise the GPU resources the real stack would, including the GPU operator's habit of ignoring
//! a changed device plugin config until the device plugin daemonset is restarted; the plugin is
//! the operator's, or that of NVIDIA's standalone device plugin chart where no ClusterPolicy is
//! (`store/plugin_stack.rs`). A Node created
//! through the API joins the twin once it carries GPU feature discovery's hardware labels, as a
//! hand-made node does on a real server, where [`remote_twin`] plays the same twin through the API.
//! A bare control plane (`fracgpu-sandbox apiserver`) runs no twin and no controllers, as envtest's.
//!
//! It is an independent oracle: every type here is its own, written from the public Kubernetes API and NVIDIA
//! documents; nothing is shared with the provider's client code.
//!
//! Strategic merge patch of built-in kinds merges lists by their merge keys ([`strategic`]).
//!
//! Documented simplifications: lists are atomic for field ownership; strategic merge patch of a
//! custom resource (which the real server refuses) is a merge patch; watches filter events by selector but do not turn an object
//! leaving the selection into DELETED; namespace deletion is immediate; no pagination (`limit` is ignored);
//! a device plugin that refuses its config (bad YAML, unknown key, a key the ConfigMap lacks) fails to
//! start, so the node serves no GPU, as NVIDIA's plugin whose init container exits does; the reason is
//! in the node annotation `sandbox.fracgpu.dev/device-plugin-error`; the seeded ClusterPolicy CRD carries a subset of NVIDIA's
//! structural schema (`schema.rs` says which parts); built-in kinds get no defaulting but a Pod's
//! requests from its limits (`defaults.rs`; a DaemonSet's pod template stays as sent) and no validation beyond names, labels and the few checks `validate.rs` makes;
//! CEL rules (`x-kubernetes-validations`) of CRDs are not evaluated; protobuf request bodies are read
//! for the kinds kubectl sends typed ([`proto`]). `tests/sandbox/kube_http/differential.rs` and
//! `tests/sandbox/kube_http/control_planes.rs` compare all of this with a real kube-apiserver and
//! list each difference kept.

mod admission;
mod auth;
mod defaults;
mod discovery;
mod identity;
// The HTTP face uses the API's state; the state does not know its face (the sandbox's fault layer
// reaches `http::injected` directly, and `KubeApi::router` is defined there).
pub(crate) mod http;
mod kinds;
mod meta;
mod openapi;
mod openapi_proto;
mod patch;
mod proto;
mod rbac;
pub mod remote_karpenter;
pub mod remote_twin;
mod schema;
mod select;
mod status;
mod store;
mod strategic;
mod table;
mod tls;
mod twin;
mod util;
mod validate;

pub use openapi::OpenApiDocs;
pub(crate) use status::ApiError;
pub(crate) use store::Cluster;
pub use tls::TlsIdentity;
pub(crate) use tls::TlsListener;

use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A pool's nodes as the cloud emulators hand them over.
pub use super::nodes::PoolNodes;

/// All clusters' API servers.
pub struct KubeApi {
    clusters: Mutex<BTreeMap<String, Cluster>>,
    tls: Mutex<TlsIdentity>,
    /// Bumped after every change, to wake watches.
    changes: tokio::sync::watch::Sender<u64>,
    /// Called after every write through the API (not dry runs, not the clouds' node hand-off):
    /// the stack points it at the twin's cluster-autoscaler, which reacts to new pending pods.
    on_write: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// The real server's OpenAPI documents, where given (see `openapi.rs`).
    openapi: OpenApiDocs,
}

fn cluster_key(cloud: &str, cluster: &str) -> String {
    format!("{cloud}/{cluster}")
}

impl KubeApi {
    pub fn new() -> Arc<Self> {
        KubeApi::with_openapi(OpenApiDocs::default())
    }

    /// An API server that serves the built-in group versions' OpenAPI documents from `docs`
    /// (see `openapi.rs`).
    pub fn with_openapi(docs: OpenApiDocs) -> Arc<Self> {
        // Key generation cannot fail with the built-in provider; if it ever did, the sandbox could not serve.
        let tls = TlsIdentity::generate().expect("sandbox TLS identity");
        let (changes, _) = tokio::sync::watch::channel(0);
        Arc::new(KubeApi {
            clusters: Mutex::new(BTreeMap::new()),
            tls: Mutex::new(tls),
            changes,
            on_write: Mutex::new(None),
            openapi: docs,
        })
    }

    /// Sets what runs after every write through the API (see [`KubeApi`]'s `on_write`).
    pub fn on_write(&self, f: Arc<dyn Fn() + Send + Sync>) {
        *self.on_write.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    /// Wakes the watches (after any change).
    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Notified after every change (watches and persistence wait on it).
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Cluster>> {
        // A panic in one request must not take the whole sandbox down with a poisoned lock.
        self.clusters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a cluster with the GPU operator installed (namespaces default, kube-system, gpu-operator; the
    /// ClusterPolicy CRD and `cluster-policy`; the device plugin daemonset). Adding an existing cluster is a no-op.
    pub fn add_cluster(&self, cloud: &str, cluster: &str) {
        self.lock()
            .entry(cluster_key(cloud, cluster))
            .or_insert_with(|| Cluster::new(cloud, cluster));
        self.changed();
    }

    /// Adds a cluster without the GPU operator (no gpu-operator namespace, ClusterPolicy CRD or daemonset),
    /// for the provider's "operator missing" paths.
    pub fn add_cluster_without_operator(&self, cloud: &str, cluster: &str) {
        self.lock()
            .entry(cluster_key(cloud, cluster))
            .or_insert_with(|| Cluster::without_operator(cloud, cluster));
        self.changed();
    }

    /// Adds a bare control plane's cluster: the namespaces a fresh API server makes, no GPU
    /// operator, no twin, and `token` as the admin's bearer token (group `system:masters`).
    pub fn add_bare_cluster(&self, cloud: &str, cluster: &str, token: &str) {
        let mut c = Cluster::without_operator(cloud, cluster);
        c.controllers = false;
        c.token = token.to_string();
        self.lock().insert(cluster_key(cloud, cluster), c);
        self.changed();
    }

    pub(crate) fn has_cluster(&self, cloud: &str, cluster: &str) -> bool {
        self.lock().contains_key(&cluster_key(cloud, cluster))
    }

    pub(crate) fn clusters(&self) -> Vec<(String, String)> {
        self.lock()
            .values()
            .map(|c| (c.cloud.clone(), c.name.clone()))
            .collect()
    }

    /// Creates, relabels or removes the Node objects of one pool (and adds the cluster if it is new).
    pub fn pool_changed(&self, nodes: &PoolNodes) {
        let mut g = self.lock();
        let c = g
            .entry(cluster_key(nodes.cloud, &nodes.cluster))
            .or_insert_with(|| Cluster::new(nodes.cloud, &nodes.cluster));
        c.pool_changed(nodes);
        drop(g);
        self.changed();
    }

    pub fn pool_deleted(&self, cloud: &str, cluster: &str, pool: &str) {
        if let Some(c) = self.lock().get_mut(&cluster_key(cloud, cluster)) {
            c.pool_deleted(pool);
        }
        self.changed();
    }

    /// Every cluster with every object, for persistence and the inventory endpoint.
    pub fn snapshot(&self) -> Value {
        let g = self.lock();
        let clusters: Vec<Value> = g
            .values()
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect();
        let tls = serde_json::to_value(&*self.tls.lock().unwrap_or_else(|p| p.into_inner()))
            .unwrap_or(Value::Null);
        json!({"version": 1, "clusters": clusters, "tls": tls})
    }

    /// Replaces all clusters with a snapshot's.
    pub fn restore(&self, v: &Value) -> Result<(), String> {
        let list = v
            .get("clusters")
            .and_then(Value::as_array)
            .ok_or("kube snapshot: no clusters list")?;
        let mut m = BTreeMap::new();
        for c in list {
            let mut c: Cluster =
                serde_json::from_value(c.clone()).map_err(|e| format!("kube snapshot: {e}"))?;
            c.after_restore();
            m.insert(cluster_key(&c.cloud, &c.name), c);
        }
        if let Some(t) = v.get("tls").filter(|t| !t.is_null()) {
            let t: TlsIdentity =
                serde_json::from_value(t.clone()).map_err(|e| format!("kube snapshot tls: {e}"))?;
            *self.tls.lock().unwrap_or_else(|p| p.into_inner()) = t;
        }
        *self.lock() = m;
        self.changed();
        Ok(())
    }

    /// A kubeconfig for one cluster, with its bearer token; `base_url` is where the router is served.
    /// kubectl sends the token only to an https server: serve with [`KubeApi::serve_tls`] (or a
    /// [`TlsListener`]) and pass `https://127.0.0.1:PORT`; the kubeconfig then carries the sandbox CA.
    pub fn kubeconfig(&self, cloud: &str, cluster: &str, base_url: &str) -> String {
        let token = self
            .lock()
            .get(&cluster_key(cloud, cluster))
            .map(|c| c.token.clone())
            .unwrap_or_default();
        let name = format!("{cloud}-{cluster}");
        let server = format!("{}/k8s/{cloud}/{cluster}", base_url.trim_end_matches('/'));
        let ca = if server.starts_with("https://") {
            let pem = base64::engine::general_purpose::STANDARD.encode(self.ca_pem());
            format!("\n    certificate-authority-data: {pem}")
        } else {
            String::new()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: \
                {server}{ca}\ncontexts:\n- name: {name}\n  context:\n    cluster: \
                {name}\n    user: {name}-admin\n    namespace: default\ncurrent-context: \
                {name}\nusers:\n- name: {name}-admin\n  user:\n    token: {token}\npreferences: \
                {{}}\n"
        )
    }

    /// Writes `{cloud}-{cluster}.kubeconfig` for every cluster into `dir` (mode 0600, atomically: a
    /// temporary file renamed into place) and returns (cloud, cluster, path) for each.
    pub fn write_kubeconfigs(
        &self,
        dir: &std::path::Path,
        base_url: &str,
    ) -> std::io::Result<Vec<(String, String, std::path::PathBuf)>> {
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        for (cloud, cluster) in self.clusters() {
            let path = dir.join(format!("{cloud}-{cluster}.kubeconfig"));
            let tmp = dir.join(format!(".{cloud}-{cluster}.kubeconfig.tmp"));
            std::fs::write(&tmp, self.kubeconfig(&cloud, &cluster, base_url))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            }
            std::fs::rename(&tmp, &path)?;
            out.push((cloud, cluster, path));
        }
        Ok(out)
    }

    /// The sandbox CA that signs the API servers' certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.tls.lock().unwrap_or_else(|p| p.into_inner()).ca_pem()
    }

    /// The TLS identity the API servers present (for a main app that serves everything over one listener).
    pub fn tls_identity(&self) -> TlsIdentity {
        self.tls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The bearer token of a cluster (what the kubeconfig carries).
    pub fn token(&self, cloud: &str, cluster: &str) -> Option<String> {
        self.lock()
            .get(&cluster_key(cloud, cluster))
            .map(|c| c.token.clone())
    }

    /// The user a request acts as (authentication and impersonation), once RBAC allows it
    /// what `attrs` say: 401 without a valid token, 403 otherwise (see `auth.rs`, `rbac.rs`).
    fn admit(
        &self,
        cloud: &str,
        cluster: &str,
        headers: &HeaderMap,
        attrs: &identity::Attrs,
    ) -> Result<identity::User, ApiError> {
        self.with_cluster(cloud, cluster, |c| {
            let user = auth::requester(c, headers)?;
            if c.allowed(&user, attrs) {
                Ok(user)
            } else {
                Err(attrs.forbidden(&user.name))
            }
        })
        .unwrap_or_else(|| Err(ApiError::unauthorized()))
    }

    fn with_cluster<T>(
        &self,
        cloud: &str,
        cluster: &str,
        f: impl FnOnce(&Cluster) -> T,
    ) -> Option<T> {
        self.lock().get(&cluster_key(cloud, cluster)).map(f)
    }

    /// Runs a write; a dry run works on a copy that is then dropped.
    fn with_cluster_mut<T>(
        &self,
        cloud: &str,
        cluster: &str,
        dry_run: bool,
        f: &mut dyn FnMut(&mut Cluster) -> T,
    ) -> Option<T> {
        let mut g = self.lock();
        let c = g.get_mut(&cluster_key(cloud, cluster))?;
        if dry_run {
            let mut copy = c.clone();
            Some(f(&mut copy))
        } else {
            let out = f(c);
            drop(g);
            self.changed();
            // With no lock held: the hook may reach the cloud world, which calls back in here.
            let hook = self
                .on_write
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some(h) = hook {
                h();
            }
            Some(out)
        }
    }

    /// Reads one object straight from the store (tests and the inventory): `kind` is the plural resource
    /// name, qualified with its group when it has one (`configmaps`, `clusterpolicies.nvidia.com`).
    pub fn object(
        &self,
        cloud: &str,
        cluster: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        self.lock()
            .get(&cluster_key(cloud, cluster))?
            .objects
            .get(kind)?
            .get(&store::key(namespace, name))
            .cloned()
    }

    /// What the kubelet's PodResources API (`List`, pkg/kubelet/apis/podresources/v1) says of a
    /// node, in its shape: `{"pod_resources": [{"name", "namespace", "containers": [{"name",
    /// "devices": [{"resource_name", "device_ids"}]}]}]}`, pods by namespace and name.
    pub fn pod_resources(&self, cloud: &str, cluster: &str, node: &str) -> Value {
        let held = self
            .lock()
            .get(&cluster_key(cloud, cluster))
            .map(|c| c.pod_resources(node))
            .unwrap_or_default();
        let pods: Vec<Value> = held
            .into_iter()
            .map(|(pod, containers)| {
                let (ns, name) = pod.split_once('/').unwrap_or(("", &pod));
                let mut by_container: BTreeMap<String, Vec<Value>> = BTreeMap::new();
                for c in containers {
                    by_container.entry(c.container).or_default().push(
                        serde_json::json!({"resource_name": c.resource, "device_ids": c.devices}),
                    );
                }
                let containers: Vec<Value> = by_container
                    .into_iter()
                    .map(|(n, d)| serde_json::json!({"name": n, "devices": d}))
                    .collect();
                serde_json::json!({"name": name, "namespace": ns, "containers": containers})
            })
            .collect();
        serde_json::json!({ "pod_resources": pods })
    }

    /// Why the API server refused each node of a pool that could not register (or be changed),
    /// by node name; empty when every node is as its cloud made it.
    pub fn node_registration_errors(
        &self,
        cloud: &str,
        cluster: &str,
        pool: &str,
    ) -> BTreeMap<String, String> {
        self.lock()
            .get(&cluster_key(cloud, cluster))
            .map(|c| {
                c.registration_errors
                    .iter()
                    .filter(|(n, _)| c.twins.get(*n).is_some_and(|t| t.pool == pool))
                    .map(|(n, e)| (n.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Node objects of one pool, by name.
    pub fn pool_node_names(&self, cloud: &str, cluster: &str, pool: &str) -> Vec<String> {
        self.lock()
            .get(&cluster_key(cloud, cluster))
            .map(|c| {
                c.twins
                    .iter()
                    .filter(|(_, t)| t.pool == pool)
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl super::nodes::NodeSink for KubeApi {
    fn pool_changed(&self, nodes: &PoolNodes) {
        KubeApi::pool_changed(self, nodes);
    }
    fn pool_deleted(&self, cloud: &str, cluster: &str, pool: &str) {
        KubeApi::pool_deleted(self, cloud, cluster, pool);
    }
    fn demand(&self, cloud: &str, cluster: &str) -> Option<super::nodes::ClusterDemand> {
        self.with_cluster(cloud, cluster, Cluster::demand)
    }
}
