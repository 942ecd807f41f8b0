//! The digital twin as a client of any Kubernetes API server: what the GPU stack on each node would
//! write, written through the API. It plays the GPU operator's node labelling, its MIG manager, GPU
//! feature discovery and the NVIDIA device plugin on nodes that no kubelet runs (a real kube-apiserver
//! with hand-made Nodes, or the sandbox's own API), with the same pure logic as the sandbox's
//! in-process twin (`twin.rs`).
//!
//! Each [`RemoteTwin::sync_once`] reads the ClusterPolicy `cluster-policy`, the ConfigMap it points the
//! device plugin at (in `gpu-operator`), the device plugin DaemonSet's pod template and the Nodes. A node
//! takes part once it carries GPU feature discovery's hardware labels (`nvidia.com/gpu.product`,
//! `nvidia.com/gpu.count`, `nvidia.com/gpu.memory`, `nvidia.com/mig.capable`): the twin's stand-in for
//! NVML. Because GFD rewrites some of those labels itself (`-SHARED`, `-MIG-<profile>`), the hardware
//! first seen is kept in the node annotation `sandbox.fracgpu.dev/gpu-hardware` and read from there
//! afterwards. The device plugin reloads its config only when its pod restarts: when the DaemonSet's pod
//! template changed since the last sync, when the MIG manager restarts it after the node's
//! `nvidia.com/mig.config` changed, or when it first starts on a node. What a plugin loaded lives in
//! this process, as it lives in a pod.
//!
//! Writes: node labels and annotations with a JSON merge patch of the Node, the extended resources
//! (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `nvidia.com/mig-<profile>`) in `status.capacity` and
//! `status.allocatable` with a merge patch of its `status` subresource, as the Kubernetes task
//! "Advertise Extended Resources for a Node" does (kubernetes.io/docs/tasks/administer-cluster/
//! extended-resource-node/); with no kubelet, nothing copies capacity into allocatable, so both are
//! written.
//!
//! [`RemoteTwin::kubelet_once`] plays the parts of the kubelet, the node lifecycle controller and the
//! scheduler that daemonsets and drains need on nodes no kubelet runs: it reports every Node Ready
//! (the kubelet's status) and takes off the `node.kubernetes.io/not-ready` taint the API server put
//! on it (the node lifecycle controller's part once a node is Ready); it binds a DaemonSet's pods to the node their required node
//! affinity names (the daemonset controller leaves that to the scheduler since Kubernetes 1.12,
//! pkg/controller/daemon/util `ReplaceDaemonSetPodNodeNameNodeAffinity`); it reports the pods bound to
//! an existing node Running and Ready, as a kubelet does once the containers start (status
//! subresource), or Failed where the kubelet's admission would refuse them for want of room or
//! by the device plugin's rules (`twin::admit`, as in the store); and it ends the pods being deleted there, as a kubelet does once their containers
//! stop (a delete with grace period 0: kube-apiserver leaves a bound pod's graceful delete to the
//! kubelet). Beyond daemonset pods it places only a pod pinned to one node by the
//! `kubernetes.io/hostname` node selector, and only while that node is not cordoned (the
//! scheduler's NodeUnschedulable filter); any other pod without a node stays pending.
//!
//! Its MIG manager fails a repartitioning while pods other than daemonset pods hold the node's GPUs,
//! and, like the real one, tries again only when `nvidia.com/mig.config` changes (`twin::mig_fails`,
//! which the sandbox's in-process twin follows too).
//!
//! How it learns a node's hardware is in `remote_twin/hardware.rs`, the patches it writes to a node
//! in `remote_twin/node_writes.rs`, what it reads from listed pods and nodes in
//! `remote_twin/objects.rs`, and its kubelet's admission of pods in `remote_twin/admission.rs`.

mod admission;
mod hardware;
mod node_writes;
mod objects;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::meta::labels_of;
use super::store::{CLUSTER_POLICY, DEVICE_PLUGIN_DS, GFD_DS, MPS_DS, OPERATOR_NS};
use super::twin::{self, MigManager, NodeTwin, PluginInputs, Restarts};
pub use hardware::HARDWARE_ANNOTATION;
use hardware::learn;
use node_writes::node_writes;
use objects::{daemon_pod_node, gpu_users, items, ready, string_map};

