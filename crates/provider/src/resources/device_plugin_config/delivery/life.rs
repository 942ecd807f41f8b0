//! The one trait every delivery implements, [`Lifecycle`]: what it is before there is a value of
//! it (its name, its block, what a plan can know from it), then its life from plan to destroy:
//! check, write, read back what the consumer really reads, give back what was there. Beside it,
//! what the handlers hand a delivery ([`At`], [`Writing`]) and get back ([`Reload`],
//! [`ClusterView`]). A delivery is a file of its own beside this one, listed in the folder's
//! registry; the handlers never name one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tfplugin::object::DecodeError;
use tfplugin::schema::Block;
use tfplugin::{Diagnostics, Value};

use super::super::desired::Desired;
use super::found::Found;
use super::takeover::Takeover;
use super::values::DEFAULT_VALUES_PATH;
use crate::cluster::{Cluster, KubeError, KubernetesSettings};

/// What the registry knows of a delivery before there is a value of it.
pub(crate) struct About {
    /// The value of `delivery` that picks it, which is also the name of its block.
    pub name: &'static str,
    /// How the `delivery` attribute's description lists it, e.g. "`helm` (upgrade the
    /// operator's release)".
    pub summary: &'static str,
    /// Its block of settings; None for a delivery that takes none.
    pub block: Option<BlockAbout>,
}

/// A delivery's block: its schema, and how a diagnostic asks for it when it is missing
/// ("there is no `helm` block naming the release; add `helm { ... }`").
pub(crate) struct BlockAbout {
    pub schema: fn() -> Block,
    /// What the block names: "the release".
    pub names: &'static str,
    /// A block to add: `helm { release = ..., namespace = ..., chart = ... }`.
    pub example: &'static str,
    /// How an import ID names the object and the ConfigMap after the `<delivery>:` prefix:
    /// `<namespace>/<release>/<configmap>`.
    pub import_id: &'static str,
}

/// Where the plan puts the ConfigMap when `namespace` is not set.
pub(crate) enum Placement {
    /// The operator's usual namespace, `gpu-operator`.
    Default,
    /// The namespace the settings name (a Helm release's, where its chart renders the ConfigMap).
    In(String),
    /// Only the cluster knows (the namespace a GitOps object installs the chart into): unknown
    /// until the apply reads it, then kept.
    AtApply,
}

/// What a write or a restore leaves to do for the device plugin.
pub(crate) enum Reload {
    /// Restart the daemonsets that read the config, in this namespace: they load it only when
    /// they start.
    Restart(String),
    /// Nothing: a controller renders the configs on its own sync, after this resource is done,
    /// so a restart now would load the old ones.
    OnSync,
}

/// What a step of a delivery works with.
pub(crate) struct At<'a> {
    pub cluster: &'a Cluster,
    pub desired: &'a Desired,
    /// How to reach the cluster (the resource's `kubernetes` block, else the provider's), for a
    /// process of its own such as helm, which must reach the very cluster `cluster` reads.
    pub kubernetes: KubernetesSettings,
}

/// The bounds of one write: when the operation must be done (its `timeouts` entry), so that helm
/// is told to stop before it, and whether anything of the resource is in the cluster yet.
pub(crate) struct Writing {
    pub deadline: Instant,
    pub limit: Duration,
    /// Whether this is the resource's first write (a create): only then is what the cluster
    /// holds someone else's, to be recorded and given back on destroy.
    pub first: bool,
    /// Set once something of this resource is in the cluster, even when a later step fails, so
    /// that a create keeps it in state.
    pub wrote: bool,
    /// Where the chart installs the operator, as a GitOps object said when written.
    pub operator_namespace: Option<String>,
    /// The `--timeout` helm was last given.
    pub helm_given: Duration,
}

impl Writing {
    pub(crate) fn new(limit: Duration, first: bool) -> Writing {
        Writing {
            deadline: Instant::now() + limit,
            limit,
            first,
            wrote: false,
            operator_namespace: None,
            helm_given: Duration::ZERO,
        }
    }

    /// What helm may take: the time left, less a margin before the operation's own deadline
    /// for what follows helm's timeout: helm recording the release as failed, then the provider
    /// finding the hook that did not finish and saying so. A tenth of the time left, between 10 s
    /// (5 s proved too little for helm 3 on a loaded 2-core machine, and the user then read a bare
    /// "timed out" instead of the hook's name) and a minute.
    pub(crate) fn helm_timeout(&mut self) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let margin = (left / 10).clamp(Duration::from_secs(10), Duration::from_secs(60));
        self.helm_given = left.saturating_sub(margin).max(Duration::from_secs(1));
        self.helm_given
    }
}

