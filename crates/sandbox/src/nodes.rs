//! The hand-off from the cloud emulators to the Kubernetes twin: when a pool reaches a terminal state
//! or disappears, the sandbox describes the nodes the cloud would have created and tells a `NodeSink`.
//! The sandbox itself never creates Node objects; the Kubernetes emulator does, from these calls.
//!
//! Wiring: `Sandbox::open(Config { node_sink: Some(Arc::new(twin)), .. })` and serve
//! `sandbox.router_with(kube_router)`. Calls arrive after the world's lock is released, once per
//! settled create/update (`pool_changed`, an upsert: replace the pool's nodes) and per finished delete
//! (`pool_deleted`); failed operations call nothing. A world restored from `--state` replays
//! `pool_changed` for every pool that has nodes, so an in-memory twin is rebuilt on start.
//!
//! The Kubernetes rules the clouds apply to what they hand over (label syntax, taint effects) live
//! here too, so that AKS, GKE and EKS validate labels and taints alike.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// A pool's nodes as the cloud creates them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolNodes {
    /// "aks" | "gke" | "eks"
    pub cloud: &'static str,
    pub cluster: String,
    pub pool: String,
    /// The nodes the pool runs: the node count, or the autoscaling minimum. AKS and EKS pools scaled
    /// to zero have none (GKE's pools still get one, so the twin has a node to inspect).
    pub node_count: u32,
    /// The zone of each node, in order (GKE, whose pools span zones; EKS, the zone of each
    /// instance); empty where zones are not modelled.
    pub zones: Vec<String>,
    /// Each node's name and `spec.providerID`, in order, where the cloud's instances have
    /// identities of their own (EKS: the Auto Scaling group's instances, which cluster-autoscaler
    /// matches to Nodes by provider ID); empty where they are derived from the pool and index.
    pub instances: Vec<(String, String)>,
    /// Labels as the cloud sets them on nodes, plus the pool's own labels.
    pub labels: BTreeMap<String, String>,
    /// (key, value, Kubernetes effect NoSchedule | PreferNoSchedule | NoExecute)
    pub taints: Vec<(String, String, String)>,
    /// `nvidia.com/gpu.product` as GPU feature discovery reports it, e.g. NVIDIA-A100-SXM4-80GB.
    pub gpu_product: Option<String>,
    pub gpus_per_node: u32,
    pub gpu_memory_mib: u64,
    /// MIG profile the cloud partitions every GPU into (AKS gpuInstanceProfile, GKE gpuPartitionSize), e.g. 1g.10gb.
    pub mig_profile: Option<String>,
    pub mig_instances_per_gpu: u32,
    /// GKE's own GPU sharing: (TIME_SHARING | MPS, max shared clients per GPU).
    pub gke_sharing: Option<(String, u32)>,
    /// The node's OS when the node image says more than the default Ubuntu does, e.g. an EKS
    /// node group's AMI family. Bottlerocket's NVIDIA variants run the device plugin as a host
    /// service configured from the OS's settings (see the twin), so what runs on a node depends
    /// on it.
    pub os_image: Option<OsImage>,
}

/// The OS a pool's nodes boot: the image as `status.nodeInfo.osImage` names it, and the user data
/// the instances boot with (decoded), which an OS that takes its settings from there reads
/// (Bottlerocket: TOML `settings.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsImage {
    pub name: String,
    pub user_data: Option<String>,
}

impl From<&str> for OsImage {
    fn from(name: &str) -> OsImage {
        OsImage {
            name: name.to_string(),
            user_data: None,
        }
    }
}

impl From<String> for OsImage {
    fn from(name: String) -> OsImage {
        OsImage {
            name,
            user_data: None,
        }
    }
}

