//! Writing the configs to the cluster: a ConfigMap of ours with the ClusterPolicy pointer (and
//! the field ownership that keeps the operator's Helm release upgradable), or the operator's
//! Helm release itself; then the device plugin restart the operator does not do by itself.
//! Destroy gives back what the resource took over.

use std::collections::BTreeMap;

use serde_json::json;

use crate::cluster::helm::{self, ReleaseState};
use crate::cluster::{self as k, Cluster, KubeError};
use crate::cluster::{chart, gitops};
use tfplugin::{AttrPath, Diagnostic, Diagnostics};

use super::model::{Desired, GitOpsSpec, HelmSpec, Takeover};
use super::resource::DevicePluginConfigResource;

impl DevicePluginConfigResource {
    /// Warns about nodes whose label names no config of this resource.
    pub(super) async fn warn_unknown_labels(
        &self,
        c: &Cluster,
        d: &Desired,
        diags: &mut Diagnostics,
    ) {
        let Ok(labels) = c.node_config_labels().await else {
            return;
        };
        let mut unknown: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, value) in &labels {
            if !d.configs.contains_key(value) {
                unknown.entry(value).or_default().push(node);
            }
        }
        for (value, nodes) in unknown {
            diags.push(
                Diagnostic::warning(
                    "Node label names no config",
                    format!(
                        "{} node(s) ({}) carry nvidia.com/device-plugin.config={value:?}, which is \
                            not a config of this resource. NVIDIA's config-manager finds no such \
                            config there: a device plugin pod that starts on them stops at its \
                            init container (\"specified config {value} does not exist\") and a \
                            running one that sees the label fails to reload, so the nodes serve \
                            no GPU. Add `config {{ name = {value:?} ... }}` or relabel the nodes.",
                        nodes.len(),
                        nodes.join(", ")
                    ),
                )
                .at(AttrPath::attr("config")),
            );
        }
    }

    /// Writes the desired config to the cluster and restarts the plugin; returns restarted_at.
    /// `first` says whether this is the resource's first write (a create): only then is what
    /// the cluster holds someone else's, to be recorded in `taken` and given back on destroy.
    /// `w.wrote` is set once something of this resource is in the cluster, even when a later
    /// step fails, so that a create keeps it in state.
    pub(super) async fn deliver(
        &self,
        c: &Cluster,
        d: &Desired,
        taken: &mut Takeover,
        first: bool,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Option<String>> {
        let access = d.access;
        if let Some(g) = &d.gitops {
            // The controller renders the configs on its own sync, after this resource is done:
            // a restart now would load the old ones.
            self.gitops_write(c, d, g, taken, first, w, diags).await?;
            return Some(None);
        }
        let operand_ns = match &d.helm {
            None => {
                let pointer = match c.cluster_policy().await {
                    Ok(p) => p,
                    Err(e) => {
                        diags.push(kube_diagnostic("read the ClusterPolicy", access, &e));
                        return None;
                    }
                };
                warn_operator_mismatch(
                    d,
                    pointer.operand_namespace.as_deref(),
                    pointer.mig_strategy.as_deref(),
                    diags,
                );
                self.take_policy_fields(c, d, taken, diags).await?;
                let step = async {
                    c.apply_configmap(&d.namespace, &d.name, &d.data()).await?;
                    w.wrote = true;
                    c.apply_pointer(Some((
                        &d.name,
                        d.default.as_deref(),
                        d.mig_strategy.as_deref(),
                    )))
                    .await
                };
                if let Err(e) = step.await {
                    diags.push(kube_diagnostic(
                        "apply the ConfigMap and ClusterPolicy",
                        access,
                        &e,
                    ));
                    return None;
                }
                pointer
                    .operand_namespace
                    .unwrap_or_else(|| d.namespace.clone())
            }
            Some(h) => {
                self.helm_upgrade(c, d, h, taken, first, w, diags).await?;
                self.check_operator_reads(c, d, &h.namespace, diags).await?;
                h.namespace.clone()
            }
        };
        match c
            .restart_device_plugin(&operand_ns, Some(&d.name), &k::now_rfc3339())
            .await
        {
            Ok(Some(at)) => Some(Some(at)),
            Ok(None) => {
                diags.push(Diagnostic::warning(
                    "Device plugin daemonset not found",
                    format!(
                        "No daemonset {operand_ns}/nvidia-device-plugin-daemonset to restart; \
                        nodes pick the config up when the operator starts the device plugin."
                    ),
                ));
                Some(None)
            }
            Err(e) => {
                diags.push(kube_diagnostic("restart the device plugin", access, &e));
                None
            }
        }
    }

    /// Checks who holds the ClusterPolicy fields this resource sets (see `cluster::delivery` for
    /// why): a field another manager holds through server-side apply is refused with a
    /// diagnostic; what update managers hold is recorded in `taken` before it is overwritten.
    pub(super) async fn take_policy_fields(
        &self,
        c: &Cluster,
        d: &Desired,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let wanted = d.policy_fields();
        let paths: Vec<&str> = wanted.iter().map(|(p, _, _)| *p).collect();
        let fields = match c.policy_fields(&paths).await {
            Ok(f) => f,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", d.access, &e));
                return None;
            }
        };
        let mut refused = false;
        for ((path, want, attr), field) in wanted.iter().zip(&fields) {
            if field.value.as_ref() == Some(want) {
                continue;
            }
            let appliers = field.appliers();
            if !appliers.is_empty() {
                refused = true;
                let now = field
                    .value
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                diags.push(
                    Diagnostic::error(
                        "ClusterPolicy field managed by server-side apply",
                        format!(
                            "{path} of the ClusterPolicy {} is {now}, set by \"{}\" with \
                                server-side apply (a Helm 4 release of the GPU operator does \
                                that). Setting it to {want} here would make that manager's next \
                                apply fail with a conflict, e.g. the next `helm upgrade` of the \
                                operator. Set it in the operator release's values instead \
                                (delivery = \"helm\" does that for you), or leave `{attr}` unset.",
                            k::CLUSTER_POLICY,
                            appliers.join("\", \""),
                        ),
                    )
                    .at(AttrPath::attr(attr)),
                );
                continue;
            }
            if let (Some(value), Some((manager, _))) = (&field.value, field.owners.first()) {
                taken
                    .cluster_policy
                    .entry(path.to_string())
                    .or_insert_with(|| k::TakenField {
                        value: value.clone(),
                        manager: manager.clone(),
                    });
            }
        }
        (!refused).then_some(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn helm_upgrade(
        &self,
        c: &Cluster,
        d: &Desired,
        h: &HelmSpec,
        taken: &mut Takeover,
        first: bool,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let deployed = self.deployed_release(c, h, d.access, diags).await?;
        let version = h
            .chart_version
            .as_deref()
            .or(Some(deployed.chart_version.as_str()));
        // Only a release whose chart has subcharts can leave one out.
        if deployed.chart_dependencies.is_array() {
            let declared = helm::declared_dependencies(&h.helm_path, &h.chart, version).await;
            match declared {
                Ok(declared) => {
                    if let Some(off) =
                        chart::disabled_subchart(&deployed, &declared, &h.values_path)
                    {
                        diags.push(disabled_diagnostic(h, &deployed, &off));
                        return None;
                    }
                }
                Err(e) => {
                    diags.push(helm_diagnostic(h, &e.to_string()));
                    return None;
                }
            }
        }
        let owned = d.helm_owned(&h.values_path);
        // The release's values already say what this resource wants, yet the operator reads
        // something else: someone edited the objects the chart rendered. Plain `helm upgrade`
        // would leave that edit (or refuse it), so this upgrade re-asserts the chart's objects.
        let values_hold_ours = owned
            .iter()
            .all(|(p, v)| helm::value_at(&deployed.config, p) == Some(v));
        let edited = values_hold_ours
            && operator_reads(c, &h.namespace)
                .await
                .is_ok_and(|r| r.mismatch(d).is_some());
        let force = if edited {
            match helm::major_version(&h.helm_path).await {
                Ok(major) => Some(helm::repair_flag(major)),
                Err(e) => {
                    diags.push(helm_diagnostic(h, &e.to_string()));
                    return None;
                }
            }
        } else {
            None
        };
        // The release's user values, complete: helm is handed all of them with
        // --reset-values, so nothing of ours lingers and nothing of the user's is lost.
        let mut values = match &deployed.config {
            serde_json::Value::Object(_) => deployed.config.clone(),
            _ => json!({}),
        };
        // What the user had where this resource writes is recorded before helm runs, so that
        // an upgrade cut short still leaves the record behind for destroy.
        for (path, v) in owned.iter() {
            // On a create, what the user had there is theirs; on an update of a config made
            // before the provider kept this record, the values there are already ours.
            taken.helm.entry(path.clone()).or_insert_with(|| {
                if first {
                    helm::value_at(&deployed.config, path).cloned()
                } else {
                    None
                }
            });
            helm::set_value_at(&mut values, path, Some(v.clone()));
        }
        // Paths this resource set before and sets no more (a MIG strategy now unset) go back
        // to what the user had there.
        let released: Vec<String> = taken
            .helm
            .iter()
            .filter(|(path, _)| !owned.iter().any(|(p, _)| p == *path))
            .map(|(path, prior)| {
                helm::set_value_at(&mut values, path, prior.clone());
                path.clone()
            })
            .collect();
        self.warn_chart_default_configs(&deployed, d, h, diags);
        // The chart renders the ConfigMap in the release's namespace, where the operator runs.
        let effective = deployed.effective_values();
        let strategy = helm::value_at(&effective, &super::model::mig_strategy_path(&h.values_path))
            .and_then(|v| v.as_str());
        warn_operator_mismatch(d, None, strategy, diags);
        // helm must reach the very cluster the client above read the release from.
        let settings = d.kubernetes.or(&self.state.settings().kubernetes);
        let run = helm::Upgrade {
            helm: &h.helm_path,
            release: &h.release,
            chart: &h.chart,
            namespace: &h.namespace,
            chart_version: version,
            timeout: w.helm_timeout(),
            force,
        }
        .run(&values, &settings)
        .await;
        match run {
            Ok(_) => {
                w.wrote = true;
                for path in released {
                    taken.helm.remove(&path);
                }
                Some(())
            }
            Err(e) => {
                diags.push(self.helm_failure(c, h, &e.to_string(), w).await);
                None
            }
        }
    }

    /// Writes the configs into the values of the Argo CD Application or Flux HelmRelease: only
    /// the paths this resource owns change; what was there before is recorded on the first
    /// write, for destroy.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn gitops_write(
        &self,
        c: &Cluster,
        d: &Desired,
        g: &GitOpsSpec,
        taken: &mut Takeover,
        first: bool,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let held = self.held(c, d, g, diags).await?;
        if let Some(by) = &held.managed_by {
            diags.push(managed_warning(g, by));
        }
        let owned = d.helm_owned(&g.values_path);
        let mut changes: Vec<(String, Option<serde_json::Value>)> = Vec::new();
        for (path, v) in &owned {
            taken.helm.entry(path.clone()).or_insert_with(|| {
                if first {
                    helm::value_at(&held.values, path).cloned()
                } else {
                    None
                }
            });
            changes.push((path.clone(), Some(v.clone())));
        }
        let released: Vec<String> = taken
            .helm
            .iter()
            .filter(|(path, _)| !owned.iter().any(|(p, _)| p == *path))
            .map(|(path, prior)| {
                changes.push((path.clone(), prior.clone()));
                path.clone()
            })
            .collect();
        let strategy = helm::value_at(
            &held.effective,
            &super::model::mig_strategy_path(&g.values_path),
        )
        .and_then(|v| v.as_str());
        warn_operator_mismatch(d, None, strategy, diags);
        match c.write_holder_values(&g.holder, &changes).await {
            Ok(written) => {
                w.wrote = true;
                w.operator_namespace = written.operator_namespace;
                for path in released {
                    taken.helm.remove(&path);
                }
                Some(())
            }
            Err(e) => {
                diags.push(kube_diagnostic(
                    &format!("write the {}'s values", g.holder.kind.noun()),
                    d.access,
                    &e,
                ));
                None
            }
        }
    }

    /// The Application or HelmRelease; None after a diagnostic (missing, unreadable).
    pub(super) async fn held(
        &self,
        c: &Cluster,
        d: &Desired,
        g: &GitOpsSpec,
        diags: &mut Diagnostics,
    ) -> Option<gitops::Held> {
        let h = &g.holder;
        match c.read_holder(h).await {
            Ok(Some(held)) => Some(held),
            Ok(None) => {
                let name_attr = if g.block == "argocd" {
                    "application"
                } else {
                    "helm_release"
                };
                diags.push(
                    Diagnostic::error(
                        format!("{} not found", h.kind.noun()),
                        format!(
                            "There is no {} {}/{} (or its CRD is not installed), so there are \
                            no values to write the configs into. Check {}.{name_attr} and \
                            {}.namespace.",
                            h.kind.noun(),
                            h.namespace,
                            h.name,
                            g.block,
                            g.block
                        ),
                    )
                    .at(AttrPath::attr(g.block).with_index(0).with_attr(name_attr)),
                );
                None
            }
            Err(e) => {
                diags.push(kube_diagnostic(
                    &format!("read the {}", h.kind.noun()),
                    d.access,
                    &e,
                ));
                None
            }
        }
    }

    /// Destroy of a GitOps delivery: the values object gets back what it had where this
    /// resource wrote (or loses those paths when there is no record). False after an error.
    pub(super) async fn give_back_gitops_values(
        &self,
        c: &Cluster,
        d: &Desired,
        g: &GitOpsSpec,
        taken: &Takeover,
        diags: &mut Diagnostics,
    ) -> bool {
        match c.read_holder(&g.holder).await {
            // Nothing to give back to.
            Ok(None) => return true,
            Ok(Some(_)) => {}
            Err(e) => {
                diags.push(kube_diagnostic(
                    &format!("read the {}", g.holder.kind.noun()),
                    d.access,
                    &e,
                ));
                return false;
            }
        }
        let mut paths: Vec<String> = d
            .helm_owned(&g.values_path)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        paths.extend(taken.helm.keys().cloned());
        paths.sort();
        paths.dedup();
        let changes: Vec<(String, Option<serde_json::Value>)> = paths
            .into_iter()
            .map(|p| {
                let prior = taken.helm.get(&p).cloned().flatten();
                (p, prior)
            })
            .collect();
        match c.write_holder_values(&g.holder, &changes).await {
            Ok(_) => true,
            Err(e) => {
                diags.push(kube_diagnostic(
                    &format!("give the {} its values back", g.holder.kind.noun()),
                    d.access,
                    &e,
                ));
                false
            }
        }
    }

    /// The diagnostic of a failed `helm upgrade`; when helm stopped at a hook, it names the hook
    /// Jobs that did not finish (helm 3 only says it timed out).
    async fn helm_failure(&self, c: &Cluster, h: &HelmSpec, e: &str, w: &Writing) -> Diagnostic {
        if !e.contains("hook") {
            return helm_diagnostic(h, e);
        }
        let jobs = c
            .unfinished_hook_jobs(&h.namespace)
            .await
            .unwrap_or_default();
        let named = if jobs.is_empty() {
            String::new()
        } else {
            format!(" Still running: {}.", jobs.join(", "))
        };
        Diagnostic::error(
            "Helm hook did not finish",
            format!(
                "Release {}/{} (helm.release): `helm upgrade` waits for the chart's hooks, and one \
                    did not finish in time (helm was given --timeout {}s of this operation's \
                    {}s).{named} Check why the Job's pods do not complete (`kubectl -n {} describe \
                    job ...`), or raise the resource's `timeouts`. helm said: {e}",
                h.namespace,
                h.release,
                w.helm_given.as_secs(),
                w.limit.as_secs(),
                h.namespace,
            ),
        )
        .at(AttrPath::attr("timeouts"))
    }

    /// After a Helm delivery, what the operator reads must be these configs: the ClusterPolicy
    /// `cluster-policy` pointing at our ConfigMap (with our default) and that ConfigMap in the
    /// release's namespace holding every config. None after an error diagnostic that says what
    /// the operator reads instead.
    pub(super) async fn check_operator_reads(
        &self,
        c: &Cluster,
        d: &Desired,
        ns: &str,
        diags: &mut Diagnostics,
    ) -> Option<()> {
        let reads = match operator_reads(c, ns).await {
            Ok(r) => r,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read what the operator reads",
                    d.access,
                    &e,
                ));
                return None;
            }
        };
        let problem = reads.mismatch(d);
        let Some(problem) = problem else {
            return Some(());
        };
        let vp = d.values_path();
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
            .at(AttrPath::attr("helm")
                .with_index(0)
                .with_attr("values_path")),
        );
        None
    }

    /// The deployed revision of the release; None after a diagnostic (missing, pending).
    pub(super) async fn deployed_release(
        &self,
        c: &Cluster,
        h: &HelmSpec,
        access: Option<&'static str>,
        diags: &mut Diagnostics,
    ) -> Option<helm::Release> {
        match helm::read_release(c, &h.namespace, &h.release).await {
            Ok(ReleaseState::Deployed(r)) => Some(r),
            Ok(ReleaseState::Pending(r)) => {
                diags.push(helm_diagnostic(h, &format!(
                    "revision {} is {}: another helm operation is in progress or was interrupted. \
                    Wait for it, or `helm rollback` it, then apply again.", r.revision, r.status)));
                None
            }
            Ok(ReleaseState::Missing) => {
                diags.push(helm_diagnostic(
                    h,
                    "no deployed revision found (no Secret \
                    sh.helm.release.v1.<release>.v<N> with status deployed). Check helm.release \
                    and helm.namespace.",
                ));
                None
            }
            Err(e) => {
                diags.push(kube_diagnostic("read the Helm release", access, &e));
                None
            }
        }
    }

    /// Configs the chart itself defines stay in what it renders: helm coalesces a chart's
    /// defaults under every value that does not override them, and a null that would remove
    /// one is kept as null under a subchart's values by helm 4 (so the ConfigMap is refused).
    pub(super) fn warn_chart_default_configs(
        &self,
        r: &helm::Release,
        d: &Desired,
        h: &HelmSpec,
        diags: &mut Diagnostics,
    ) {
        let defaults = helm::value_at(&r.chart_values, &format!("{}.config.data", h.values_path));
        let extra: Vec<&String> = defaults
            .and_then(|v| v.as_object())
            .map(|m| m.keys().filter(|k| !d.configs.contains_key(*k)).collect())
            .unwrap_or_default();
        if !extra.is_empty() {
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
                        h.values_path,
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
    }

    /// Destroy of a Helm delivery: the release gets back the user values it had where this
    /// resource wrote (from `taken`); where it has no record (an imported config), the values
    /// are removed and the chart's defaults come back. False after an error diagnostic.
    pub(super) async fn give_back_helm_values(
        &self,
        c: &Cluster,
        d: &Desired,
        h: &HelmSpec,
        taken: &Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> bool {
        let deployed = match helm::read_release(c, &h.namespace, &h.release).await {
            // Nothing to give back to.
            Ok(ReleaseState::Missing) => return true,
            Ok(_) => match self.deployed_release(c, h, d.access, diags).await {
                Some(r) => r,
                None => return false,
            },
            Err(e) => {
                diags.push(kube_diagnostic("read the Helm release", d.access, &e));
                return false;
            }
        };
        let mut values = match &deployed.config {
            serde_json::Value::Object(_) => deployed.config.clone(),
            _ => json!({}),
        };
        let mut paths: Vec<String> = d
            .helm_owned(&h.values_path)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        paths.extend(taken.helm.keys().cloned());
        for path in paths {
            let prior = taken.helm.get(&path).cloned().flatten();
            helm::set_value_at(&mut values, &path, prior);
        }
        let settings = d.kubernetes.or(&self.state.settings().kubernetes);
        let run = helm::Upgrade {
            helm: &h.helm_path,
            release: &h.release,
            chart: &h.chart,
            namespace: &h.namespace,
            chart_version: h
                .chart_version
                .as_deref()
                .or(Some(deployed.chart_version.as_str())),
            timeout: w.helm_timeout(),
            force: None,
        }
        .run(&values, &settings)
        .await;
        match run {
            Ok(_) => true,
            Err(e) => {
                diags.push(self.helm_failure(c, h, &e.to_string(), w).await);
                false
            }
        }
    }
}

/// The bounds of one write: when the operation must be done (its `timeouts` entry), so that helm
/// is told to stop before it, and whether anything of the resource is in the cluster yet.
pub(super) struct Writing {
    pub deadline: std::time::Instant,
    pub limit: std::time::Duration,
    pub wrote: bool,
    /// Where the chart installs the operator, as a GitOps object said when written.
    pub operator_namespace: Option<String>,
    /// The `--timeout` helm was last given.
    pub helm_given: std::time::Duration,
}

impl Writing {
    pub(super) fn new(limit: std::time::Duration) -> Writing {
        Writing {
            deadline: std::time::Instant::now() + limit,
            limit,
            wrote: false,
            operator_namespace: None,
            helm_given: std::time::Duration::ZERO,
        }
    }

    /// What helm may take: the time left, less a margin for the provider to read the outcome
    /// and report it before the operation's own deadline cuts it short.
    pub(super) fn helm_timeout(&mut self) -> std::time::Duration {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let margin = (left / 10).max(std::time::Duration::from_secs(5));
        self.helm_given = left
            .saturating_sub(margin)
            .max(std::time::Duration::from_secs(1));
        self.helm_given
    }
}

/// What the GPU operator reads on the cluster: the ClusterPolicy's pointer and the data of the
/// ConfigMap it names in the operator's namespace.
#[derive(Debug, Default)]
pub(super) struct OperatorReads {
    pub namespace: String,
    /// None: there is no ClusterPolicy `cluster-policy`.
    pub pointer: Option<k::PolicyPointer>,
    /// The named ConfigMap's data; None when it does not exist.
    pub data: Option<BTreeMap<String, String>>,
}

impl OperatorReads {
    /// What keeps these configs from the nodes, None when the operator reads them all.
    pub(super) fn mismatch(&self, d: &Desired) -> Option<String> {
        let ns = &self.namespace;
        let Some(k::PolicyPointer { name, default, .. }) = &self.pointer else {
            return Some(format!(
                "there is no ClusterPolicy `{}` on the cluster",
                k::CLUSTER_POLICY
            ));
        };
        if name.as_deref() != Some(d.name.as_str()) {
            return Some(match name {
                Some(n) => format!(
                    "the ClusterPolicy points the device plugin at the ConfigMap {n:?}, not {:?}",
                    d.name
                ),
                None => "the ClusterPolicy names no device plugin ConfigMap".to_string(),
            });
        }
        if d.default.is_some() && *default != d.default {
            return Some(format!(
                "the ClusterPolicy's default config is {}, not {:?}",
                default
                    .as_deref()
                    .map_or("unset".into(), |s| format!("{s:?}")),
                d.default.as_deref().unwrap_or_default()
            ));
        }
        let Some(data) = &self.data else {
            return Some(format!("there is no ConfigMap {ns}/{}", d.name));
        };
        let missing: Vec<&String> = d
            .configs
            .iter()
            .filter(|(k, cfg)| {
                data.get(*k)
                    .is_none_or(|text| gpu::device_plugin::parse(text).ok().as_ref() != Some(*cfg))
            })
            .map(|(k, _)| k)
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "the ConfigMap {ns}/{} lacks or holds other versions of {}",
                d.name,
                quoted(&missing)
            )
        })
    }
}

