//! `fracgpu_mig_reconfigure`: changes the MIG geometry of a pool's nodes a few at a time, without
//! pulling the GPUs from under running pods. Where the GPU operator's MIG manager partitions the
//! GPUs (EKS, Karpenter pools, AKS and GKE pools given a `nvidia.com/mig.config` label), changing
//! that label repartitions at once: the MIG manager "assumes that some higher level entity is
//! coordinating" (NVIDIA/gpu-operator#262), and repartitioning fails or kills the work of pods
//! still using the GPU. Per node the action does what an operator would do by hand: cordon; drain
//! with evictions (which PodDisruptionBudgets can refuse, and are then tried again); set the
//! label; wait for the MIG manager's verdict in `nvidia.com/mig.config.state`; uncordon.
//!
//! The MIG manager (NVIDIA/mig-parted pkg/mig/reconfigure/reconfigure.go, `Run`) answers every
//! change of the label it acts on with `success` (at once when the config is already applied) or
//! `failed`, going through `pending` (and `rebooting`) on the way. A `success` left from the last
//! change must not read as this change's, so the action writes `pending` with the new config in
//! one patch: only the MIG manager's own verdict ends the wait.
//!
//! Interrupted (Ctrl-C), the action uncordons the node it was draining (its GPUs are untouched),
//! and leaves a node whose repartitioning it started cordoned, naming it: only the MIG manager's
//! verdict says when pods may use that node again.
//!
//! Here, the action's schema, checks and run; `configs` judges config names and nodes, `offered`
//! reads which configs each node's MIG manager has, `turn`
//! takes one node through its turn, `drain` empties a node first.

mod configs;
mod drain;
mod offered;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::access;
use super::request::{Halted, call};
use crate::cluster::Cluster;
use crate::cluster::drain::NodeView;
use crate::model::KubernetesArgs;
use crate::operation::OpCtx;
use crate::state::ProviderState;
pub use configs::{MIG_CONFIG_LABEL, MIG_STATE_LABEL};
use configs::{check_config, refusal};
use tfplugin::api::{Action, Progress};
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::IntBetween;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Type, Value};
use turn::Turn;

pub const TYPE_NAME: &str = "fracgpu_mig_reconfigure";

const DEFAULT_NODE_TIMEOUT_S: u32 = 1200;
/// How long listing the nodes may take when the action runs.
const LOOKUP_LIMIT: Duration = Duration::from_secs(60);
/// How long the plan-time look at the nodes may take.
const PLAN_LOOK_LIMIT: Duration = Duration::from_secs(15);

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Changes the MIG geometry of the selected nodes through the GPU operator's MIG \
            manager, a few nodes at a time: cordon, drain (evictions that respect \
            PodDisruptionBudgets), set `nvidia.com/mig.config`, wait for \
            `nvidia.com/mig.config.state=success`, uncordon. A node whose MIG manager reports \
            `failed` stays cordoned and stops the action; so does one still repartitioning when \
            the action is interrupted, and the error names it. Nodes the pool adds later take the \
            pool's own MIG setting (`fracgpu_nodepool`'s `mig.profile`): keep the two the same.",
        )
        .attr(
            Attribute::new("node_selector", Type::map(Type::String))
                .required()
                .describe(
                    "Labels the nodes must carry, e.g. a `fracgpu_nodepool`'s computed \
                    `node_selector`. Nodes that already report the config are left alone.",
                ),
        )
        .attr(Attribute::string("config").required().describe(
            "The MIG manager config to apply: `all-<profile>` (every GPU split into one \
            profile, `+me` written `.me`, e.g. `all-1g.10gb`), `all-disabled`, `all-balanced`, \
            or a config of your own MIG manager ConfigMap. It must be where each node's MIG \
            manager looks, which is checked before any node is cordoned: the ConfigMap the \
            ClusterPolicy names in `spec.migManager.config.name`, or, where it names none (GPU \
            operator v26.3 and later), the configs the manager generated from the node's GPUs \
            (`<node>-mig-config` in the operator's namespace: `all-disabled`, `all-enabled`, \
            `all-balanced` and one `all-<profile>` per profile of that GPU).",
        ))
        .attr(
            Attribute::number("max_unavailable")
                .optional()
                .validate(IntBetween(1, 100))
                .describe("Nodes reconfigured at the same time (1 to 100); default 1."),
        )
        .attr(
            Attribute::number("node_timeout")
                .optional()
                .validate(IntBetween(30, 14400))
                .describe(
                    "Seconds one node may take, drain and repartitioning together (30 to \
                    14400); default 1200. A drain that does not finish in time uncordons the \
                    node and fails naming the pods still there.",
                ),
        )
        .attr(Attribute::bool("force").optional().describe(
            "Also evict pods no controller owns (as `kubectl drain --force`): they do not come \
            back. Unset, such a pod stops the action before its node is touched.",
        ))
        .single_block("kubernetes", access::kubernetes_block()),
    )
}

