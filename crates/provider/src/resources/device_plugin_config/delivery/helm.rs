//! Delivery `helm`: the GPU operator's own Helm release is upgraded with this resource's device
//! plugin values under `values_path` (its chart then renders the ConfigMap and the ClusterPolicy
//! pointer), and what the operator really reads afterwards is checked and read back as drift.
//! The release work itself (deployed revision, upgrade, giving values back) is `release`'s.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tfplugin::object::DecodeError;
use tfplugin::schema::Block;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::super::desired::Desired;
use super::super::diagnostics::{kube_diagnostic, quoted, warn_operator_mismatch};
use super::found::{Found, none_if_missing};
use super::life::{About, At, BlockAbout, ClusterView, Lifecycle, Placement, Reload, Writing};
use super::operator::operator_reads;
use super::release::{ReleaseBlock, helm_path_attribute, release_attributes, release_placement};
use super::takeover::Takeover;
use super::values::{
    self, DEFAULT_VALUES_PATH, ValuesTaken, mig_strategy_path, names_stay_strings,
    values_path_attribute,
};
use crate::cluster::helm::{self, ReleaseState};
use crate::cluster::{Cluster, KubeError, chart, values::value_at};

const NAME: &str = "helm";

tfplugin::object! {
    /// The `helm` block.
    pub struct HelmArgs {
        pub release: String,
        pub namespace: String,
        pub chart: String,
        pub chart_version: Option<String>,
        pub values_path: Option<String>,
        pub helm_path: Option<String>,
    }
}

fn block() -> Block {
    Block::new(
        "Deliver through the GPU operator's Helm release instead of a ConfigMap \
        of our own. Each apply runs `helm upgrade --reset-values` with the release's complete user \
        values and this resource's device plugin values in them, against the cluster `kubernetes` \
        names (never `KUBECONFIG`'s): a removed config leaves what the chart renders, while \
        configs the chart's own values define stay (a warning lists them). Destroy gives the \
        release back the device plugin values it had before this resource, or the chart's defaults \
        when it had none.",
    )
    .attrs(release_attributes(
        "Release name, e.g. `gpu-operator`.",
        "Namespace of the release.",
        "The chart `helm upgrade` is given, e.g. `nvidia/gpu-operator` or an `oci://` reference.",
    ))
    .attr(values_path_attribute(
        "Dotted path of the operator's `devicePlugin` values, e.g. \
            `azure-aks-gpu-operator.devicePlugin` for a wrapping chart. Default `devicePlugin`.",
    ))
    .attr(helm_path_attribute())
}

impl HelmArgs {
    fn values_path(&self) -> &str {
        self.values_path.as_deref().unwrap_or(DEFAULT_VALUES_PATH)
    }

    fn release(&self) -> ReleaseBlock<'_> {
        ReleaseBlock {
            block: NAME,
            helm: self.helm_path.as_deref().unwrap_or("helm"),
            release: &self.release,
            namespace: &self.namespace,
            chart: &self.chart,
            chart_version: self.chart_version.as_deref(),
        }
    }
}

#[async_trait]
impl Lifecycle for HelmArgs {
    fn about() -> About {
        About {
            name: NAME,
            summary: "`helm` (upgrade the operator's release)",
            block: Some(BlockAbout {
                schema: block,
                names: "the release",
                example: "helm { release = ..., namespace = ..., chart = ... }",
                import_id: "<namespace>/<release>/<configmap>",
            }),
        }
    }

    /// The ConfigMap the ClusterPolicy points the plugin at, where the Helm release that made
    /// the ClusterPolicy set the pointer (helm's annotations name it): a guess, which a GitOps
    /// object that says the same (a Flux HelmRelease's release) wins over.
    async fn discover(c: &Cluster) -> Result<Vec<Found>, KubeError> {
        let Some(p) = none_if_missing(c.cluster_policy().await.map(Some))? else {
            return Ok(Vec::new());
        };
        let (Some(name), Some(ns), Some((release, rns))) = (p.name, p.operand_namespace, p.release)
        else {
            return Ok(Vec::new());
        };
        if p.pointer_ours {
            return Ok(Vec::new());
        }
        Ok(vec![Found {
            import_id: format!("{}:{rns}/{release}/{name}", Self::about().name),
            namespace: ns,
            name,
            delivery: Self::about().name,
            through: format!("the Helm release {rns}/{release}"),
            certain: false,
        }])
    }

    fn imported(namespace: &str, release: &str) -> Self {
        Self {
            release: release.to_string(),
            namespace: namespace.to_string(),
            ..Self::default()
        }
    }

    fn import_object(&self) -> Option<(String, String)> {
        Some((self.namespace.clone(), self.release.clone()))
    }

    /// The chart creates the ConfigMap in the release's namespace.
    fn placement(config: &Value) -> Result<Placement, DecodeError> {
        release_placement(config, NAME, |b: HelmArgs| b.namespace)
    }

