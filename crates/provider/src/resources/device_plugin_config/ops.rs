//! The device plugin config's create, update and delete: each bounded by its `timeouts` entry
//! and terraform's stop, logged at start and end, and never losing track of what it wrote. What
//! each step does on the cluster is the delivery's (`delivery`); here, what every delivery's
//! create, update and delete have in common, and the device plugin restart after them.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::cluster::{self as k};
use crate::operation::{Cut, StopSignal, bounded};
use tfplugin::object::{Decoded, FromValue, MaybeUnknown, merge};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::delivery::{At, Delivery, Lifecycle, Reload, Takeover, Writing, refuse_dra_stack};
use super::diagnostics::{ignored_by_plugin, kube_diagnostic, warn_unknown_labels};
use super::model::{Args, Defaults, Identity, REIMPORT, Restarted, resolve, stored};
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
    /// its ConfigMap was written, or when helm or a controller was set to work (it finishes on
    /// its own), so that the next apply replaces it and destroy gives the values back; else
    /// nothing.
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
        let Some(r) = resolve(&args, &mut quiet) else {
            return Value::Null;
        };
        let tainted = || {
            let mut st = planned.unknowns_as_null();
            merge(&mut st, &Restarted::default());
            st
        };
        if !r.delivery.life().own_configmap() {
            return tainted();
        }
        let d = &r.desired;
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
        let (Some(args), Some(placed)) = (
            Self::planned_args(planned, diags),
            Defaults::from_value(planned).or_report(diags),
        ) else {
            return Value::Null;
        };
        let Some(r) = resolve(&args, diags) else {
            return Value::Null;
        };
        let Some(c) = self.connect(&args, diags).await else {
            return Value::Null;
        };
        let (d, life) = (&r.desired, r.delivery.life());
        let at = self.at(&c, d);
        let mut st = planned.clone();
        merge(&mut st, &Restarted::default());
        if life.own_configmap() && !Self::configmap_is_free(&at, &r.delivery, diags).await {
            return Value::Null;
        }
        writing.store(true, Ordering::Relaxed);
        let mut w = Writing::new(limit, true);
        let Some(restarted_at) = deliver(&at, life, taken, &mut w, diags).await else {
            // Whatever was written stays in state (tainted), so nothing is orphaned: a release
            // upgraded with our values, or a ConfigMap of ours.
            if w.wrote {
                return st;
            }
            if !life.own_configmap() {
                return Value::Null;
            }
            return match c.configmap(&d.namespace, &d.name).await {
                Ok(Some(_)) => st,
                _ => Value::Null,
            };
        };
        warn_unknown_labels(&c, d, diags).await;
        merge(
            &mut st,
            &Restarted {
                restarted_at: MaybeUnknown::Known(restarted_at),
            },
        );
        if !placed.namespace.is_known() {
            place(&mut st, placed, &w, &d.name, diags);
        }
        st
    }

    /// Adopting a ConfigMap someone else made would silently take its keys over: false after a
    /// diagnostic.
    async fn configmap_is_free(at: &At<'_>, delivery: &Delivery, diags: &mut Diagnostics) -> bool {
        let d = at.desired;
        match at.cluster.configmap(&d.namespace, &d.name).await {
            Ok(None) => true,
            Ok(Some(_)) => {
                diags.push(
                    Diagnostic::error(
                        "ConfigMap already exists",
                        format!(
                            "The ConfigMap {}/{} exists already. Import it (`terraform \
                            import {TYPE_NAME}.<name> {}`) or choose another `name`.",
                            d.namespace,
                            d.name,
                            delivery.import_id(&d.namespace, &d.name)
                        ),
                    )
                    .at(AttrPath::attr("name")),
                );
                false
            }
            Err(e) => {
                diags.push(kube_diagnostic("read the ConfigMap", d.access, &e));
                false
            }
        }
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
        let Some(r) = resolve(&args, diags) else {
            return prior.clone();
        };
        let Some(c) = self.connect(&args, diags).await else {
            return prior.clone();
        };
        let (d, life) = (&r.desired, r.delivery.life());
        let at = self.at(&c, d);
        let restart_needed = !restarted.restarted_at.is_known();
        let mut st = planned.clone();
        if restart_needed {
            let mut w = Writing::new(limit, false);
            let Some(restarted_at) = deliver(&at, life, taken, &mut w, diags).await else {
                return prior.clone();
            };
            merge(
                &mut st,
                &Restarted {
                    restarted_at: MaybeUnknown::Known(restarted_at),
                },
            );
        } else if let Err(e) = life.prove_access(&at).await {
            // Only the access changed: prove the new credentials work before they are saved.
            diags.push(kube_diagnostic(
                "read what this resource delivers",
                d.access,
                &e,
            ));
            return prior.clone();
        }
        warn_unknown_labels(&c, d, diags).await;
        st
    }

    /// Gives back what the delivery took over, then restarts the device plugin where the
    /// delivery says.
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
        let Some(c) = self.connect(&args, diags).await else {
            return;
        };
        let Some(r) = stored(&args) else {
            return;
        };
        let d = &r.desired;
        let at = self.at(&c, d);
        let mut w = Writing::new(limit, false);
        let Some(reload) = r.delivery.life().restore(&at, taken, &mut w, diags).await else {
            return;
        };
        if let Reload::Restart(ns) = reload
            && let Err(e) = c
                .restart_device_plugin(&ns, Some(&d.name), &k::now_rfc3339())
                .await
        {
            diags.push(kube_diagnostic("restart the device plugin", d.access, &e));
        }
    }
}