tfplugin::object! {
    struct Args {
        node_selector: Known<std::collections::BTreeMap<String, String>>,
        config: Known<String>,
        max_unavailable: Known<u32>,
        node_timeout: Known<u32>,
        force: Known<bool>,
        kubernetes: SingleBlock<KubernetesArgs>,
    }
}

pub struct MigReconfigure {
    state: Arc<ProviderState>,
}

impl MigReconfigure {
    pub fn new(state: Arc<ProviderState>) -> MigReconfigure {
        MigReconfigure { state }
    }
}

#[async_trait]
impl Action for MigReconfigure {
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
        if let Some(c) = &args.config.0
            && let Err(why) = check_config(c)
        {
            diags.push(Diagnostic::error("Invalid MIG config", why).at(AttrPath::attr("config")));
        }
        if args.node_selector.0.as_ref().is_some_and(|m| m.is_empty()) {
            diags.push(
                Diagnostic::error(
                    "Empty node_selector",
                    "An empty node_selector selects every node of the cluster. Name the \
                    pool's labels, e.g. node_selector = fracgpu_nodepool.<name>.node_selector.",
                )
                .at(AttrPath::attr("node_selector")),
            );
        }
    }

    /// At plan time, the nodes as they are now: a profile that does not fit a node, or a node
    /// stuck on the config, is an error then already. A selector that matches nothing yet, or a
    /// cluster that cannot be read yet, is only a warning: a triggered action may act on a pool
    /// the same apply creates.
    async fn plan(&self, config: &Value, diags: &mut Diagnostics) {
        if !config.is_fully_known() {
            return;
        }
        let Ok(args) = Args::from_value(config) else {
            return;
        };
        let (Some(selector), Some(wanted)) = (&args.node_selector.0, &args.config.0) else {
            return;
        };
        if check_config(wanted).is_err() {
            return;
        }
        let selector_text = access::selector_text(selector);
        let look = async {
            let c = access::connect(&self.state, &args.kubernetes)
                .await
                .map_err(|d| d.detail)?;
            let nodes = c
                .nodes_matching(&selector_text)
                .await
                .map_err(|e| e.to_string())?;
            let offered = offered::offered(&c, &nodes).await;
            Ok::<_, String>((c.target, nodes, offered))
        };
        let (target, nodes, offered) = match tokio::time::timeout(PLAN_LOOK_LIMIT, look).await {
            Ok(Ok(found)) => found,
            Ok(Err(why)) => {
                return diags.push(Diagnostic::warning(
                    "Nodes not checked at plan time",
                    format!("The cluster could not be read now ({why}); the action checks its nodes when it runs."),
                ));
            }
            Err(_) => {
                return diags.push(Diagnostic::warning(
                    "Nodes not checked at plan time",
                    format!(
                        "The cluster did not answer in {}s; the action checks its nodes when it runs.",
                        PLAN_LOOK_LIMIT.as_secs()
                    ),
                ));
            }
        };
        if nodes.is_empty() {
            return diags.push(
                Diagnostic::warning(
                    "No node matches node_selector yet",
                    format!(
                        "No node of {target} carries {selector_text} now. Unless the pool's nodes \
                        exist by the time the action runs, it will fail."
                    ),
                )
                .at(AttrPath::attr("node_selector")),
            );
        }
        let refused = nodes
            .iter()
            .filter_map(|n| refusal(n, wanted, offered.get(&n.name)));
        for (summary, why) in refused {
            diags.push(Diagnostic::error(summary, why).at(AttrPath::attr("config")));
        }
    }

    async fn invoke(&self, config: &Value, progress: &Progress, diags: &mut Diagnostics) {
        let args = match Args::from_value(config) {
            Ok(a) => a,
            Err(e) => return diags.push(e.diagnostic()),
        };
        let (Some(selector), Some(config)) = (&args.node_selector.0, &args.config.0) else {
            return;
        };
        let c = match access::connect(&self.state, &args.kubernetes).await {
            Ok(c) => c,
            Err(d) => return diags.push(d),
        };
        let Some(nodes) = self.nodes(&c, selector, diags).await else {
            return;
        };
        // Where the MIG managers read their configs: what cannot be read in time (or before
        // terraform stops) is left to their verdict.
        let look = offered::offered(&c, &nodes);
        let offered = crate::operation::bounded(LOOKUP_LIMIT, &self.state.stop, look)
            .await
            .unwrap_or_default();
        let refused: Vec<_> = nodes
            .iter()
            .filter_map(|n| refusal(n, config, offered.get(&n.name)))
            .collect();
        if !refused.is_empty() {
            for (summary, why) in refused {
                diags.push(Diagnostic::error(summary, why).at(AttrPath::attr("config")));
            }
            return;
        }
        let (done, todo): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|n| {
            n.label(MIG_CONFIG_LABEL) == Some(config.as_str())
                && n.label(MIG_STATE_LABEL) == Some("success")
        });
        for n in &done {
            progress
                .send(format!("{}: already at {config}, left alone", n.name))
                .await;
        }
        let turn = Turn {
            c: &c,
            config,
            timeout: Duration::from_secs(
                args.node_timeout.0.unwrap_or(DEFAULT_NODE_TIMEOUT_S).into(),
            ),
            force: args.force.0.unwrap_or(false),
            state: &self.state,
            progress,
        };
        let width = args.max_unavailable.0.unwrap_or(1).max(1) as usize;
        turn.in_batches(&todo, width, diags).await;
    }
}

