//! How a sandbox starts: the operation time, the state file, the node sink, the clusters of a new
//! world and the answers' latency, plus the fixed identities (subscription, AWS account) the
//! emulators put in what they answer. Every other part reads it, and it reads none of them but the
//! node sink's trait.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::nodes::NodeSink;

/// How a sandbox starts.
#[derive(Clone)]
pub struct Config {
    /// How long every create/update/delete operation takes before it settles. Default 2 s; zero allowed.
    pub op_time: Duration,
    /// Where the world is persisted (atomic writes) and restored from on start.
    pub state_file: Option<PathBuf>,
    /// Told about every pool that reaches a terminal state or is deleted.
    pub node_sink: Option<Arc<dyn NodeSink>>,
    /// Clusters of the world when no state file exists yet.
    pub clusters: Vec<ClusterSpec>,
    /// Added before every cloud and Kubernetes API answer (not the `/_sandbox` control plane), as
    /// the round trip of a real cloud: ARM, GKE and EKS answer a GET in tens to hundreds of
    /// milliseconds. Default zero.
    pub latency: Latency,
    /// Whether each cluster starts with the GPU operator installed (its namespace, ClusterPolicy
    /// CRD, `cluster-policy` and device plugin daemonset, as the provider's deliveries find them).
    /// Without it a cluster is as a cloud makes it, for installing the operator's chart (or the
    /// standalone device plugin's) by hand with helm. Default true.
    pub gpu_operator: bool,
    /// How long the twin's cluster-autoscalers wait for more pods before a scale-up. Default
    /// upstream's [`PodBuffers::UPSTREAM`].
    pub pod_buffers: PodBuffers,
    /// Whether the twin's cluster-autoscalers run (`autoscaler/`). Off, a real cluster-autoscaler
    /// pointed at the sandbox's cloud APIs sizes the pools alone. Default true.
    pub autoscalers: bool,
}

/// How long the twin's cluster-autoscalers wait for more pods before they grow a pool, as
/// upstream's loop does (kubernetes/autoscaler cluster-autoscaler/core/static_autoscaler.go,
/// `allPodsAreNew` with `unschedulablePodTimeBuffer` and `unschedulablePodWithGpuTimeBuffer`): no
/// scale-up while the oldest of the pods that need a new node is younger than `new_pods`, or
/// while the oldest of them that requests `nvidia.com/gpu` (utils/gpu `PodRequestsGpu`: that name
/// only, so not a renamed shared resource) is younger than `new_gpu_pods`. Pods created one by
/// one within the buffer are so decided together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodBuffers {
    pub new_pods: Duration,
    pub new_gpu_pods: Duration,
}

impl PodBuffers {
    /// cluster-autoscaler's own: 2 s, and 30 s for pods that request `nvidia.com/gpu`.
    pub const UPSTREAM: PodBuffers = PodBuffers {
        new_pods: Duration::from_secs(2),
        new_gpu_pods: Duration::from_secs(30),
    };
    /// No wait: pending pods are acted on as soon as they are created.
    pub const NONE: PodBuffers = PodBuffers {
        new_pods: Duration::ZERO,
        new_gpu_pods: Duration::ZERO,
    };
}

/// A delay added to every answer: `base` plus a uniform draw in `0..=jitter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub base: Duration,
    pub jitter: Duration,
}

impl Latency {
    pub fn is_zero(&self) -> bool {
        self.base.is_zero() && self.jitter.is_zero()
    }

    /// One request's delay.
    pub(crate) fn draw(&self) -> Duration {
        let jitter = self.jitter.as_micros() as u64;
        let extra = if jitter == 0 {
            0
        } else {
            fastrand::u64(0..=jitter)
        };
        self.base + Duration::from_micros(extra)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            op_time: Duration::from_secs(2),
            state_file: None,
            node_sink: None,
            clusters: ClusterSpec::defaults(),
            latency: Latency::default(),
            gpu_operator: true,
            pod_buffers: PodBuffers::UPSTREAM,
            autoscalers: true,
        }
    }
}

impl Config {
    /// A config whose operations settle at once and whose autoscalers act at once, for fast
    /// tests.
    pub fn instant() -> Self {
        Config {
            op_time: Duration::ZERO,
            pod_buffers: PodBuffers::NONE,
            ..Config::default()
        }
    }
}

/// A cluster of the world. Node pools live inside clusters; clusters themselves are fixed.
/// In a `--clusters` file: `[{"cloud": "aks", "resource_group": "rg", "name": "c"},
/// {"cloud": "gke", "project": "p", "location": "europe-west4", "name": "c"},
/// {"cloud": "eks", "region": "eu-west-1", "name": "c"}]` (AKS subscription and location default to
/// the sandbox subscription and eastus). A GKE location that is a region makes a regional cluster
/// in three zones (`<region>-a`, `-b`, `-c`), one that is a zone a zonal cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cloud", rename_all = "lowercase")]
pub enum ClusterSpec {
    Aks {
        subscription: String,
        resource_group: String,
        name: String,
        location: String,
    },
    Gke {
        project: String,
        location: String,
        name: String,
    },
    Eks {
        region: String,
        name: String,
        /// The cluster's "Managed node groups per cluster" quota (L-6D54EA21) when it has been
        /// raised through Service Quotas; 30, EKS's default, when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodegroup_quota: Option<usize>,
    },
}

impl ClusterSpec {
    /// The default world of the README and the acceptance tests.
    pub fn defaults() -> Vec<ClusterSpec> {
        vec![
            ClusterSpec::Aks {
                subscription: DEFAULT_SUBSCRIPTION.into(),
                resource_group: "sandbox-rg".into(),
                name: "sandbox-aks".into(),
                location: "eastus".into(),
            },
            ClusterSpec::Gke {
                project: "sandbox-project".into(),
                location: "us-central1".into(),
                name: "sandbox-gke".into(),
            },
            ClusterSpec::Eks {
                region: "us-east-1".into(),
                name: "sandbox-eks".into(),
                nodegroup_quota: None,
            },
        ]
    }

    /// The default world with the EKS cluster's node group quota raised to `quota`, as Service
    /// Quotas allows, for worlds of more node groups than EKS's default of 30.
    pub fn defaults_with_nodegroup_quota(quota: usize) -> Vec<ClusterSpec> {
        let mut clusters = ClusterSpec::defaults();
        for c in &mut clusters {
            if let ClusterSpec::Eks {
                nodegroup_quota, ..
            } = c
            {
                *nodegroup_quota = Some(quota);
            }
        }
        clusters
    }
}

pub const DEFAULT_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
/// The fake AWS account id of every ARN the sandbox makes.
pub(crate) const AWS_ACCOUNT: &str = "123456789012";
