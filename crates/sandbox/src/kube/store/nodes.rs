//! The digital twin's side of the store: Node objects for the clouds' pools, named and labelled as
//! each cloud names them, and every node's advertisement brought up to date after a write, as the
//! GPU operator's device plugin would (see `kube/twin.rs` for what a node advertises and why).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{CLUSTER_POLICY, Cluster, OPERATOR_NS};
use crate::kube::kinds;
use crate::kube::meta::{labels_of, meta_mut};
use crate::kube::twin::{
    self, ERROR_ANNOTATION, NodeTwin, PluginInputs, READERS_ANNOTATION, Restarts,
};
use crate::kube::util;
use crate::kube::validate::validate_object;
use crate::nodes::{PoolNodes, gke_group_id};
use crate::util::fnv1a;

impl Cluster {
    /// The MIG manager as the ClusterPolicy sets it; none without the operator.
    pub(crate) fn mig_manager_policy(&self) -> twin::MigManager {
        let cp = self.get_ref(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY);
        let named =
            twin::mig_config_name(cp).and_then(|n| self.get_ref(kinds::CONFIGMAPS, OPERATOR_NS, n));
        twin::mig_manager_policy(cp, named)
    }

    /// Brings the nodes' advertisements up to date after a write: every node when the device plugin
    /// daemonset was restarted, else only the node that was written (its labels may select another config).
    /// ConfigMap and ClusterPolicy writes change no node by themselves: that is the operator's behaviour.
    /// A node written through the API that no pool made joins the twin once it carries GPU feature
    /// discovery's hardware labels (a hand-made node, as on a real server with no kubelet).
    pub(crate) fn reconcile(&mut self, written_node: Option<&str>) {
        if !self.controllers {
            return;
        }
        if let Some(n) = written_node.filter(|n| !self.twins.contains_key(*n)) {
            let adopted = self.get_ref(kinds::NODES, "", n).and_then(|node| {
                twin::twin_from_labels(
                    &self.cloud,
                    &labels_of(node),
                    node.pointer("/status/nodeInfo/osImage")
                        .and_then(Value::as_str),
                )
            });
            if let Some(mut t) = adopted {
                // The operands' pods start on the new node: they read the config as it is now.
                let current = self.current_inputs();
                let mut labels = self
                    .get_ref(kinds::NODES, "", n)
                    .map(labels_of)
                    .unwrap_or_default();
                twin::restart_step(
                    &mut t,
                    &mut labels,
                    &self.mig_manager_policy(),
                    &current,
                    Restarts::ALL,
                );
                self.twins.insert(n.to_string(), t);
            }
        }
        self.sync_operand_volumes();
        let restarts = self.operand_restarts();
        let restarted = restarts != Restarts::default();
        let current = self.current_inputs();
        let mm = self.mig_manager_policy();
        let users = self.gpu_user_nodes();
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
            let Some(mut node) = self.get_ref(kinds::NODES, "", &n).cloned() else {
                self.twins.remove(&n);
                continue;
            };
            let Some(t) = self.twins.get_mut(&n) else {
                continue;
            };
            let mut labels = labels_of(&node);
            if twin::mig_fails(t, &labels, &mm, users.contains(&n)) {
                if labels.get(twin::MIG_STATE_LABEL).map(String::as_str) != Some("failed") {
                    labels.insert(twin::MIG_STATE_LABEL.into(), "failed".into());
                    node["metadata"]["labels"] = json!(labels);
                    self.put_internal(kinds::NODES, "", &n, node);
                }
                continue;
            }
            let before = labels.clone();
            twin::restart_step(t, &mut labels, &mm, &current, restarts);
            if labels != before {
                node["metadata"]["labels"] = json!(labels);
            }
            let updated = render_node(&node, t, &mm);
            if updated != node {
                self.put_internal(kinds::NODES, "", &n, updated);
            }
        }
        self.sync_generated_mig_configs(&mm);
        // The daemonset controller: the rollouts complete at once.
        self.operand_status();
        self.kubelets();
    }

    /// The MIG managers' own configs (`<node>-mig-config`, see `twin::mig_configs`): written for
    /// each MIG-capable node while the manager runs and generates, removed with the node (the
    /// real ones belong to the manager's pod) or when the policy names a ConfigMap again.
    fn sync_generated_mig_configs(&mut self, mm: &twin::MigManager) {
        let generating = mm.enabled && mm.configs == twin::MigConfigs::Generated;
        let want: BTreeMap<String, String> = self
            .twins
            .iter()
            .filter(|_| generating)
            .filter(|(_, t)| !t.host_device_plugin && twin::mig_capable(t))
            .filter_map(|(n, t)| {
                let text = twin::generated_mig_config(t.gpu_product.as_deref()?, t.gpu_memory_mib)?;
                Some((format!("{n}-mig-config"), text))
            })
            .collect();
        let stale: Vec<String> = self
            .objects
            .get(&kinds::CONFIGMAPS.qualified())
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|cm| {
                cm.pointer("/metadata/labels/app.kubernetes.io~1component")
                    == Some(&json!("nvidia-mig-manager"))
            })
            .filter_map(|cm| cm.pointer("/metadata/name")?.as_str().map(str::to_string))
            .filter(|n| !want.contains_key(n))
            .collect();
        for n in stale {
            self.unstore(&kinds::CONFIGMAPS.qualified(), OPERATOR_NS, &n);
        }
        for (name, text) in want {
            let node = name.trim_end_matches("-mig-config").to_string();
            let data = json!({"config.yaml": text});
            let now = self.get_ref(kinds::CONFIGMAPS, OPERATOR_NS, &name);
            if now.map(|c| &c["data"]) == Some(&data) {
                continue;
            }
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": name, "namespace": OPERATOR_NS, "uid": util::uuid4(),
                "creationTimestamp": crate::dates::now_rfc3339_secs(),
                "labels": {"app.kubernetes.io/component": "nvidia-mig-manager",
                           "nvidia.com/node-name": node}},
                "data": data});
            self.put_internal(kinds::CONFIGMAPS, OPERATOR_NS, &name, cm);
        }
    }

    /// Creates, updates or removes the Node objects of one pool.
    pub(crate) fn pool_changed(&mut self, p: &PoolNodes) {
        let names: Vec<String> = if p.instances.is_empty() {
            node_names(p.cloud, &p.cluster, &p.pool, p.node_count, &p.zones)
        } else {
            p.instances.iter().map(|(n, _)| n.clone()).collect()
        };
        let stale: Vec<String> = self
            .twins
            .iter()
            .filter(|(n, t)| t.pool == p.pool && !names.contains(n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            self.twins.remove(&n);
            self.registration_errors.remove(&n);
            self.unstore("nodes", "", &n);
        }
        let current = self.current_inputs();
        let mm = self.mig_manager_policy();
        for (i, n) in names.iter().enumerate() {
            let old_twin = self.twins.get(n).cloned();
            let mut t = pool_twin(p, &current, old_twin.as_ref());
            let mut node = match self.get_ref(kinds::NODES, "", n) {
                Some(existing) => existing.clone(),
                None => new_node(p, n, i),
            };
            let mut labels = pool_node_labels(p, n, i, &node, old_twin.as_ref(), &t);
            // The operands' pods start on a new node.
            let fresh = if old_twin.is_none() {
                Restarts::ALL
            } else {
                Restarts::default()
            };
            twin::restart_step(&mut t, &mut labels, &mm, &current, fresh);
            node["metadata"]["labels"] = json!(labels);
            set_machine(p, &mut node);
            self.twins.insert(n.clone(), t);
            let t = &self.twins[n];
            let rendered = render_node(&node, t, &mm);
            self.register(n, rendered);
        }
        self.reconcile(None);
    }

    /// The kubelet registers its node, and the cloud changes it, through the API server, which
    /// validates the object like any other write: a node it refuses (e.g. two taints with one
    /// key and effect) never appears, and a refused change leaves the node as it was.
    fn register(&mut self, n: &str, rendered: Value) {
        let old = self.get_ref(kinds::NODES, "", n).cloned();
        if old.as_ref() == Some(&rendered) {
            return;
        }
        match validate_object(kinds::NODES, &rendered, old.as_ref()) {
            Ok(()) => {
                self.registration_errors.remove(n);
                self.put_internal(kinds::NODES, "", n, rendered);
            }
            Err(e) => {
                self.registration_errors.insert(n.to_string(), e.message);
            }
        }
    }

    pub(crate) fn pool_deleted(&mut self, pool: &str) {
        let gone: Vec<String> = self
            .twins
            .iter()
            .filter(|(_, t)| t.pool == pool)
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.twins.remove(&n);
            self.registration_errors.remove(&n);
            self.unstore("nodes", "", &n);
        }
    }
}