/// Reads what the operator reads; the ConfigMap is looked for in `ns`.
pub(super) async fn operator_reads(c: &Cluster, ns: &str) -> Result<OperatorReads, KubeError> {
    let pointer = match c.cluster_policy().await {
        Ok(p) => Some(p),
        Err(KubeError::MissingCrd | KubeError::MissingClusterPolicy(_)) => None,
        Err(e) => return Err(e),
    };
    let data = match pointer.as_ref().and_then(|p| p.name.as_deref()) {
        Some(name) => c.configmap(ns, name).await?,
        None => None,
    };
    Ok(OperatorReads {
        namespace: ns.to_string(),
        pointer,
        data,
    })
}

/// The GitOps object is itself kept by a parent that would undo the change.
fn managed_warning(g: &GitOpsSpec, by: &str) -> Diagnostic {
    let h = &g.holder;
    let how = match h.kind {
        gitops::Kind::ArgoCd => {
            "Change the values in the parent's source instead, or have the parent ignore them \
                (`ignoreDifferences` on `/spec/source/helm/valuesObject`, with \
                `RespectIgnoreDifferences=true`)"
        }
        gitops::Kind::Flux => {
            "Change the values in the Kustomization's source instead, or move these values out of \
                what it applies"
        }
    };
    Diagnostic::warning(
        format!("{} managed by a parent", h.kind.noun()),
        format!(
            "The {} {}/{} is itself managed by {by}: its next sync puts the parent's version \
            of the object back and undoes what this resource wrote. {how}.",
            h.kind.noun(),
            h.namespace,
            h.name
        ),
    )
    .at(AttrPath::attr(g.block))
}

