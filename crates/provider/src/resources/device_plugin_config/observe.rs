//! Reading back what the cluster delivers: the deployed Helm release's values, or the
//! ClusterPolicy pointer and our ConfigMap; and the refreshed state, which compares configs by
//! meaning so that re-formatting never shows as drift while a hand edit does.

use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::cluster::helm::{self, ReleaseState};
use tfplugin::object::{Decoded, FromValue, merge};
use tfplugin::{Diagnostic, Diagnostics, Value};

use super::delivery::{kube_diagnostic, operator_reads, warn_operator_mismatch};
use super::model::{
    Args, ChartConfig, Computed, REIMPORT, State, config_blocks, mig_strategy_path, reconcile,
    resolve,
};
use super::resource::DevicePluginConfigResource;

/// What the cluster says about this resource's delivery.
#[derive(Default)]
pub(super) struct ClusterView {
    /// The ConfigMap the operator is pointed at.
    pointer_name: Option<String>,
    default: Option<String>,
    mig_strategy: Option<String>,
    /// Whether our field manager owns the strategy (import keeps it then).
    mig_strategy_ours: bool,
    /// The ConfigMap's data; None when it (or the release) is gone.
    data: Option<BTreeMap<String, String>>,
    /// Where the operator runs its operands (ClusterPolicy `status.namespace`).
    operator_namespace: Option<String>,
}

