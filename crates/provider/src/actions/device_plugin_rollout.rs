//! `fracgpu_device_plugin_rollout`: restarts the daemonsets that read the device plugin config
//! and waits until their new pods are ready. The GPU operator does not watch the ConfigMap, so a
//! changed config reaches the nodes only when these pods restart: the device plugin
//! (`nvidia-device-plugin-daemonset`), GPU feature discovery (`gpu-feature-discovery`) and the MPS
//! control daemon (`nvidia-device-plugin-mps-control-daemon`), whose templates all mount the same
//! config (NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml,
//! assets/gpu-feature-discovery/0500_daemonset.yaml,
//! assets/state-mps-control-daemon/0400_daemonset.yaml). A daemonset the operator has not made
//! (MPS off, no GPU node yet) is skipped with a progress line. They restart one after another, so
//! a broken config stops the rollout at the first daemonset that does not come back.
//!
//! With `node_selector` only the selected nodes' pods restart: they are deleted, and the
//! daemonset controller starts new ones there (what `kubectl delete pod` on those nodes does);
//! the template is left alone, so no other node's pods roll.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::request::Halted;
use crate::cluster::drain::PodRef;
use crate::cluster::rollout::RolloutStatus;
use crate::cluster::{self as k, Cluster};
use crate::model::KubernetesArgs;
use crate::operation::{Backoff, Check, Interrupted, OpCtx, Start, poll_until};
use crate::state::ProviderState;
use tfplugin::api::{Action, Progress};
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::IntBetween;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Type, Value};

pub const TYPE_NAME: &str = "fracgpu_device_plugin_rollout";

/// The operator's operands that mount the device plugin config, in the order they restart.
pub const DAEMONSETS: [&str; 3] = k::rollout::OPERANDS;

const DEFAULT_TIMEOUT_S: u32 = 600;

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Restarts the GPU operator's daemonsets that read the device plugin config (the \
            device plugin, GPU feature discovery, the MPS control daemon) and waits until their \
            new pods are ready, reporting progress per daemonset. The operator does not watch its \
            ConfigMap: run this after changing it outside `fracgpu_device_plugin_config`, or tie \
            it to a resource with `action_trigger`.",
        )
        .attr(Attribute::string("namespace").optional().describe(
            "The GPU operator's namespace. Unset: where the ClusterPolicy `cluster-policy` says \
            the operands run (its `status.namespace`, else its Helm release's namespace).",
        ))
        .attr(
            Attribute::new("node_selector", Type::map(Type::String))
                .optional()
                .describe(
                    "Restart only the pods on nodes carrying these labels (e.g. a \
                    `fracgpu_nodepool`'s computed `node_selector`). Unset: every node.",
                ),
        )
        .attr(
            Attribute::number("timeout")
                .optional()
                .validate(IntBetween(10, 7200))
                .describe(
                    "Seconds to wait for all daemonsets together (10 to 7200); default 600. \
                    Pods not back by then are named in the error.",
                ),
        )
        .single_block("kubernetes", super::access::kubernetes_block()),
    )
}

tfplugin::object! {
    struct Args {
        namespace: Known<String>,
        node_selector: Known<std::collections::BTreeMap<String, String>>,
        timeout: Known<u32>,
        kubernetes: SingleBlock<KubernetesArgs>,
    }
}

pub struct DevicePluginRollout {
    state: Arc<ProviderState>,
}

impl DevicePluginRollout {
    pub fn new(state: Arc<ProviderState>) -> DevicePluginRollout {
        DevicePluginRollout { state }
    }

    async fn cluster(&self, args: &Args, diags: &mut Diagnostics) -> Option<Cluster> {
        super::access::connect(&self.state, &args.kubernetes)
            .await
            .map_err(|d| diags.push(d))
            .ok()
    }