/// A `values_path` under a subchart the release does not render.
fn disabled_diagnostic(h: &HelmSpec, r: &helm::Release, off: &chart::Disabled) -> Diagnostic {
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
            h.values_path, off.subchart, r.chart, r.chart_version, off.condition, off.condition,
        ),
    )
    .at(AttrPath::attr("helm")
        .with_index(0)
        .with_attr("values_path"))
}

fn quoted(names: &[&String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn helm_diagnostic(h: &HelmSpec, e: &str) -> Diagnostic {
    Diagnostic::error(
        "Helm upgrade failed",
        format!("Release {}/{} (helm.release): {e}", h.namespace, h.release),
    )
    .at(AttrPath::attr("helm").with_index(0).with_attr("release"))
}

/// Warns about what the operator will do with the configs as delivered, which no error stops:
/// - A config with the mixed MIG strategy (`nvidia.com/mig-<profile>` resources) while
///   `mig_strategy` is unset and the operator's is another: the operator passes
///   ClusterPolicy `spec.mig.strategy` to the device plugin as MIG_STRATEGY (NVIDIA/gpu-operator
///   object_controls.go), which beats the file's `flags.migStrategy` (k8s-device-plugin's
///   precedence: flag, environment, file), and the chart sets `single`: pods that ask for a
///   mixed-strategy resource never schedule.
/// - A ConfigMap outside the operator's namespace: the operator mounts the config from a
///   ConfigMap in its own namespace only, so the configs reach no node.
pub(super) fn warn_operator_mismatch(
    d: &Desired,
    operator_namespace: Option<&str>,
    operator_strategy: Option<&str>,
    diags: &mut Diagnostics,
) {
    let mixed: Vec<&String> = d
        .configs
        .iter()
        .filter(|(_, c)| c.mig_strategy == Some(gpu::device_plugin::MigStrategyFlag::Mixed))
        .map(|(name, _)| name)
        .collect();
    if d.mig_strategy.is_none() && !mixed.is_empty() && operator_strategy != Some("mixed") {
        let theirs = operator_strategy.map_or("unset".to_string(), |s| format!("{s:?}"));
        diags.push(
            Diagnostic::warning(
                "MIG strategy overridden by the ClusterPolicy",
                format!(
                    "Config {} asks for the mixed MIG strategy (resources \
                        nvidia.com/mig-<profile>), but the GPU operator's spec.mig.strategy is \
                        {theirs}, and the operator hands it to the device plugin, overriding the \
                        config's own flag: nodes advertise no nvidia.com/mig-* resource and pods \
                        asking for one never schedule. Set mig_strategy = \"mixed\".",
                    quoted(&mixed),
                ),
            )
            .at(AttrPath::attr("mig_strategy")),
        );
    }
    if d.helm.is_none()
        && let Some(ns) = operator_namespace.filter(|ns| *ns != d.namespace)
    {
        diags.push(
            Diagnostic::warning(
                "ConfigMap outside the operator's namespace",
                format!(
                    "The GPU operator runs in namespace {ns:?} and reads its device plugin config \
                        from a ConfigMap there only; this one goes to {:?}, so no node gets these \
                        configs. Set namespace = {ns:?}.",
                    d.namespace
                ),
            )
            .at(AttrPath::attr("namespace")),
        );
    }
}

pub(super) fn kube_diagnostic(action: &str, access: Option<&str>, e: &KubeError) -> Diagnostic {
    let check = match access {
        Some(a) => format!("Check {}", AttrPath::parse(a)),
        None => {
            "Check the provider's `kubernetes` block (or KUBECONFIG, ~/.kube/config)".to_string()
        }
    };
    let (summary, hint, path) = match e {
        KubeError::Unreachable { .. } => (
            "Kubernetes cluster unreachable",
            format!("{check} and that the API server is up."),
            access.map(AttrPath::parse),
        ),
        KubeError::BadResponse { .. } => (
            "Unreadable Kubernetes API answer",
            "The API server (or a proxy in front of it) answered with something that is not a \
                Kubernetes object of a sane size; check what serves that address."
                .to_string(),
            access.map(AttrPath::parse),
        ),
        KubeError::Config(_) => (
            "Invalid Kubernetes settings",
            format!(
                "{check}: the kubeconfig path, its context, or \
                host/token/cluster_ca_certificate."
            ),
            access.map(AttrPath::parse),
        ),
        KubeError::MissingCrd | KubeError::MissingClusterPolicy(_) => (
            "NVIDIA GPU operator not installed",
            "delivery = \"cluster_policy\" needs the GPU operator (its ClusterPolicy \
                `cluster-policy`). Install the operator chart first, or use delivery = \"helm\" \
                with its release."
                .to_string(),
            Some(AttrPath::attr("delivery")),
        ),
        KubeError::Helm(_) => (
            "Helm release problem",
            "Check the helm block.".to_string(),
            Some(AttrPath::attr("helm").with_index(0).with_attr("release")),
        ),
        // The API server's message (kept above) names the verb, the resource and the namespace
        // it refused; the hint lists the whole set, as the guide's manifests grant it.
        KubeError::Api {
            code: 401 | 403, ..
        } => (
            "Kubernetes permission denied",
            if matches!(e, KubeError::Api { code: 401, .. }) {
                format!(
                    "{check}: the API server did not accept the credentials (an expired or \
                    revoked token, or a certificate it does not trust)."
                )
            } else {
                format!(
                    "{check}: the credentials lack the permission named above. delivery = \
                    \"cluster_policy\" needs, in the ConfigMap's namespace, configmaps get, \
                    create, patch, delete and daemonsets patch (nvidia-device-plugin-daemonset), \
                    and cluster-wide clusterpolicies.nvidia.com get, patch (cluster-policy) and \
                    nodes list. delivery = \"helm\" needs secrets list and daemonsets patch in the \
                    release's namespace, nodes list, and what `helm upgrade` of the operator's \
                    chart needs. delivery = \"argocd\" and \"flux\" need get and update on the \
                    Application or HelmRelease in its namespace, and nodes list. The guide \"Where \
                    your GPU operator lives\" (Least privilege) has them as Role and ClusterRole \
                    manifests."
                )
            },
            access.map(AttrPath::parse),
        ),
        KubeError::Api { .. } => ("Kubernetes API error", String::new(), None),
    };
    let d = Diagnostic::error(
        summary,
        format!("Could not {action}: {e}. {hint}")
            .trim_end()
            .to_string(),
    );
    match path {
        Some(p) => d.at(p),
        None => d,
    }
}