/// The taint kube-apiserver's NodeTaint admission puts on every new Node
/// (plugin/pkg/admission/nodetaint), which the node lifecycle controller removes once the node
/// reports Ready.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Why a sync could not finish.
#[derive(Debug)]
pub enum RemoteError {
    /// The client could not be made (a CA that does not parse).
    Setup(String),
    /// A request got no answer.
    Transport {
        what: String,
        source: reqwest::Error,
    },
    /// The server answered with an error (its Status message).
    Api {
        what: String,
        code: u16,
        message: String,
    },
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Setup(m) => write!(f, "twin client: {m}"),
            RemoteError::Transport { what, .. } => write!(f, "{what}: no answer"),
            RemoteError::Api {
                what,
                code,
                message,
            } => write!(f, "{what}: {code} {message}"),
        }
    }
}

impl std::error::Error for RemoteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RemoteError::Transport { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What one sync saw and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncReport {
    /// The GPU nodes the twin runs on.
    pub gpu_nodes: Vec<String>,
    /// The device plugin DaemonSet's pod template changed (every plugin reloaded its config).
    pub restarted: bool,
    /// The nodes whose labels, annotations or status were written.
    pub written: Vec<String>,
    /// node -> why its device plugin refused its config (it keeps its previous advertisement).
    pub refused: BTreeMap<String, String>,
    /// node -> the pods whose GPUs made its MIG manager fail a repartitioning.
    pub mig_failed: BTreeMap<String, Vec<String>>,
}

/// What the twin keeps between syncs, as the pods on the nodes keep it.
#[derive(Default)]
struct State {
    marker: Option<String>,
    /// GPU feature discovery's and the MPS control daemon's pod templates, by daemonset name.
    operand_markers: BTreeMap<String, String>,
    nodes: BTreeMap<String, NodeTwin>,
}

impl State {
    /// Which operands' daemonsets rolled their pods since the last sync (their pod templates
    /// changed), remembering the templates now. A daemonset that is not there restarts nothing.
    fn restarts(
        &mut self,
        marker: Option<String>,
        operand_markers: BTreeMap<String, String>,
    ) -> Restarts {
        let plugin = marker.is_some() && marker != self.marker;
        if marker.is_some() {
            self.marker = marker;
        }
        let operand_restarted = |n: &str| {
            operand_markers
                .get(n)
                .is_some_and(|m| self.operand_markers.get(n) != Some(m))
        };
        let (gfd, mps) = (operand_restarted(GFD_DS), operand_restarted(MPS_DS));
        self.operand_markers = operand_markers;
        Restarts { plugin, gfd, mps }
    }
}

/// What the device plugin reads now, its daemonset's pod template, and GFD's and the MPS
/// daemon's pod templates by the operator's daemonset names.
type StackReads = (PluginInputs, Option<String>, BTreeMap<String, String>);

/// What one sync read of the GPU stack's objects.
struct Stack {
    /// The device plugin's inputs as the API holds them now.
    current: PluginInputs,
    mm: MigManager,
    /// The device plugin daemonset's pod template.
    marker: Option<String>,
    /// GFD's and the MPS control daemon's pod templates, by daemonset name.
    operand_markers: BTreeMap<String, String>,
    /// node -> the pods that hold its GPUs.
    users: BTreeMap<String, Vec<String>>,
    nodes: Vec<Value>,
}

/// The twin of the GPU stack, for one API server.
pub struct RemoteTwin {
    http: reqwest::Client,
    base: String,
    auth: String,
    state: tokio::sync::Mutex<State>,
}

impl RemoteTwin {
    /// A twin for the API server at `base_url` (e.g. `https://127.0.0.1:6443`, or a sandbox cluster's
    /// `https://127.0.0.1:PORT/k8s/eks/NAME`), trusting `ca_pem` (else the system roots) and sending
    /// `token` as a bearer token.
    pub fn new(base_url: &str, ca_pem: Option<&str>, token: &str) -> Result<Self, RemoteError> {
        let mut b = reqwest::Client::builder().timeout(Duration::from_secs(20));
        if let Some(pem) = ca_pem {
            let ca = reqwest::Certificate::from_pem(pem.as_bytes())
                .map_err(|e| RemoteError::Setup(format!("CA certificate: {e}")))?;
            b = b.add_root_certificate(ca);
        }
        let http = b
            .build()
            .map_err(|e| RemoteError::Setup(format!("HTTP client: {e}")))?;
        Ok(RemoteTwin {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            auth: format!("Bearer {token}"),
            state: tokio::sync::Mutex::new(State::default()),
        })
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, Value)>,
    ) -> Result<Option<Value>, RemoteError> {
        let what = format!("{method} {path}");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .header("Accept", "application/json");
        if let Some((content_type, b)) = body {
            req = req.header("Content-Type", content_type).body(b.to_string());
        }
        let resp = req.send().await.map_err(|source| RemoteError::Transport {
            what: what.clone(),
            source,
        })?;
        let code = resp.status().as_u16();
        let text = resp.text().await.map_err(|source| RemoteError::Transport {
            what: what.clone(),
            source,
        })?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        match code {
            200..=299 => Ok(Some(v)),
            404 => Ok(None),
            _ => Err(RemoteError::Api {
                what,
                code,
                message: v
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            }),
        }
    }