    async fn namespace(&self, c: &Cluster, args: &Args, diags: &mut Diagnostics) -> Option<String> {
        if let Some(ns) = &args.namespace.0 {
            return Some(ns.clone());
        }
        match c.cluster_policy().await {
            Ok(p) => match p.operand_namespace {
                Some(ns) => Some(ns),
                None => {
                    diags.push(
                        Diagnostic::error(
                            "GPU operator namespace unknown",
                            "The ClusterPolicy says neither where its operands run \
                            (status.namespace) nor which Helm release made it. Set namespace.",
                        )
                        .at(AttrPath::attr("namespace")),
                    );
                    None
                }
            },
            Err(e) => {
                diags.push(
                    super::access::kube_error("read the ClusterPolicy", &e)
                        .at(AttrPath::attr("namespace")),
                );
                None
            }
        }
    }
}

#[async_trait]
impl Action for DevicePluginRollout {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        let Ok(args) = Args::from_value(config) else {
            return;
        };
        if args.node_selector.0.as_ref().is_some_and(|m| m.is_empty()) {
            diags.push(
                Diagnostic::error(
                    "Empty node_selector",
                    "An empty node_selector selects every node, and would restart every pod at \
                    once. Leave it unset for a rolling restart of every node, or name a pool's \
                    labels.",
                )
                .at(AttrPath::attr("node_selector")),
            );
        }
    }

    async fn invoke(&self, config: &Value, progress: &Progress, diags: &mut Diagnostics) {
        let args = match Args::from_value(config) {
            Ok(a) => a,
            Err(e) => return diags.push(e.diagnostic()),
        };
        let Some(c) = self.cluster(&args, diags).await else {
            return;
        };
        let Some(ns) = self.namespace(&c, &args, diags).await else {
            return;
        };
        let timeout = Duration::from_secs(args.timeout.0.unwrap_or(DEFAULT_TIMEOUT_S).into());
        let ctx = OpCtx::new(timeout, self.state.stop.clone());
        // The daemonsets that mount the ConfigMap the ClusterPolicy names (by their volume),
        // else the operator's operands by name.
        let configmap = c.cluster_policy().await.ok().and_then(|p| p.name);
        let readers = match c
            .config_readers(&ns, configmap.as_deref(), &DAEMONSETS)
            .await
        {
            Ok(r) => r,
            Err(e) => return diags.push(super::access::kube_error("list the daemonsets", &e)),
        };
        let rollout = Rollout {
            c: &c,
            ctx: &ctx,
            ns: &ns,
            progress,
        };
        match &args.node_selector.0 {
            Some(sel) => rollout.on_nodes(sel, &readers, diags).await,
            None => rollout.everywhere(&readers, diags).await,
        }
    }
}

/// What the restart of every daemonset shares: the cluster, the action's time and stop, the
/// operator's namespace, and terraform's progress lines.
struct Rollout<'a> {
    c: &'a Cluster,
    ctx: &'a OpCtx,
    ns: &'a str,
    progress: &'a Progress,
}

