//! One node's turn, and the batches of turns: cordon, drain (in `drain`), set the config with
//! `pending`, wait for the MIG manager's verdict, uncordon; and what the user is told when a turn
//! ends early, which depends on how far it got (see the folder's doc).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::join_all;

use super::configs::{MIG_CONFIG_LABEL, MIG_STATE_LABEL};
use crate::actions::request::{Halted, call};
use crate::cluster::Cluster;
use crate::cluster::drain::NodeView;
use crate::operation::{Backoff, Check, Interrupted, OpCtx, Start, poll_until};
use crate::state::ProviderState;
use tfplugin::api::Progress;
use tfplugin::{Diagnostic, Diagnostics};

/// Between evictions a budget refused, and between looks at a drain or at the MIG manager.
pub(super) const RETRY: Duration = Duration::from_secs(2);
/// How long an uncordon after an interruption may take: terraform is waiting to exit.
const UNDO_LIMIT: Duration = Duration::from_secs(10);

/// How one node's turn went wrong.
pub(super) struct NodeFailure {
    summary: &'static str,
    detail: String,
}

fn fail(summary: &'static str, detail: String) -> NodeFailure {
    NodeFailure { summary, detail }
}

/// What every node's turn shares.
pub(super) struct Turn<'a> {
    pub(super) c: &'a Cluster,
    pub(super) config: &'a str,
    pub(super) timeout: Duration,
    pub(super) force: bool,
    pub(super) state: &'a ProviderState,
    pub(super) progress: &'a Progress,
}