    fn check(&self, desired: &Desired, diags: &mut Diagnostics) -> bool {
        names_stay_strings(desired, diags)
    }

    fn chart_values(&self, desired: &Desired) -> serde_json::Value {
        desired.helm_values(self.values_path())
    }

    async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        self.upgrade(at, taken, w, diags).await?;
        self.check_operator_reads(at, diags).await?;
        Some(Reload::Restart(self.namespace.clone()))
    }

    /// Drift is what the operator reads, not only what the release's values say: the
    /// ClusterPolicy the chart rendered and the ConfigMap it points at in the release's
    /// namespace (a hand edit of either, or values that reach no ClusterPolicy, show).
    async fn read_back(
        &self,
        at: &At<'_>,
        declared: &[String],
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let (rel, rns) = (self.release.as_str(), self.namespace.as_str());
        let release = match helm::read_release(at.cluster, rns, rel).await {
            Ok(ReleaseState::Deployed(r)) => r,
            Ok(ReleaseState::Pending(r)) => {
                diags.push(Diagnostic::warning(
                    "Helm release operation pending",
                    format!(
                        "Release {rns}/{rel} revision {} is {}; its values are compared, and \
                        an apply waits until the operation is finished or rolled back.",
                        r.revision, r.status
                    ),
                ));
                r
            }
            Ok(ReleaseState::Missing) => return Some(ClusterView::default()),
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read the Helm release",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let reads = match operator_reads(at.cluster, rns).await {
            Ok(r) => r,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read what the operator reads",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let business = self.configs_of_ours(&release, declared);
        let data: BTreeMap<String, String> = reads
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| business(k))
            .collect();
        let mig = match &reads.pointer {
            Some(p) => p.mig_strategy.clone(),
            None => value_at(
                &release.effective_values(),
                &mig_strategy_path(self.values_path()),
            )
            .and_then(|v| v.as_str())
            .map(str::to_string),
        };
        let pointer = reads.pointer.unwrap_or_default();
        Some(ClusterView {
            pointer_name: pointer.name,
            default: pointer.default,
            mig_strategy: mig,
            mig_strategy_ours: false,
            data: Some(data),
            operator_namespace: None,
        })
    }

    async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let owned = at.desired.helm_owned(self.values_path());
        self.release()
            .give_back(at, &taken.get::<ValuesTaken>(), owned, w, diags)
            .await?;
        Some(Reload::Restart(at.desired.namespace.clone()))
    }
}

impl HelmArgs {
    /// Upgrades the release with this resource's values in the user's; what the user had there
    /// is recorded before helm runs, so that an upgrade cut short still leaves the record behind
    /// for destroy.
    async fn upgrade(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let r = self.release();
        let deployed = r.deployed(at, diags).await?;
        self.check_subchart(&r, &deployed, diags).await?;
        let owned = at.desired.helm_owned(self.values_path());
        let force = self.repair_flag(at, &deployed, &owned, diags).await?;
        let mut user = ReleaseBlock::user_values(&deployed);
        let mut taken = taken.open::<ValuesTaken>();
        let changes = taken.changes(&owned, &deployed.config, w.first);
        values::apply(&mut user, &changes.set);
        self.warn_chart_default_configs(&deployed, at.desired, diags);
        // The chart renders the ConfigMap in the release's namespace, where the operator runs.
        let effective = deployed.effective_values();
        let strategy =
            value_at(&effective, &mig_strategy_path(self.values_path())).and_then(|v| v.as_str());
        warn_operator_mismatch(at.desired, None, strategy, diags);
        r.upgrade(at, &deployed, &user, force, w, diags).await?;
        w.wrote = true;
        taken.forget(&changes.released);
        Some(())
    }

    /// Refuses a `values_path` under a subchart the release does not render; only a release
    /// whose chart has subcharts can leave one out.
    async fn check_subchart(
        &self,
        r: &ReleaseBlock<'_>,
        deployed: &helm::Release,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        if !deployed.chart_dependencies.is_array() {
            return Some(());
        }
        match helm::declared_dependencies(r.helm, r.chart, r.version(deployed)).await {
            Ok(declared) => match chart::disabled_subchart(deployed, &declared, self.values_path())
            {
                Some(off) => {
                    diags.push(self.disabled_diagnostic(deployed, &off));
                    None
                }
                None => Some(()),
            },
            Err(e) => {
                diags.push(r.diagnostic(&e.to_string()));
                None
            }
        }
    }