impl Rollout<'_> {
    /// The rollout on every node: each daemonset's template is restarted in turn, and waited for.
    async fn everywhere(&self, readers: &[String], diags: &mut Diagnostics) {
        let ns = self.ns;
        let at = k::now_rfc3339();
        let mut restarted = 0;
        for name in readers.iter().map(String::as_str) {
            if self.progress.is_closed() {
                diags.push(Diagnostic::error(
                    "Rollout interrupted",
                    format!("Stopped before restarting {ns}/{name}; the daemonsets before it were restarted."),
                ));
                return;
            }
            match self.c.restart_daemonset(ns, name, &at).await {
                Ok(true) => {}
                Ok(false) => {
                    self.progress
                        .send(format!("{ns}/{name}: not present, skipped"))
                        .await;
                    continue;
                }
                Err(e) => {
                    return diags.push(super::access::kube_error(
                        &format!("restart {ns}/{name}"),
                        &e,
                    ));
                }
            }
            restarted += 1;
            self.progress.send(format!("{ns}/{name}: restarted")).await;
            if let Err(d) = self.rolled_out(name, &at).await {
                return diags.push(d);
            }
        }
        if restarted == 0 {
            // Nothing to restart is not success: the config reaches no node.
            diags.push(Diagnostic::error(
                "No device plugin daemonset",
                format!(
                    "Namespace {ns:?} has none of the daemonsets {}: check namespace (the GPU \
                    operator's namespace), or wait until the operator has a GPU node to run them on.",
                    DAEMONSETS.join(", ")
                ),
            ));
        }
    }

    /// Waits for the daemonset restarted `at` to roll out; the error names the pods not back.
    async fn rolled_out(&self, name: &str, at: &str) -> Result<(), Diagnostic> {
        let ns = self.ns;
        match self.wait(name).await {
            Ok(st) => {
                self.progress
                    .send(format!("{ns}/{name}: rolled out ({st})"))
                    .await;
                Ok(())
            }
            Err(Halted::Kube(e)) => {
                Err(super::access::kube_error(&format!("watch {ns}/{name}"), &e))
            }
            Err(Halted::Interrupted(i)) => {
                let pods = self.c.lagging_pods(ns, name, at).await.unwrap_or_default();
                let named = if pods.is_empty() {
                    String::new()
                } else {
                    format!(" Pods not back: {}.", pods.join(", "))
                };
                let (summary, why) = match i {
                    Interrupted::Timeout { waited, .. } => (
                        "Device plugin rollout timed out",
                        format!("after {}s", waited.as_secs()),
                    ),
                    Interrupted::Stopped => (
                        "Device plugin rollout interrupted",
                        "when terraform stopped".into(),
                    ),
                };
                Err(Diagnostic::error(
                    summary,
                    format!(
                        "{ns}/{name} was restarted but its new pods were not all ready {why}.{named} \
                        Check the pods' events and logs (a config the device plugin refuses \
                        keeps it crashing)."
                    ),
                ))
            }
        }
    }

    /// The rollout on the selected nodes only: their pods are deleted and replaced.
    async fn on_nodes(
        &self,
        selector: &std::collections::BTreeMap<String, String>,
        readers: &[String],
        diags: &mut Diagnostics,
    ) {
        let (c, ns) = (self.c, self.ns);
        let text = super::access::selector_text(selector);
        let at = AttrPath::attr("node_selector");
        let nodes: Vec<String> = match c.nodes_matching(&text).await {
            Ok(n) => n.into_iter().map(|n| n.name).collect(),
            Err(e) => return diags.push(super::access::kube_error("list the nodes", &e).at(at)),
        };
        if nodes.is_empty() {
            return diags.push(
                Diagnostic::error(
                    "No node matches node_selector",
                    format!(
                        "No node of {} carries {text}. Check the pool's labels (a pool scaled to \
                        zero has no pod to restart).",
                        c.target
                    ),
                )
                .at(at),
            );
        }
        let mut restarted = 0;
        for name in readers.iter().map(String::as_str) {
            match self.restart_on(name, &nodes).await {
                Ok(true) => restarted += 1,
                Ok(false) => {}
                Err(d) => return diags.push(d),
            }
        }
        if restarted == 0 {
            diags.push(Diagnostic::error(
                "No device plugin pod on the selected nodes",
                format!(
                    "None of {} has a pod on the nodes carrying {text} in namespace {ns:?}: check \
                    namespace and node_selector.",
                    DAEMONSETS.join(", ")
                ),
            ));
        }
    }

    /// Deletes the daemonset's pods on `nodes` and waits for their replacements: false when it
    /// had none there (or does not exist).
    async fn restart_on(&self, name: &str, nodes: &[String]) -> Result<bool, Diagnostic> {
        let ns = self.ns;
        let (selector, deleted) = match self
            .ctx
            .run(
                "the restart",
                self.c.delete_daemonset_pods_on(ns, name, nodes),
            )
            .await
        {
            Err(_) => return Err(stopped(ns, name)),
            Ok(Ok(Some(found))) => found,
            Ok(Ok(None)) => {
                self.progress
                    .send(format!("{ns}/{name}: not present, skipped"))
                    .await;
                return Ok(false);
            }
            Ok(Err(e)) => {
                return Err(super::access::kube_error(
                    &format!("restart {ns}/{name}"),
                    &e,
                ));
            }
        };
        if deleted.is_empty() {
            self.progress
                .send(format!(
                    "{ns}/{name}: no pod on the selected nodes, skipped"
                ))
                .await;
            return Ok(false);
        }
        let on: Vec<String> = deleted.iter().map(|(_, n)| n.clone()).collect();
        let pods: Vec<_> = deleted.into_iter().map(|(p, _)| p).collect();
        self.progress
            .send(format!("{ns}/{name}: restarted on {}", on.join(", ")))
            .await;
        self.replaced(name, &selector, &on, &pods).await?;
        self.progress
            .send(format!("{ns}/{name}: rolled out on {} nodes", on.len()))
            .await;
        Ok(true)
    }

    /// Looks every half second until each of the nodes `on` runs a new ready pod of the
    /// daemonset (one that is none of the deleted `pods`).
    async fn replaced(
        &self,
        name: &str,
        selector: &str,
        on: &[String],
        pods: &[PodRef],
    ) -> Result<(), Diagnostic> {
        let (c, ns) = (self.c, self.ns);
        // The nodes the last look found without a new ready pod.
        let waiting = std::sync::Mutex::new(on.to_vec());
        let lock = || {
            waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let replaced = poll_until(
            self.ctx,
            Backoff::every(Duration::from_millis(500)),
            "new pods".to_string(),
            Start::Now,
            |_| {
                let lock = &lock;
                async move {
                    let now = lock().clone();
                    let look = c.daemonset_nodes_waiting(ns, selector, &now, pods);
                    match self.ctx.run("new pods", look).await? {
                        Ok(w) if w.is_empty() => Ok(Check::Done(Ok(()))),
                        Ok(w) => {
                            *lock() = w;
                            Ok(Check::Pending {
                                retry_after: None,
                                waiting_for: None,
                            })
                        }
                        Err(e) => Ok(Check::Done(Err(e))),
                    }
                }
            },
        )
        .await;
        match replaced {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(super::access::kube_error(&format!("watch {ns}/{name}"), &e)),
            Err(i) => {
                let why = match i {
                    Interrupted::Timeout { waited, .. } => format!("in {}s", waited.as_secs()),
                    Interrupted::Stopped => "before terraform stopped".into(),
                };
                Err(Diagnostic::error(
                    "Device plugin rollout did not finish",
                    format!(
                        "{ns}/{name}: no new ready pod {why} on {}. Check the pods' events \
                        and logs there.",
                        lock().join(", ")
                    ),
                ))
            }
        }
    }

    /// Polls the daemonset until its rollout is done, telling terraform when its counts move.
    async fn wait(&self, name: &str) -> Result<RolloutStatus, Halted> {
        let (c, ns, progress) = (self.c, self.ns, self.progress);
        // What the last look saw, so that only a change of counts makes a progress line.
        let last = std::sync::Mutex::new(None::<RolloutStatus>);
        poll_until(
            self.ctx,
            Backoff::polling(Duration::from_millis(250), Duration::from_secs(5)),
            format!("the rollout of {ns}/{name}"),
            Start::Now,
            |_| {
                let last = &last;
                async move {
                    let st = c
                        .daemonset_status(ns, name)
                        .await
                        .map_err(Halted::Kube)?
                        .unwrap_or_default();
                    if st.done() {
                        return Ok(Check::Done(st));
                    }
                    let moved = {
                        let mut seen = last
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let moved = seen.as_ref() != Some(&st);
                        *seen = Some(st.clone());
                        moved
                    };
                    if moved {
                        progress.send(format!("{ns}/{name}: {st}")).await;
                    }
                    Ok(Check::Pending {
                        retry_after: None,
                        waiting_for: None,
                    })
                }
            },
        )
        .await
    }
}

/// A restart that the node path could not finish because the time ran out or terraform stopped.
fn stopped(ns: &str, name: &str) -> Diagnostic {
    Diagnostic::error(
        "Device plugin rollout did not finish",
        format!(
            "{ns}/{name}: the deletion of its pods on the selected nodes was cut short (timeout \
            or terraform stopping); some may have restarted."
        ),
    )
}