/// A pool's node as the twin sees it: the pool's hardware, with what the pods on an existing node
/// (`old`) loaded kept, and a new node's pods starting from the config as it is now (`current`).
fn pool_twin(p: &PoolNodes, current: &PluginInputs, old: Option<&NodeTwin>) -> NodeTwin {
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
        mig_refused: None,
        host_device_plugin: twin::host_device_plugin(os_name(p)),
        user_data: p.os_image.as_ref().and_then(|o| o.user_data.clone()),
        mig_capable: None,
        readers: Default::default(),
        held: Default::default(),
    };
    if let Some(o) = old {
        // The pods on an existing node keep what they loaded, and the devices they hold.
        t.loaded = o.loaded.clone();
        t.seen_mig_label = o.seen_mig_label.clone();
        t.readers = o.readers.clone();
        t.held = o.held.clone();
    }
    t
}

/// The labels of the pool's `i`th node `n`: those added through the API kept, the pool's previous
/// labels replaced by its labels now, the kubelet's and the cloud's added where missing.
fn pool_node_labels(
    p: &PoolNodes,
    n: &str,
    i: usize,
    node: &Value,
    old_twin: Option<&NodeTwin>,
    t: &NodeTwin,
) -> BTreeMap<String, String> {
    let mut labels = labels_of(node);
    if let Some(o) = old_twin {
        for k in o.pool_labels.keys() {
            labels.remove(k);
        }
    }
    for (k, v) in standard_labels(p, n, p.zones.get(i).map(String::as_str)) {
        labels.entry(k).or_insert(v);
    }
    if p.cloud == "gke" {
        for (k, v) in twin::gke_labels(t) {
            labels.entry(k).or_insert(v);
        }
    }
    labels.extend(p.labels.clone());
    labels
}