/// What the cluster says about a delivery, as the consumer reads it.
#[derive(Default)]
pub(crate) struct ClusterView {
    /// The ConfigMap the operator is pointed at.
    pub pointer_name: Option<String>,
    pub default: Option<String>,
    pub mig_strategy: Option<String>,
    /// Whether our field manager owns the strategy (import keeps it then).
    pub mig_strategy_ours: bool,
    /// The ConfigMap's data; None when it (or the release) is gone.
    pub data: Option<BTreeMap<String, String>>,
    /// Where the operator runs its operands (ClusterPolicy `status.namespace`), or where a
    /// GitOps object installs the chart.
    pub operator_namespace: Option<String>,
}

/// A way of delivering the configs, implemented by its settings (a variant of `Delivery`).
#[async_trait]
pub(crate) trait Lifecycle: Send + Sync {
    /// Its name, its block and how the schema lists it.
    fn about() -> About
    where
        Self: Sized;

    /// Where the plan puts the ConfigMap, from the configuration (`config`, the whole object)
    /// read as little as it takes: the rest may be unknown yet.
    fn placement(config: &Value) -> Result<Placement, DecodeError>
    where
        Self: Sized;

    /// Its settings as an import ID names them (`helm:<namespace>/<release>/<configmap>`): the
    /// object it writes, by namespace and name. What the cluster does not keep (a chart's source,
    /// the helm executable) stays empty until the configuration sets it. A delivery without a
    /// block ignores both.
    fn imported(namespace: &str, object: &str) -> Self
    where
        Self: Sized;

    /// The object an import ID names for these settings, as `(namespace, name)`; None for a
    /// delivery without a block (its ID is the ConfigMap's alone).
    fn import_object(&self) -> Option<(String, String)> {
        None
    }

    /// The configs this delivery writes on the cluster, as its objects show them (see `found`):
    /// what `terraform query` lists and an import by identity takes its delivery from. None
    /// by default.
    async fn discover(c: &Cluster) -> Result<Vec<Found>, KubeError>
    where
        Self: Sized,
    {
        let _ = c;
        Ok(Vec::new())
    }

    /// Plan-time checks of what this delivery does with the configs (false after an error).
    fn check(&self, desired: &Desired, diags: &mut Diagnostics) -> bool {
        let _ = (desired, diags);
        true
    }

    /// The operator chart's values the `helm_values` attribute shows.
    fn chart_values(&self, desired: &Desired) -> serde_json::Value {
        desired.helm_values(DEFAULT_VALUES_PATH)
    }

    /// Whether the configs it writes are read through the GPU operator's ClusterPolicy (not on a
    /// cluster whose operator runs the DRA-based stack, a GPUCluster, instead).
    fn through_operator(&self) -> bool {
        true
    }

    /// Whether it writes the ConfigMap itself: a create then refuses to adopt one someone else
    /// made, and after a failed or cut-short first write the ConfigMap tells whether anything was
    /// written. Otherwise a process of its own renders it (helm, a GitOps controller), which may
    /// go on after the provider stops.
    fn own_configmap(&self) -> bool {
        false
    }

    /// Writes the configs. What was there before is recorded first, in the delivery's own record
    /// (`taken.open::<R>()`), which stays recorded when the write is cut short. None after an
    /// error diagnostic.
    async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload>;

    /// The device plugin release the cluster runs for these configs, as `(version, where it was
    /// read)`; None where nothing says (a digest, no ClusterPolicy, a read that failed: the
    /// provider then claims nothing). Through the operator: its ClusterPolicy's.
    async fn plugin_version(&self, at: &At<'_>) -> Option<(String, String)> {
        let version = at.cluster.cluster_policy().await.ok()?.plugin_version?;
        Some((
            version,
            format!(
                "ClusterPolicy {} spec.devicePlugin.version",
                crate::cluster::CLUSTER_POLICY
            ),
        ))
    }

    /// Reads what it delivers, to prove credentials before they are saved.
    async fn prove_access(&self, at: &At<'_>) -> Result<(), KubeError> {
        let d = at.desired;
        at.cluster
            .configmap(&d.namespace, &d.name)
            .await
            .map(|_| ())
    }

    /// What the consumer really reads, for drift; `declared` are the config names the
    /// configuration gives. None after an error diagnostic.
    async fn read_back(
        &self,
        at: &At<'_>,
        declared: &[String],
        diags: &mut Diagnostics,
    ) -> Option<ClusterView>;

    /// Destroy: gives back what was there before this resource (`taken`), or the chart's
    /// defaults where there is no record. None after an error diagnostic.
    async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload>;
}