pub trait NodeSink: Send + Sync {
    fn pool_changed(&self, nodes: &PoolNodes);
    fn pool_deleted(&self, cloud: &str, cluster: &str, pool: &str);
    /// What a cluster's autoscaler sees in its Kubernetes API: pods waiting for a node and the room
    /// left on the nodes there are. None when the sink has no Kubernetes API of the cluster (the
    /// twin's cluster-autoscaler then does nothing for it). Called with the cloud world locked, so
    /// an implementation must not call back into the sandbox.
    fn demand(&self, _cloud: &str, _cluster: &str) -> Option<ClusterDemand> {
        None
    }
}

/// The other way across the hand-off: what the twin's cluster-autoscaler reads from a cluster's
/// Kubernetes API (`autoscaler/`), as plain values so that it needs nothing of the API server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterDemand {
    /// Pods with no node (`spec.nodeName` unset), oldest first.
    pub pending: Vec<PendingPod>,
    pub nodes: Vec<NodeRoom>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingPod {
    /// `namespace/name`
    pub name: String,
    /// Extended resources the pod asks for (each container's requests, its limits where it has no
    /// request, as the API server defaults them), summed over its containers.
    pub requests: BTreeMap<String, u64>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    /// Its `creationTimestamp`, in ms since the epoch (whole seconds, as the API writes it).
    pub created_ms: u64,
}

/// A pod's toleration (core/v1 Toleration): an empty key with `Exists` tolerates every taint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Toleration {
    pub key: String,
    /// `Equal` (the default) or `Exists`
    pub operator: String,
    pub value: String,
    /// Empty: every effect.
    pub effect: String,
}

/// A registered node: its pool (when a cloud's pool made it), labels, taints, and the extended
/// resources still free (allocatable minus what the pods bound to it ask for).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeRoom {
    pub name: String,
    pub pool: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<(String, String, String)>,
    pub free: BTreeMap<String, u64>,
    pub unschedulable: bool,
}

/// What happened to a pool, collected while the world is locked and delivered after it is released
/// (a sink may call back into the sandbox).
// A handful of events per settled operation, moved once each: boxing the pool's nodes would buy
// nothing and change the variant clients match on.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    Changed(PoolNodes),
    Deleted {
        cloud: &'static str,
        cluster: String,
        pool: String,
    },
}

/// A sink that records every call, for tests.
#[derive(Default)]
pub struct RecordingSink {
    pub events: Mutex<Vec<NodeEvent>>,
}

impl RecordingSink {
    pub fn take(&self) -> Vec<NodeEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl NodeSink for RecordingSink {
    fn pool_changed(&self, nodes: &PoolNodes) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(NodeEvent::Changed(nodes.clone()));
    }
    fn pool_deleted(&self, cloud: &str, cluster: &str, pool: &str) {
        let cloud = match cloud {
            "aks" => "aks",
            "gke" => "gke",
            _ => "eks",
        };
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(NodeEvent::Deleted {
                cloud,
                cluster: cluster.to_string(),
                pool: pool.to_string(),
            });
    }
}

/// The id GKE puts in the names of a pool's instance group in a zone and of the nodes it makes
/// (`gke-<cluster>-<pool>-<id>-grp`, `gke-<cluster>-<pool>-<id>-<suffix>`), shared by the GKE
/// emulator and the Kubernetes twin so that the names agree.
pub(crate) fn gke_group_id(cluster: &str, pool: &str, zone: &str) -> String {
    format!(
        "{:08x}",
        crate::util::fnv1a(&format!("{cluster}/{pool}/{zone}")) as u32
    )
}

/// Kubernetes taint effect from the GKE/EKS enum spelling.
pub(crate) fn k8s_effect(cloud_effect: &str) -> &'static str {
    match cloud_effect {
        "NO_EXECUTE" | "NoExecute" => "NoExecute",
        "PREFER_NO_SCHEDULE" | "PreferNoSchedule" => "PreferNoSchedule",
        _ => "NoSchedule",
    }
}

/// Kubernetes qualified name: optional DNS-subdomain prefix and a 1-63 character name.
pub(crate) fn valid_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix
        && (p.is_empty()
            || p.len() > 253
            || !p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }))
    {
        return false;
    }
    !name.is_empty() && valid_label_value(name)
}

pub(crate) fn valid_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}