/// What the cloud's machine says of itself on its node: its image and the pool's taints.
fn set_machine(p: &PoolNodes, node: &mut Value) {
    // A new image (an AKS OS SKU migration reimages the nodes) shows in nodeInfo.
    node["status"]["nodeInfo"]["osImage"] = json!(os_image(p));
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
}

/// Writes the advertisement into a node (or, when the plugin refused its config, only notes why).
pub(super) fn render_node(node: &Value, t: &NodeTwin, mm: &twin::MigManager) -> Value {
    let mut node = node.clone();
    let r = twin::render(t, &labels_of(&node), mm);
    let mut annotations: BTreeMap<String, String> = node
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    match &r.resources {
        Ok(resources) => {
            annotations.remove(ERROR_ANNOTATION);
            for f in ["capacity", "allocatable"] {
                let mut m: Map<String, Value> = node
                    .pointer(&format!("/status/{f}"))
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                m.retain(|k, _| !k.starts_with("nvidia.com/"));
                for (r, n) in resources {
                    m.insert(r.clone(), json!(n.to_string()));
                }
                node["status"][f] = Value::Object(m);
            }
        }
        Err(e) => {
            // The plugin's process is gone: the kubelet reports its resources as none.
            annotations.insert(ERROR_ANNOTATION.into(), e.clone());
            for f in ["capacity", "allocatable"] {
                if let Some(m) = node
                    .pointer_mut(&format!("/status/{f}"))
                    .and_then(Value::as_object_mut)
                {
                    for (k, v) in m.iter_mut() {
                        if k.starts_with("nvidia.com/") {
                            *v = json!("0");
                        }
                    }
                }
            }
        }
    }
    if t.gpus > 0 && t.cloud != "gke" && !t.host_device_plugin {
        annotations.insert(
            READERS_ANNOTATION.into(),
            twin::readers_summary(t).to_string(),
        );
    }
    node["metadata"]["labels"] = json!(r.labels);
    if annotations.is_empty() {
        meta_mut(&mut node).remove("annotations");
    } else {
        node["metadata"]["annotations"] = json!(annotations);
    }
    node
}