    pub(super) async fn get(&self, path: &str) -> Result<Option<Value>, RemoteError> {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn patch(&self, path: &str, body: Value) -> Result<(), RemoteError> {
        match self
            .send(
                reqwest::Method::PATCH,
                path,
                Some(("application/merge-patch+json", body)),
            )
            .await?
        {
            Some(_) => Ok(()),
            // The node went away between the list and the write: the next sync forgets it.
            None => Ok(()),
        }
    }

    /// Reads the operator's objects and the nodes once, and writes what the GPU stack on each node
    /// would.
    pub async fn sync_once(&self) -> Result<SyncReport, RemoteError> {
        let seen = self.read_stack().await?;
        let mut st = self.state.lock().await;
        let restarts = st.restarts(seen.marker.clone(), seen.operand_markers.clone());
        let mut report = SyncReport {
            restarted: restarts.plugin,
            ..SyncReport::default()
        };
        let listed: Vec<String> = seen
            .nodes
            .iter()
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        st.nodes.retain(|n, _| listed.contains(n));
        for node in &seen.nodes {
            self.sync_node(&mut st, node, &seen, restarts, &mut report)
                .await?;
        }
        Ok(report)
    }

    /// What the GPU stack reads from the API: the ClusterPolicy, the ConfigMap it names, the
    /// operands' daemonsets, the pods and the nodes.
    async fn read_stack(&self) -> Result<Stack, RemoteError> {
        let cp = self
            .get(&format!(
                "/apis/nvidia.com/v1/clusterpolicies/{CLUSTER_POLICY}"
            ))
            .await?;
        let (current, marker, operand_markers) = match &cp {
            Some(_) => self.read_operands(cp.as_ref()).await?,
            None => self.read_chart_stack().await?,
        };
        let pods = self.get("/api/v1/pods").await?.unwrap_or(Value::Null);
        let nodes = self.get("/api/v1/nodes").await?.unwrap_or(Value::Null);
        // The ConfigMap the MIG manager reads, where the policy names one. (The configs a
        // generating manager writes per node are the store's alone, not written here.)
        let named = match twin::mig_config_name(cp.as_ref()) {
            Some(n) => {
                self.get(&format!("/api/v1/namespaces/{OPERATOR_NS}/configmaps/{n}"))
                    .await?
            }
            None => None,
        };
        Ok(Stack {
            current,
            mm: twin::mig_manager_policy(cp.as_ref(), named.as_ref()),
            marker,
            operand_markers,
            users: gpu_users(&pods),
            nodes: items(&nodes).to_vec(),
        })
    }

    /// The GPU operator's operands: what the device plugin reads (the ConfigMap the
    /// ClusterPolicy names, in the operator's namespace), its daemonset's pod template, and GFD's
    /// and the MPS daemon's.
    async fn read_operands(&self, cp: Option<&Value>) -> Result<StackReads, RemoteError> {
        let name = twin::config_name(cp).to_string();
        let cm = if name.is_empty() {
            None
        } else {
            self.get(&format!(
                "/api/v1/namespaces/{OPERATOR_NS}/configmaps/{name}"
            ))
            .await?
        };
        let ds_marker = |name: &'static str| async move {
            Ok::<_, RemoteError>(
                self.get(&format!(
                    "/apis/apps/v1/namespaces/{OPERATOR_NS}/daemonsets/{name}"
                ))
                .await?
                .as_ref()
                .map(twin::restart_marker),
            )
        };
        let marker = ds_marker(DEVICE_PLUGIN_DS).await?;
        let mut operand_markers = BTreeMap::new();
        for name in [GFD_DS, MPS_DS] {
            if let Some(m) = ds_marker(name).await? {
                operand_markers.insert(name.to_string(), m);
            }
        }
        Ok((
            twin::plugin_inputs(cp, cm.as_ref()),
            marker,
            operand_markers,
        ))
    }