impl DevicePluginConfigResource {
    /// What the deployed Helm release says; None after an error diagnostic.
    async fn observe_helm(
        &self,
        c: &Cluster,
        args: &Args,
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let h = args.helm.as_ref()?;
        let (rel, rns) = (h.release.as_str(), h.namespace.as_str());
        let values_path = h
            .values_path
            .as_deref()
            .unwrap_or(super::DEFAULT_VALUES_PATH);
        let release = match helm::read_release(c, rns, rel).await {
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
                diags.push(kube_diagnostic("read the Helm release", args.access(), &e));
                return None;
            }
        };
        let values = release.effective_values();
        // The configs that are this resource's business: those the release's user values set
        // and those the configuration names. A config only the chart's own defaults define
        // stays whatever this resource does (see `warn_chart_default_configs`).
        let user_set: Vec<String> =
            helm::value_at(&release.config, &format!("{values_path}.config.data"))
                .and_then(|d| d.as_object())
                .map(|m| {
                    m.iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
        let declared = |k: &String| args.config.iter().any(|c| &c.name == k);
        // Drift is what the operator reads, not only what the release's values say: the
        // ClusterPolicy the chart rendered and the ConfigMap it points at in the release's
        // namespace (a hand edit of either, or values that reach no ClusterPolicy, show).
        let reads = match operator_reads(c, rns).await {
            Ok(r) => r,
            Err(e) => {
                diags.push(kube_diagnostic(
                    "read what the operator reads",
                    args.access(),
                    &e,
                ));
                return None;
            }
        };
        let data: BTreeMap<String, String> = reads
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| user_set.contains(k) || declared(k))
            .collect();
        let mig = match &reads.pointer {
            Some(p) => p.mig_strategy.clone(),
            None => helm::value_at(&values, &mig_strategy_path(values_path))
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

    /// What the Argo CD Application's or Flux HelmRelease's values say the chart will render
    /// (the controller syncs them; the live objects may lag behind, so they are not compared);
    /// None after an error diagnostic.
    async fn observe_gitops(
        &self,
        c: &Cluster,
        args: &Args,
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let d = resolve(args, &mut Diagnostics::new())?;
        let g = d.gitops.as_ref()?;
        let held = match c.read_holder(&g.holder).await {
            Ok(Some(h)) => h,
            // Gone: the next apply has nowhere to write, and says so.
            Ok(None) => return Some(ClusterView::default()),
            Err(e) => {
                diags.push(kube_diagnostic(
                    &format!("read the {}", g.holder.kind.noun()),
                    args.access(),
                    &e,
                ));
                return None;
            }
        };
        let vp = &g.values_path;
        let cfg = helm::value_at(&held.effective, &format!("{vp}.config"))
            .map(ChartConfig::of)
            .unwrap_or_default();
        // Every config these values give is rendered; there are no chart defaults to tell
        // apart here (the chart is not read).
        let data = cfg.data();
        Some(ClusterView {
            pointer_name: if cfg.created() { cfg.name() } else { None },
            default: cfg.default_config(),
            mig_strategy: helm::value_at(&held.effective, &mig_strategy_path(vp))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            mig_strategy_ours: false,
            data: Some(data),
            operator_namespace: held.operator_namespace,
        })
    }

    /// What the ClusterPolicy and the ConfigMap say; None after an error diagnostic.
    async fn observe_cluster_policy(
        &self,
        c: &Cluster,
        args: &Args,
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let (ns, name) = (args.namespace(), args.name());
        let pointer = match c.cluster_policy().await {
            Ok(p) => p,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", args.access(), &e));
                return None;
            }
        };
        let data = match c.configmap(ns, name).await {
            Ok(d) => d,
            Err(e) => {
                diags.push(kube_diagnostic("read the ConfigMap", args.access(), &e));
                return None;
            }
        };
        if let Some(other) = pointer.name.as_deref().filter(|n| *n != name) {
            diags.push(Diagnostic::warning(
                "ClusterPolicy points elsewhere",
                format!(
                    "The ClusterPolicy cluster-policy points the device plugin at the \
                        ConfigMap {other:?}, not {ns}/{name}: none of this resource's configs \
                        reach the nodes. Apply to point it back."
                ),
            ));
        }
        Some(ClusterView {
            pointer_name: pointer.name,
            default: pointer.default,
            mig_strategy: pointer.mig_strategy,
            mig_strategy_ours: pointer.mig_strategy_ours,
            data,
            operator_namespace: pointer.operand_namespace,
        })
    }

    /// The refreshed state; None when the delivery is gone (terraform plans to create it
    /// again) or after an error diagnostic.
    pub(super) async fn do_read(&self, state: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let State {
            mut args,
            delivered,
            ..
        } = State::from_value(state).or_report_state(diags, REIMPORT)?;
        let c = self.connect(&args, diags).await?;
        let seen = if args.by_gitops() {
            self.observe_gitops(&c, &args, diags).await?
        } else if args.by_helm() {
            self.observe_helm(&c, &args, diags).await?
        } else {
            self.observe_cluster_policy(&c, &args, diags).await?
        };
        // A vanished ConfigMap: the resource is gone and will be created again.
        let cluster_data = seen.data.clone()?;
        let prior_data = delivered.data.unwrap_or_default();
        // The operator reads our data only while the pointer names our ConfigMap.
        let data = if seen.pointer_name.as_deref() == Some(args.name()) {
            reconcile(&prior_data, &cluster_data)
        } else {
            BTreeMap::new()
        };
        let imported = args.config.is_empty();
        if args.default_config.is_some() || imported {
            args.default_config = seen.default.clone();
        }
        if seen.mig_strategy_ours || args.mig_strategy.is_some() {
            args.mig_strategy = seen.mig_strategy.clone();
        }
        if imported {
            // Rebuild the blocks from what the cluster holds.
            args.config = config_blocks(&cluster_data);
        }
        let mut st = state.clone();
        merge(&mut st, &args);
        // helm_values stays consistent with what was read; data is what the cluster holds.
        let mut computed = Computed {
            id: format!("{}/{}", args.namespace(), args.name()),
            data: data.clone(),
            helm_values: String::new(),
        };
        match resolve(&args, &mut Diagnostics::new()) {
            Some(d) => {
                computed.helm_values = d.computed().helm_values;
                warn_operator_mismatch(
                    &d,
                    seen.operator_namespace.as_deref(),
                    seen.mig_strategy.as_deref(),
                    diags,
                );
                self.warn_unknown_labels(&c, &d, diags).await;
            }
            None => computed.helm_values = delivered.helm_values.unwrap_or_default(),
        }
        merge(&mut st, &computed);
        Some(st)
    }
}