    /// The flag that makes the upgrade re-assert the chart's objects, when the release's values
    /// already say what this resource wants yet the operator reads something else: someone
    /// edited the objects the chart rendered, which plain `helm upgrade` would leave (or refuse).
    /// None after a diagnostic; Some(None) when no repair is needed.
    async fn repair_flag(
        &self,
        at: &At<'_>,
        deployed: &helm::Release,
        owned: &[(String, serde_json::Value)],
        diags: &mut Diagnostics,
    ) -> Option<Option<&'static str>> {
        let values_hold_ours = owned
            .iter()
            .all(|(p, v)| value_at(&deployed.config, p) == Some(v));
        let edited = values_hold_ours
            && operator_reads(at.cluster, &self.namespace)
                .await
                .is_ok_and(|r| r.mismatch(at.desired).is_some());
        if !edited {
            return Some(None);
        }
        let r = self.release();
        match helm::major_version(r.helm).await {
            Ok(major) => Some(Some(helm::repair_flag(major))),
            Err(e) => {
                diags.push(r.diagnostic(&e.to_string()));
                None
            }
        }
    }

    /// After the upgrade, what the operator reads must be these configs: the ClusterPolicy
    /// `cluster-policy` pointing at our ConfigMap (with our default) and that ConfigMap in the
    /// release's namespace holding every config. None after an error diagnostic that says what
    /// the operator reads instead.
    async fn check_operator_reads(&self, at: &At<'_>, diags: &mut Diagnostics) -> Option<()> {
        let reads = match operator_reads(at.cluster, &self.namespace).await {
            Ok(r) => r,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read what the operator reads",
                    at.desired.access,
                    &e,
                ));
                return None;
            }
        };
        let Some(problem) = reads.mismatch(at.desired) else {
            return Some(());
        };
        let vp = self.values_path();
        diags.push(
            Diagnostic::error(
                "GPU operator does not read these configs",
                format!(
                    "The release was upgraded, but {problem}. The values under \
                    helm.values_path ({vp:?}) do not reach the operator's ClusterPolicy: check \
                    that the path names the chart (or the subchart, by its alias) that renders the \
                    ClusterPolicy `cluster-policy` on this cluster."
                ),
            )
            .at(values_path_attr()),
        );
        None
    }

    /// The configs that are this resource's business: those the release's user values set and
    /// those the configuration names (`declared`). A config only the chart's own defaults
    /// define stays whatever this resource does (see `warn_chart_default_configs`).
    fn configs_of_ours<'a>(
        &self,
        release: &helm::Release,
        declared: &'a [String],
    ) -> impl Fn(&String) -> bool + 'a {
        let user_set: Vec<String> = value_at(
            &release.config,
            &format!("{}.config.data", self.values_path()),
        )
        .and_then(|d| d.as_object())
        .map(|m| {
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
        move |k| user_set.contains(k) || declared.contains(k)
    }

    /// Configs the chart itself defines stay in what it renders: helm coalesces a chart's
    /// defaults under every value that does not override them, and a null that would remove
    /// one is kept as null under a subchart's values by helm 4 (so the ConfigMap is refused).
    fn warn_chart_default_configs(&self, r: &helm::Release, d: &Desired, diags: &mut Diagnostics) {
        let vp = self.values_path();
        let defaults = value_at(&r.chart_values, &format!("{vp}.config.data"));
        let extra: Vec<&String> = defaults
            .and_then(|v| v.as_object())
            .map(|m| m.keys().filter(|k| !d.configs.contains_key(*k)).collect())
            .unwrap_or_default();
        if extra.is_empty() {
            return;
        }
        diags.push(
            Diagnostic::warning(
                "Chart defines more configs",
                format!(
                    "The chart {} {} defines {} in its own values ({}.config.data), so the \
                        ConfigMap keeps {}: helm renders a chart's defaults unless a value \
                        replaces them. Nodes labelled with {} get the chart's version. To \
                        manage one, add a `config` block of that name.",
                    r.chart,
                    r.chart_version,
                    quoted(&extra),
                    vp,
                    if extra.len() == 1 { "it" } else { "them" },
                    if extra.len() == 1 {
                        "it"
                    } else {
                        "one of them"
                    },
                ),
            )
            .at(AttrPath::attr("config")),
        );
    }

    /// A `values_path` under a subchart the release does not render.
    fn disabled_diagnostic(&self, r: &helm::Release, off: &chart::Disabled) -> Diagnostic {
        let instead = if off.enabled.is_empty() {
            String::new()
        } else {
            format!(
                " The subcharts this release renders: {}.",
                off.enabled
                    .iter()
                    .map(|e| format!("{e:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Diagnostic::error(
            "Values path names a disabled subchart",
            format!(
                "helm.values_path is {:?}, under the subchart {:?} of the chart {} {}, which renders \
                    nothing on this cluster: its condition `{}` is false in the release's values, so \
                    neither the ConfigMap nor the ClusterPolicy pointer would reach the operator. \
                    Nothing was changed. Set values_path under the subchart this cluster enables, or \
                    set `{}` to true in the release.{instead}",
                self.values_path(),
                off.subchart,
                r.chart,
                r.chart_version,
                off.condition,
                off.condition,
            ),
        )
        .at(values_path_attr())
    }
}

/// `helm.values_path`, where a diagnostic about the path points.
fn values_path_attr() -> AttrPath {
    AttrPath::attr(NAME).with_index(0).with_attr("values_path")
}