    /// Without a ClusterPolicy, NVIDIA's standalone chart's daemonsets, wherever they run (the
    /// first of each role by namespace and name, as the store reads them): what the plugin's
    /// reads, its pod template, and GFD's and the MPS daemon's under the operator's names.
    async fn read_chart_stack(&self) -> Result<StackReads, RemoteError> {
        let all = self
            .get("/apis/apps/v1/daemonsets")
            .await?
            .unwrap_or(Value::Null);
        let mut plugin = None;
        let mut operand_markers = BTreeMap::new();
        for ds in items(&all) {
            let slot = match twin::chart_role(ds) {
                Some("plugin") => {
                    plugin = plugin.or(Some(ds));
                    continue;
                }
                Some("gfd") => GFD_DS,
                Some("mps") => MPS_DS,
                _ => continue,
            };
            operand_markers
                .entry(slot.to_string())
                .or_insert_with(|| twin::restart_marker(ds));
        }
        let Some(ds) = plugin else {
            return Ok((PluginInputs::default(), None, operand_markers));
        };
        let ns = ds
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let cm = match twin::chart_configmap(ds) {
            Some(n) => {
                self.get(&format!("/api/v1/namespaces/{ns}/configmaps/{n}"))
                    .await?
            }
            None => None,
        };
        Ok((
            twin::chart_inputs(ds, cm.as_ref()),
            Some(twin::restart_marker(ds)),
            operand_markers,
        ))
    }

    /// One node's turn of the GPU stack: the twin learns a new GPU node, its MIG manager may
    /// fail, and the labels, annotations and extended resources are written where they changed.
    async fn sync_node(
        &self,
        st: &mut State,
        node: &Value,
        seen: &Stack,
        restarted: Restarts,
        report: &mut SyncReport,
    ) -> Result<(), RemoteError> {
        let Some(name) = node.pointer("/metadata/name").and_then(Value::as_str) else {
            return Ok(());
        };
        let labels = labels_of(node);
        let annotations = string_map(node.pointer("/metadata/annotations"));
        let known = st.nodes.contains_key(name);
        if !known {
            let Some(mut t) = learn(node, &labels, &annotations) else {
                return Ok(());
            };
            // A device plugin pod starting on a node reads the config as it is now.
            t.loaded = seen.current.clone();
            st.nodes.insert(name.to_string(), t);
        }
        let Some(t) = st.nodes.get_mut(name) else {
            return Ok(());
        };
        report.gpu_nodes.push(name.to_string());
        // The MIG manager fails under pods that hold the GPUs (`twin::mig_fails`); a node
        // first seen now has no change of config to fail.
        let in_use = seen.users.get(name).filter(|u| !u.is_empty() && known);
        let failed_before = t.mig_refused.is_some();
        if twin::mig_fails(t, &labels, &seen.mm, in_use.is_some()) {
            if let (false, Some(u)) = (failed_before, in_use) {
                report.mig_failed.insert(name.to_string(), u.clone());
            }
            if labels.get(twin::MIG_STATE_LABEL).map(String::as_str) != Some("failed") {
                let patch = json!({"metadata": {"labels": {twin::MIG_STATE_LABEL: "failed"}}});
                self.patch(&format!("/api/v1/nodes/{name}"), patch).await?;
                report.written.push(name.to_string());
            }
            return Ok(());
        }
        let mut want = labels.clone();
        // Each operand's pods restart with its daemonset; on a node first seen they start.
        let restarts = Restarts {
            plugin: restarted.plugin || !known,
            gfd: restarted.gfd || !known,
            mps: restarted.mps || !known,
        };
        twin::restart_step(t, &mut want, &seen.mm, &seen.current, restarts);
        let r = twin::render(t, &want, &seen.mm);
        if let Err(e) = &r.resources {
            report.refused.insert(name.to_string(), e.clone());
        }
        let writes = node_writes(node, &labels, &annotations, t, &r);
        if !writes.meta.is_empty() {
            self.patch(
                &format!("/api/v1/nodes/{name}"),
                json!({"metadata": writes.meta}),
            )
            .await?;
        }
        if !writes.status.is_empty() {
            self.patch(
                &format!("/api/v1/nodes/{name}/status"),
                json!({"status": writes.status}),
            )
            .await?;
        }
        if !writes.meta.is_empty() || !writes.status.is_empty() {
            report.written.push(name.to_string());
        }
        Ok(())
    }

