//! The device plugin config's create, update and delete: each bounded by its `timeouts` entry
//! and terraform's stop, logged at start and end, and never losing track of what it wrote.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::cluster::{self as k, KubeError, helm};
use crate::operation::{Cut, StopSignal, bounded};
use tfplugin::object::{Decoded, FromValue, MaybeUnknown, merge};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::delivery::{Writing, kube_diagnostic};
use super::model::{Args, Defaults, Identity, REIMPORT, Restarted, Takeover, resolve};
use super::resource::{DevicePluginConfigResource, TYPE_NAME};
use super::schema::{DEFAULT_NAMESPACE, TIMEOUTS};

/// What the user reads when an operation is cut short, and how long a create cut short may look
/// for what it wrote.
impl Cut {
    pub(super) fn diagnostic(self, op: &str, limit: std::time::Duration) -> Diagnostic {
        match self {
            Cut::Timeout => Diagnostic::error(
                "Operation timed out",
                format!(
                    "The {op} did not finish within {}s; raise timeouts.{op} or check the \
                    cluster. Nothing is lost: the next plan shows what is left to do.",
                    limit.as_secs()
                ),
            )
            .at(AttrPath::attr("timeouts")),
            Cut::Stop => Diagnostic::error(
                "Interrupted",
                format!(
                    "The {op} stopped because terraform was interrupted. Nothing is lost: the \
                    next plan shows what is left to do."
                ),
            ),
        }
    }

    /// How long a create cut short may look for what it wrote: after a stop terraform waits for
    /// the answer, which must come within 2 s.
    pub(super) fn look_limit(self) -> std::time::Duration {
        match self {
            Cut::Timeout => std::time::Duration::from_secs(10),
            Cut::Stop => std::time::Duration::from_secs(1),
        }
    }
}

/// A create, update or delete of the config: bounded by its `timeouts` entry and terraform's
/// stop, logged at start and end.
pub(super) struct Op {
    name: &'static str,
    config_map: String,
    started: std::time::Instant,
    limit: std::time::Duration,
    stop: StopSignal,
}

impl Op {
    pub(super) fn start(name: &'static str, value: &Value, stop: &StopSignal) -> Op {
        // For the log only: the operation reports a value that does not read.
        let config_map = Args::from_value(value)
            .map(|a| format!("{}/{}", a.namespace(), a.name()))
            .unwrap_or_default();
        tracing::info!(config_map = %config_map, operation = name, "device plugin config: starting");
        Op {
            name,
            config_map,
            started: std::time::Instant::now(),
            limit: TIMEOUTS.of(value, name),
            stop: stop.clone(),
        }
    }

    /// How long the operation may take.
    pub(super) fn limit(&self) -> std::time::Duration {
        self.limit
    }

    pub(super) async fn run<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, Cut> {
        bounded(self.limit, &self.stop, work).await
    }

    /// Logs the outcome and hands the work's diagnostics on, plus one when it was cut short.
    pub(super) fn end(&self, cut: Option<Cut>, inner: Diagnostics, diags: &mut Diagnostics) {
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        let (config_map, operation) = (&self.config_map, self.name);
        if cut.is_some() || inner.has_errors() {
            tracing::warn!(config_map = %config_map, operation, elapsed_ms, ?cut, "device plugin config: failed");
        } else {
            tracing::info!(config_map = %config_map, operation, elapsed_ms, "device plugin config: done");
        }
        diags.extend(inner);
        if let Some(c) = cut {
            diags.push(c.diagnostic(self.name, self.limit));
        }
    }
}

impl DevicePluginConfigResource {
    /// The arguments of a plan at apply, when everything is known (but a GitOps delivery's
    /// namespace, the object's destination, read at apply); a diagnostic otherwise.
    fn planned_args(planned: &Value, diags: &mut Diagnostics) -> Option<Args> {
        Args::of_plan(planned).or_report(diags)
    }

    /// The state of a create cut short (timeout or stop) while writing: the plan (tainted) when
    /// its ConfigMap was written, or when helm was started (it finishes on its own), so that
    /// the next apply replaces it and destroy gives the release's values back; else nothing.
    pub(super) async fn written_before_cut(
        &self,
        planned: &Value,
        limit: std::time::Duration,
    ) -> Value {
        let mut quiet = Diagnostics::new();
        // The create read this plan already and reported what does not fit. Read whole, not
        // with `Args::of_plan`: a GitOps plan whose namespace is still unknown reads as nothing
        // here, so such a create cut short keeps no state.
        let Ok(args) = Args::from_value(planned) else {
            return Value::Null;
        };
        let Some(d) = resolve(&args, &mut quiet) else {
            return Value::Null;
        };
        let tainted = || {
            let mut st = planned.unknowns_as_null();
            merge(&mut st, &Restarted::default());
            st
        };
        if d.helm.is_some() || d.gitops.is_some() {
            return tainted();
        }
        let look = async {
            let c = self.connect(&args, &mut quiet).await?;
            c.configmap(&d.namespace, &d.name).await.ok().flatten()
        };
        match tokio::time::timeout(limit, look).await {
            // The cluster could not say: keep the plan, the next refresh drops it if absent.
            Ok(Some(_)) | Err(_) => tainted(),
            Ok(None) => Value::Null,
        }
    }