/// Writes the desired config to the cluster and restarts the plugin where the delivery says;
/// returns restarted_at (None when nothing was restarted). `w.wrote` is set once something of
/// this resource is in the cluster, even when a later step fails, so that a create keeps it in
/// state.
async fn deliver(
    at: &At<'_>,
    life: &dyn Lifecycle,
    taken: &mut Takeover,
    w: &mut Writing,
    diags: &mut Diagnostics,
) -> Option<Option<String>> {
    if life.through_operator() {
        refuse_dra_stack(at.cluster, diags).await?;
    }
    let reload = life.write(at, taken, w, diags).await?;
    warn_ignored_by_plugin(life, at, diags).await;
    let operand_ns = match reload {
        Reload::OnSync => return Some(None),
        Reload::Restart(ns) => ns,
    };
    let d = at.desired;
    match at
        .cluster
        .restart_device_plugin(&operand_ns, Some(&d.name), &k::now_rfc3339())
        .await
    {
        Ok(Some(time)) => Some(Some(time)),
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
            diags.push(kube_diagnostic("restart the device plugin", d.access, &e));
            None
        }
    }
}

/// After a write: warns of the settings of the configs that the device plugin release the
/// cluster runs passes over. The release is looked up only when a config has such a setting
/// for some release (most have none, and the standalone chart's takes reading its release).
async fn warn_ignored_by_plugin(life: &dyn Lifecycle, at: &At<'_>, diags: &mut Diagnostics) {
    use gpu::device_plugin::releases::{OLDEST, ignored_by};
    let d = at.desired;
    if d.configs.values().all(|c| ignored_by(c, OLDEST).is_empty()) {
        return;
    }
    if let Some((version, source)) = life.plugin_version(at).await
        && let Some(warning) = ignored_by_plugin(d, &version, &source)
    {
        diags.push(warning);
    }
}

/// Records the namespace a GitOps object said it installs the operator into (the plan left it
/// to the apply), and the ID that follows from it.
fn place(st: &mut Value, mut placed: Defaults, w: &Writing, name: &str, diags: &mut Diagnostics) {
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
        st,
        &Identity {
            id: MaybeUnknown::Known(format!("{ns}/{name}")),
        },
    );
    placed.namespace = MaybeUnknown::Known(Some(ns));
    merge(st, &placed);
}