/// Node names as each cloud makes them, stable for a given cluster, pool and index. A GKE node's
/// name carries the id of its zone's instance group (`zones`: the zone of each node, when known).
pub(super) fn node_names(
    cloud: &str,
    cluster: &str,
    pool: &str,
    count: u32,
    zones: &[String],
) -> Vec<String> {
    let h = fnv1a(&format!("{cloud}/{cluster}/{pool}"));
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
                let suffix = base36(fnv1a(&format!("{h}/{i}")) % 36u64.pow(4), 4);
                let group = match zones.get(i as usize) {
                    Some(z) => gke_group_id(cluster, pool, z),
                    None => format!("{:08x}", h as u32),
                };
                format!("gke-{c}-{p}-{group}-{suffix}")
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

pub(super) fn base36(mut n: u64, width: usize) -> String {
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

/// The labels every node gets from its kubelet and cloud, with its zone's topology labels (the
/// well-known `topology.kubernetes.io/zone` and `/region`) when the zone is known.
pub(super) fn standard_labels(
    p: &PoolNodes,
    name: &str,
    zone: Option<&str>,
) -> BTreeMap<String, String> {
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
    if let Some(z) = zone {
        l.insert("topology.kubernetes.io/zone".into(), z.to_string());
        let region = z.rsplit_once('-').map_or(z, |(r, _)| r);
        l.insert("topology.kubernetes.io/region".into(), region.to_string());
    }
    if p.gpu_product.is_some() && p.cloud != "gke" {
        l.insert("nvidia.com/gpu.deploy.device-plugin".into(), "true".into());
    }
    l
}

/// The node's `status.nodeInfo.osImage`.
fn os_image(p: &PoolNodes) -> &str {
    os_name(p).unwrap_or("Ubuntu 22.04.5 LTS")
}

fn os_name(p: &PoolNodes) -> Option<&str> {
    p.os_image.as_ref().map(|o| o.name.as_str())
}

pub(super) fn new_node(p: &PoolNodes, name: &str, index: usize) -> Value {
    let h = fnv1a(name);
    let ip = format!("10.{}.{}.{}", h % 200 + 10, (h >> 8) % 250, index % 250 + 4);
    let provider_id = match p.cloud {
        _ if index < p.instances.len() => p.instances[index].1.clone(),
        "aks" => format!(
            "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_sandbox/providers/Microsoft.Compute/virtualMachineScaleSets/aks-{}-vmss/virtualMachines/{index}",
            p.pool
        ),
        "gke" => format!(
            "gce://sandbox-project/{}/{name}",
            p.zones.get(index).map_or("us-central1-a", String::as_str)
        ),
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
                "containerRuntimeVersion": "containerd://1.7.27", "osImage": os_image(p), "kernelVersion": "5.15.0-1079",
                "machineID": format!("{h:032x}"), "systemUUID": util::uuid4(), "bootID": util::uuid4()},
        },
    })
}