    /// Sets `writing` once it starts to change the cluster.
    pub(super) async fn do_create(
        &self,
        planned: &Value,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
        writing: &AtomicBool,
        limit: std::time::Duration,
    ) -> Value {
        let (Some(args), Some(mut placed)) = (
            Self::planned_args(planned, diags),
            Defaults::from_value(planned).or_report(diags),
        ) else {
            return Value::Null;
        };
        let Some(d) = resolve(&args, diags) else {
            return Value::Null;
        };
        let Some(c) = self.connect(&args, diags).await else {
            return Value::Null;
        };
        let mut st = planned.clone();
        merge(&mut st, &Restarted::default());
        if d.helm.is_none() && d.gitops.is_none() {
            // Adopting a ConfigMap someone else made would silently take its keys over.
            match c.configmap(&d.namespace, &d.name).await {
                Ok(None) => {}
                Ok(Some(_)) => {
                    diags.push(
                        Diagnostic::error(
                            "ConfigMap already exists",
                            format!(
                                "The ConfigMap {}/{} exists already. Import it (`terraform \
                                import {TYPE_NAME}.<name> {}/{}`) or choose another `name`.",
                                d.namespace, d.name, d.namespace, d.name
                            ),
                        )
                        .at(AttrPath::attr("name")),
                    );
                    return Value::Null;
                }
                Err(e) => {
                    diags.push(kube_diagnostic("read the ConfigMap", d.access, &e));
                    return Value::Null;
                }
            }
        }
        writing.store(true, Ordering::Relaxed);
        let mut w = Writing::new(limit);
        let Some(restarted_at) = self.deliver(&c, &d, taken, true, &mut w, diags).await else {
            // Whatever was written stays in state (tainted), so nothing is orphaned: a release
            // upgraded with our values, or a ConfigMap of ours.
            if w.wrote {
                return st;
            }
            if d.helm.is_some() || d.gitops.is_some() {
                return Value::Null;
            }
            return match c.configmap(&d.namespace, &d.name).await {
                Ok(Some(_)) => st,
                _ => Value::Null,
            };
        };
        self.warn_unknown_labels(&c, &d, diags).await;
        merge(
            &mut st,
            &Restarted {
                restarted_at: MaybeUnknown::Known(restarted_at),
            },
        );
        if !placed.namespace.is_known() {
            // Where the chart installs the operator, as the GitOps object says.
            let ns = w.operator_namespace.clone().unwrap_or_else(|| {
                diags.push(Diagnostic::warning(
                    "Operator namespace not found",
                    format!(
                        "The object that holds the operator's values names no namespace to \
                        install into; this resource records {DEFAULT_NAMESPACE:?}. Set `namespace` \
                        to the operator's."
                    ),
                ));
                DEFAULT_NAMESPACE.to_string()
            });
            merge(
                &mut st,
                &Identity {
                    id: MaybeUnknown::Known(format!("{ns}/{}", d.name)),
                },
            );
            placed.namespace = MaybeUnknown::Known(Some(ns));
            merge(&mut st, &placed);
        }
        st
    }

    pub(super) async fn do_update(
        &self,
        prior: &Value,
        planned: &Value,
        taken: &mut Takeover,
        diags: &mut Diagnostics,
        limit: std::time::Duration,
    ) -> Value {
        let (Some(args), Some(restarted)) = (
            Self::planned_args(planned, diags),
            Restarted::from_value(planned).or_report(diags),
        ) else {
            return prior.clone();
        };
        let Some(d) = resolve(&args, diags) else {
            return prior.clone();
        };
        let Some(c) = self.connect(&args, diags).await else {
            return prior.clone();
        };
        let restart_needed = !restarted.restarted_at.is_known();
        let mut st = planned.clone();
        if restart_needed {
            let mut w = Writing::new(limit);
            let Some(restarted_at) = self.deliver(&c, &d, taken, false, &mut w, diags).await else {
                return prior.clone();
            };
            merge(
                &mut st,
                &Restarted {
                    restarted_at: MaybeUnknown::Known(restarted_at),
                },
            );
        } else {
            // Only the access changed: prove the new credentials work before they are saved.
            let proof = match &d.gitops {
                Some(g) => c.read_holder(&g.holder).await.map(|_| ()),
                None => c.configmap(&d.namespace, &d.name).await.map(|_| ()),
            };
            if let Err(e) = proof {
                diags.push(kube_diagnostic(
                    "read what this resource delivers",
                    d.access,
                    &e,
                ));
                return prior.clone();
            }
        }
        self.warn_unknown_labels(&c, &d, diags).await;
        st
    }