impl MigReconfigure {
    /// The nodes the selector matches, listed before any node is touched: held to terraform's
    /// stop and a minute. None (with the error in `diags`) when there are none to act on.
    async fn nodes(
        &self,
        c: &Cluster,
        selector: &std::collections::BTreeMap<String, String>,
        diags: &mut Diagnostics,
    ) -> Option<Vec<NodeView>> {
        let selector_text = access::selector_text(selector);
        let lookup = OpCtx::new(LOOKUP_LIMIT, self.state.stop.clone());
        let nodes = match call(&lookup, "list the nodes", c.nodes_matching(&selector_text)).await {
            Ok(n) => n,
            Err(Halted::Kube(e)) => {
                diags.push(
                    access::kube_error("list the nodes", &e).at(AttrPath::attr("node_selector")),
                );
                return None;
            }
            Err(Halted::Interrupted(_)) => {
                diags.push(Diagnostic::error(
                    "MIG reconfiguration interrupted",
                    "The nodes were not listed before terraform stopped or the minute ran out; \
                    no node was touched.",
                ));
                return None;
            }
        };
        if nodes.is_empty() {
            diags.push(
                Diagnostic::error(
                    "No node matches node_selector",
                    format!(
                        "No node of {} carries {selector_text}. Check the pool's name and \
                        labels (a pool scaled to zero has no node to reconfigure).",
                        c.target
                    ),
                )
                .at(AttrPath::attr("node_selector")),
            );
            return None;
        }
        Some(nodes)
    }
}