    /// One pass of the kubelet's, the node lifecycle controller's and the scheduler's parts (see
    /// the module's comment) over every node and pod; returns the objects written, as the node's
    /// name or the pod's `namespace/name`.
    pub async fn kubelet_once(&self) -> Result<Vec<String>, RemoteError> {
        let listed = self.get("/api/v1/nodes").await?.unwrap_or(Value::Null);
        let mut written = Vec::new();
        for node in items(&listed) {
            let name = node
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !ready(node) {
                let now = crate::dates::now_rfc3339_secs();
                let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                    "reason": "KubeletReady", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
                self.patch(&format!("/api/v1/nodes/{name}/status"), status)
                    .await?;
                written.push(name.to_string());
            }
            let taints = node
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let kept: Vec<&Value> = taints
                .iter()
                .filter(|t| t.get("key").and_then(Value::as_str) != Some(NOT_READY_TAINT))
                .collect();
            if kept.len() != taints.len() {
                self.patch(
                    &format!("/api/v1/nodes/{name}"),
                    json!({"spec": {"taints": kept}}),
                )
                .await?;
                written.push(name.to_string());
            }
        }
        let nodes: Vec<String> = items(&listed)
            .iter()
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let schedulable: Vec<&str> = items(&listed)
            .iter()
            .filter(|n| n.pointer("/spec/unschedulable") != Some(&Value::Bool(true)))
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        let pods = self.get("/api/v1/pods").await?.unwrap_or(Value::Null);
        self.give_back_devices(&pods).await;
        for pod in items(&pods) {
            let s = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
            let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
            let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
            let bound = s("/spec/nodeName");
            if bound.is_empty() {
                let pinned = pod
                    .pointer("/spec/nodeSelector/kubernetes.io~1hostname")
                    .and_then(Value::as_str)
                    .filter(|n| schedulable.contains(n))
                    .map(str::to_string);
                let Some(target) = daemon_pod_node(pod)
                    .filter(|n| nodes.contains(n))
                    .or(pinned)
                else {
                    continue;
                };
                let binding = json!({"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "namespace": ns},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": target}});
                self.write(reqwest::Method::POST, &format!("{path}/binding"), binding)
                    .await?;
            } else if !nodes.iter().any(|n| n == bound) {
                continue;
            } else if pod.pointer("/metadata/deletionTimestamp").is_some() {
                let uid = s("/metadata/uid");
                let opts = json!({"apiVersion": "v1", "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
                self.write(reqwest::Method::DELETE, &path, opts).await?;
            } else if matches!(
                pod.pointer("/status/phase").and_then(Value::as_str),
                None | Some("Pending")
            ) {
                let node = items(&listed)
                    .iter()
                    .find(|n| n.pointer("/metadata/name").and_then(Value::as_str) == Some(bound));
                let status = self.admit(bound, node, pod).await;
                self.patch(&format!("{path}/status"), json!({ "status": status }))
                    .await?;
            } else {
                continue;
            }
            written.push(format!("{ns}/{name}"));
        }
        Ok(written)
    }

    /// The kubelet's admission of a pod bound to `bound` (`remote_twin/admission.rs`).
    async fn admit(&self, bound: &str, node: Option<&Value>, pod: &Value) -> Value {
        let mut st = self.state.lock().await;
        admission::admit(st.nodes.get_mut(bound), bound, node, pod)
    }

    /// The devices of the pods that are gone or ended go back to their nodes.
    async fn give_back_devices(&self, pods: &Value) {
        admission::give_back(&mut self.state.lock().await.nodes, pods);
    }

    /// A POST or DELETE with a JSON body; a 404 or 409 (the pod went or moved meanwhile) is left
    /// to the next pass.
    pub(super) async fn write(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Result<(), RemoteError> {
        match self
            .send(method, path, Some(("application/json", body)))
            .await
        {
            Ok(_) | Err(RemoteError::Api { code: 409, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Syncs every `every` until `stop` resolves. A failed sync is reported on stderr and tried again
    /// at the next tick (the server may be restarting).
    pub async fn run(&self, every: Duration, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            if let Err(e) = self.sync_once().await {
                eprintln!("twin: {e}");
            }
            if let Err(e) = self.kubelet_once().await {
                eprintln!("twin: {e}");
            }
            match self.karpenter_once().await {
                Ok(r) => {
                    for l in r.launched {
                        eprintln!(
                            "twin: karpenter launched {} ({}) of nodepool {} for {} pod(s)",
                            l.node,
                            l.instance_type,
                            l.node_pool,
                            l.pods.len()
                        );
                    }
                }
                Err(e) => eprintln!("twin: {e}"),
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
}