    pub(super) async fn do_delete(
        &self,
        state: &Value,
        taken: &Takeover,
        diags: &mut Diagnostics,
        limit: std::time::Duration,
    ) {
        let Some(args) = Args::from_value(state).or_report_state(diags, REIMPORT) else {
            return;
        };
        let access = args.access();
        let Some(c) = self.connect(&args, diags).await else {
            return;
        };
        let (ns, name) = (args.namespace().to_string(), args.name().to_string());
        let mut operand_ns = ns.clone();
        if args.by_gitops() {
            let Some(d) = resolve(&args, &mut Diagnostics::new()) else {
                return;
            };
            let Some(g) = &d.gitops else { return };
            // Nothing to restart: the controller renders the chart on its own sync.
            self.give_back_gitops_values(&c, &d, g, taken, diags).await;
            return;
        }
        if args.by_helm() {
            let Some(d) = resolve(&args, &mut Diagnostics::new()) else {
                return;
            };
            let Some(h) = &d.helm else { return };
            let mut w = Writing::new(limit);
            if !self
                .give_back_helm_values(&c, &d, h, taken, &mut w, diags)
                .await
            {
                return;
            }
        } else {
            match c.cluster_policy().await {
                Ok(p) => {
                    if let Some(o) = p.operand_namespace {
                        operand_ns = o;
                    }
                    // Give the pointer up only while it is still ours to give.
                    if p.name.as_deref() == Some(name.as_str()) {
                        let give_up = async {
                            for (path, t) in &taken.cluster_policy {
                                if c.holds(path).await? {
                                    c.give_back(path, t).await?;
                                }
                            }
                            // A strategy held with no record of what was there (an imported
                            // config): giving it up would delete it, and the real API server
                            // then refuses the ClusterPolicy ("spec.mig in body must be of type
                            // object"). It goes back to what the operator's Helm release last
                            // rendered there, under the chart's manager; without a release to
                            // ask, it stays as it is.
                            const STRATEGY: &str = "spec.mig.strategy";
                            let mut keep = None;
                            if !taken.cluster_policy.contains_key(STRATEGY)
                                && c.holds(STRATEGY).await?
                            {
                                let now = c.policy_fields(&[STRATEGY]).await?;
                                let now = now.first().and_then(|f| f.value.clone());
                                let rendered = match &p.release {
                                    Some((name, ns)) => match helm::read_release(&c, ns, name)
                                        .await?
                                    {
                                        helm::ReleaseState::Deployed(r) => r
                                            .rendered("ClusterPolicy", k::CLUSTER_POLICY)
                                            .and_then(|o| o.pointer("/spec/mig/strategy").cloned()),
                                        _ => None,
                                    },
                                    None => None,
                                };
                                let manager = c.update_managers().await?.into_iter().next();
                                match (rendered, manager) {
                                    (Some(value), Some(manager))
                                        if Some(&value) != now.as_ref() =>
                                    {
                                        c.give_back(STRATEGY, &k::TakenField { value, manager })
                                            .await?;
                                    }
                                    _ => keep = now.and_then(|v| v.as_str().map(str::to_string)),
                                }
                            }
                            c.release_pointer(keep.as_deref()).await
                        };
                        if let Err(e) = give_up.await {
                            diags.push(kube_diagnostic(
                                "release the ClusterPolicy pointer",
                                access,
                                &e,
                            ));
                            return;
                        }
                    }
                }
                Err(KubeError::MissingCrd) | Err(KubeError::MissingClusterPolicy(_)) => {}
                Err(e) => {
                    diags.push(kube_diagnostic("read the ClusterPolicy", access, &e));
                    return;
                }
            }
            if let Err(e) = c.delete_configmap(&ns, &name).await {
                diags.push(kube_diagnostic("delete the ConfigMap", access, &e));
                return;
            }
        }
        if let Err(e) = c
            .restart_device_plugin(&operand_ns, Some(&name), &k::now_rfc3339())
            .await
        {
            diags.push(kube_diagnostic("restart the device plugin", access, &e));
        }
    }
}