impl Turn<'_> {
    pub(super) async fn say(&self, node: &str, what: impl std::fmt::Display + Send) {
        self.progress.send(format!("{node}: {what}")).await;
    }

    /// Takes the nodes through the config `width` at a time; the first batch with a failure
    /// ends the action, naming what was done and what was not touched.
    pub(super) async fn in_batches(
        &self,
        todo: &[NodeView],
        width: usize,
        diags: &mut Diagnostics,
    ) {
        let mut finished: Vec<String> = Vec::new();
        let batches: Vec<&[NodeView]> = todo.chunks(width).collect();
        for (i, batch) in batches.iter().enumerate() {
            let results = join_all(batch.iter().map(|n| self.node(n))).await;
            let mut failed = false;
            for (n, r) in batch.iter().zip(results) {
                match r {
                    Ok(()) => finished.push(n.name.clone()),
                    Err(f) => {
                        failed = true;
                        diags.push(Diagnostic::error(f.summary, f.detail));
                    }
                }
            }
            if failed {
                let untouched: Vec<String> = batches[i + 1..]
                    .iter()
                    .flat_map(|b| b.iter().map(|n| n.name.clone()))
                    .collect();
                if !untouched.is_empty() || !finished.is_empty() {
                    diags.push(Diagnostic::warning(
                        "MIG reconfiguration stopped",
                        format!(
                            "Reconfigured to {}: {}. Not touched: {}.",
                            self.config,
                            list_or_none(&finished),
                            list_or_none(&untouched)
                        ),
                    ));
                }
                return;
            }
        }
    }

    /// Undoes this action's cordon (never one that was there before), bounded so that an
    /// interrupted terraform is not kept waiting. Returns what to tell the user.
    async fn undo_cordon(&self, node: &NodeView) -> String {
        if node.unschedulable {
            return format!("{} stays cordoned, as it was before the action.", node.name);
        }
        match bounded_undo(self.c.set_unschedulable(&node.name, false)).await {
            Ok(()) => format!("{} was uncordoned; its GPUs are as they were.", node.name),
            Err(e) => format!(
                "{} could not be uncordoned ({e}): run `kubectl uncordon {}`.",
                node.name, node.name
            ),
        }
    }

    /// Why the MIG manager's verdict was not waited for to the end.
    fn cut_short(&self, name: &str, i: Interrupted, left_cordoned: &str) -> NodeFailure {
        let (summary, why) = match i {
            Interrupted::Stopped => (
                "MIG reconfiguration interrupted",
                "terraform stopped while the MIG manager repartitioned it".to_string(),
            ),
            Interrupted::Timeout { waited, .. } => (
                "MIG reconfiguration timed out",
                format!(
                    "the MIG manager gave no verdict in {}s (is it running on the node?)",
                    waited.as_secs()
                ),
            ),
        };
        fail(summary, format!("Node {name}: {why}. {left_cordoned}"))
    }

    async fn node(&self, node: &NodeView) -> Result<(), NodeFailure> {
        let name = node.name.as_str();
        let ctx = OpCtx::new(self.timeout, self.state.stop.clone());
        if !node.unschedulable {
            self.cordon(node, &ctx).await?;
        }
        if let Err((summary, why)) = self.drain(node, &ctx).await {
            let undone = self.undo_cordon(node).await;
            return Err(fail(summary, format!("{why} {undone}")));
        }
        let left_cordoned = format!(
            "{name} stays cordoned: pods may use it again once {MIG_STATE_LABEL}=success (then \
            `kubectl uncordon {name}`)."
        );
        self.relabel(node, &ctx, &left_cordoned).await?;
        self.verdict(name, &ctx, &left_cordoned).await?;
        self.release(node).await
    }

    async fn cordon(&self, node: &NodeView, ctx: &OpCtx) -> Result<(), NodeFailure> {
        let name = node.name.as_str();
        let Err(halted) = call(ctx, "cordon", self.c.set_unschedulable(name, true)).await else {
            self.say(name, "cordoned").await;
            return Ok(());
        };
        // A request cut short may have landed: undo it either way.
        let undone = self.undo_cordon(node).await;
        Err(match halted {
            Halted::Kube(e) => fail(
                "Kubernetes API error",
                format!("Could not cordon node {name}: {e}. {undone}"),
            ),
            Halted::Interrupted(i) => {
                let (summary, why) =
                    interrupted(i, format!("Node {name} was not cordoned in time."));
                fail(summary, format!("{why} {undone}"))
            }
        })
    }

    /// Sets the config with `pending` in one patch: a `success` left from the last change must
    /// not read as this change's.
    async fn relabel(
        &self,
        node: &NodeView,
        ctx: &OpCtx,
        left_cordoned: &str,
    ) -> Result<(), NodeFailure> {
        let name = node.name.as_str();
        let labels = [
            (MIG_CONFIG_LABEL, Some(self.config)),
            (MIG_STATE_LABEL, Some("pending")),
        ];
        match call(ctx, "label", self.c.label_node(name, &labels)).await {
            Ok(()) => {}
            Err(Halted::Kube(e)) => {
                let undone = self.undo_cordon(node).await;
                return Err(fail(
                    "Kubernetes API error",
                    format!("Could not label node {name}: {e}. {undone}"),
                ));
            }
            // The label may have been written: the node may be repartitioning.
            Err(Halted::Interrupted(i)) => return Err(self.cut_short(name, i, left_cordoned)),
        }
        self.say(name, format!("{MIG_CONFIG_LABEL}={}", self.config))
            .await;
        Ok(())
    }

    /// Looks at the node every [`RETRY`] until its MIG manager reports `success` or `failed`,
    /// telling terraform when the state it reports moves.
    async fn verdict(
        &self,
        name: &str,
        ctx: &OpCtx,
        left_cordoned: &str,
    ) -> Result<(), NodeFailure> {
        // What the last look saw, so that only a change of state makes a progress line.
        let last_state = Mutex::new(String::new());
        let seen = poll_until(
            ctx,
            Backoff::every(RETRY),
            "the MIG manager".to_string(),
            Start::Now,
            |_| {
                let last_state = &last_state;
                async move {
                    let Some(seen) = call(ctx, "read the node", self.c.node(name)).await? else {
                        return Ok(Check::Done(Err(fail(
                            "Node went away",
                            format!(
                                "Node {name} was deleted while its GPUs were being repartitioned."
                            ),
                        ))));
                    };
                    let st = seen.label(MIG_STATE_LABEL).unwrap_or("").to_string();
                    match st.as_str() {
                        "success" => return Ok(Check::Done(Ok(()))),
                        "failed" => return Ok(Check::Done(Err(self.failed(name, left_cordoned)))),
                        _ => {}
                    }
                    let moved = {
                        let mut last = last_state.lock().unwrap_or_else(PoisonError::into_inner);
                        let moved = *last != st;
                        if moved {
                            last.clone_from(&st);
                        }
                        moved
                    };
                    if moved {
                        self.say(name, format!("{MIG_STATE_LABEL}={st}")).await;
                    }
                    Ok(Check::Pending {
                        retry_after: None,
                        waiting_for: None,
                    })
                }
            },
        )
        .await;
        match seen {
            Ok(verdict) => verdict,
            Err(Halted::Kube(e)) => Err(fail(
                "Kubernetes API error",
                format!("Could not read node {name}: {e}. {left_cordoned}"),
            )),
            Err(Halted::Interrupted(i)) => Err(self.cut_short(name, i, left_cordoned)),
        }
    }

    /// The MIG manager's `failed`, with where its reasons are.
    fn failed(&self, name: &str, left_cordoned: &str) -> NodeFailure {
        fail(
            "MIG reconfiguration failed",
            format!(
                "The MIG manager on {name} reports {MIG_STATE_LABEL}=failed for {}. Its logs \
                say why (`kubectl logs -n <operator namespace> -l app=nvidia-mig-manager`, on \
                that node). {left_cordoned}",
                self.config
            ),
        )
    }

    /// Gives the node back to its pods once the verdict is in: the uncordon is not held to the
    /// node's time, only bounded. A node cordoned before the action stays so.
    async fn release(&self, node: &NodeView) -> Result<(), NodeFailure> {
        let name = node.name.as_str();
        if node.unschedulable {
            self.say(
                name,
                format!(
                    "reconfigured to {}; left cordoned, as it was before the action",
                    self.config
                ),
            )
            .await;
            return Ok(());
        }
        if let Err(e) = bounded_undo(self.c.set_unschedulable(name, false)).await {
            return Err(fail(
                "Kubernetes API error",
                format!(
                    "{name} was reconfigured to {} but could not be uncordoned: {e}. Run \
                        `kubectl uncordon {name}`.",
                    self.config
                ),
            ));
        }
        self.say(name, format!("reconfigured to {}, uncordoned", self.config))
            .await;
        Ok(())
    }
}

/// An uncordon after the node's time or a stop: bounded on its own, terraform is waiting.
async fn bounded_undo(
    request: impl std::future::Future<Output = Result<(), crate::cluster::KubeError>>,
) -> Result<(), String> {
    match tokio::time::timeout(UNDO_LIMIT, request).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {}s", UNDO_LIMIT.as_secs())),
    }
}

/// A drain (or the cordon before it) cut short: nothing of the MIG config was changed.
pub(super) fn interrupted(i: Interrupted, timed_out: String) -> (&'static str, String) {
    match i {
        Interrupted::Stopped => (
            "MIG reconfiguration interrupted",
            "Terraform stopped during the drain; the MIG config was not changed.".to_string(),
        ),
        Interrupted::Timeout { waited, .. } => (
            "Drain timed out",
            format!("{timed_out} (after {}s)", waited.as_secs()),
        ),
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
