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

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use crate::cluster::drain::{Eviction, NodeView, PodRef};
use crate::cluster::{Cluster, KubeError};
use crate::model::KubernetesArgs;
use crate::operation::{Interrupted, OpCtx};
use crate::state::ProviderState;
use tfplugin::api::{Action, Progress};
use tfplugin::object::{FromValue, Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::IntBetween;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Type, Value};

pub const TYPE_NAME: &str = "fracgpu_mig_reconfigure";

/// The label the MIG manager acts on, and the one it reports in.
pub const MIG_CONFIG_LABEL: &str = gpu::MIG_CONFIG_LABEL;
pub const MIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";

const DEFAULT_NODE_TIMEOUT_S: u32 = 1200;
/// Between evictions a budget refused, and between looks at a drain or at the MIG manager.
const RETRY: Duration = Duration::from_secs(2);
/// How long listing the nodes may take when the action runs.
const LOOKUP_LIMIT: Duration = Duration::from_secs(60);
/// How long the plan-time look at the nodes may take.
const PLAN_LOOK_LIMIT: Duration = Duration::from_secs(15);
/// How long an uncordon after an interruption may take: terraform is waiting to exit.
const UNDO_LIMIT: Duration = Duration::from_secs(10);

/// The configs of the GPU operator's default MIG manager ConfigMap that name no single profile
/// (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml).
const WHOLE_GPU_CONFIGS: [&str; 3] = ["all-disabled", "all-enabled", "all-balanced"];

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
            or a config of your own MIG manager ConfigMap.",
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
        .single_block("kubernetes", super::access::kubernetes_block()),
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

/// Checks the config name: a label value, and for `all-<profile>` a profile some GPU has.
fn check_config(config: &str) -> Result<(), String> {
    let label_value = config.len() <= 63
        && !config.is_empty()
        && config
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && config.starts_with(|c: char| c.is_ascii_alphanumeric())
        && config.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !label_value {
        return Err(format!(
            "{config:?} is not a label value (up to 63 letters, digits, '-', '_' or '.', \
            starting and ending with a letter or digit), so it cannot name a MIG manager config."
        ));
    }
    let Some(profile) = profile_of(config) else {
        return Ok(());
    };
    let known = gpu::all_gpu_models()
        .iter()
        .any(|g| g.mig_profile(&profile).is_some());
    if known {
        return Ok(());
    }
    let mut names: Vec<String> = gpu::all_gpu_models()
        .iter()
        .flat_map(|g| g.mig_profiles.iter())
        .map(|p| format!("all-{}", p.name.replace('+', ".")))
        .collect();
    names.sort();
    names.dedup();
    Err(format!(
        "{config:?} names no MIG profile of any GPU. The per-profile configs are: {}; or \
        `all-disabled`.",
        names.join(", ")
    ))
}

/// The profile an `all-<profile>` config splits every GPU into (`+me` restored).
fn profile_of(config: &str) -> Option<String> {
    if WHOLE_GPU_CONFIGS.contains(&config) {
        return None;
    }
    let p = config.strip_prefix("all-")?;
    // A profile is `<n>g.<m>gb`, perhaps with `.me`; anything else is a config of the user's own.
    let looks = p
        .split('.')
        .next()
        .is_some_and(|g| g.ends_with('g') && g[..g.len() - 1].chars().all(|c| c.is_ascii_digit()));
    looks.then(|| match p.strip_suffix(".me") {
        Some(base) => format!("{base}+me"),
        None => p.to_string(),
    })
}

/// The GPU model behind GPU feature discovery's product label, which carries `-SHARED` under
/// time-slicing and `-MIG-<profile>` under the single strategy.
fn model_of(product: &str) -> Option<&'static gpu::GpuModel> {
    let base = product.split("-MIG-").next().unwrap_or(product);
    let base = base.strip_suffix("-SHARED").unwrap_or(base);
    gpu::all_gpu_models().iter().copied().find(|g| {
        g.gpu_product == base
            || gpu::machine_types_of(gpu::Cloud::Eks)
                .chain(gpu::machine_types_of(gpu::Cloud::Aks))
                .chain(gpu::machine_types_of(gpu::Cloud::Gke))
                .any(|m| std::ptr::eq(m.gpu, *g) && m.gpu_product() == base)
    })
}

/// Why a node cannot take the config, before anything is touched.
fn unfit(node: &NodeView, config: &str) -> Option<String> {
    let name = &node.name;
    if node.label("nvidia.com/mig.capable") == Some("false") {
        return Some(format!(
            "node {name} reports nvidia.com/mig.capable=false: its GPUs have no MIG."
        ));
    }
    let profile = profile_of(config)?;
    let Some(product) = node.label("nvidia.com/gpu.product") else {
        return Some(format!(
            "node {name} has no nvidia.com/gpu.product label: GPU feature discovery has not \
            labelled it yet, so neither the action nor the MIG manager knows its GPU."
        ));
    };
    // A GPU the catalog does not know is the MIG manager's to judge.
    let g = model_of(product)?;
    if g.mig_profile(&profile).is_some() {
        return None;
    }
    let offered: Vec<String> = g
        .mig_profiles
        .iter()
        .map(|p| format!("all-{}", p.name.replace('+', ".")))
        .collect();
    Some(if offered.is_empty() {
        format!("node {name} has {product} GPUs, which have no MIG.")
    } else {
        format!(
            "node {name} has {product} GPUs, which have no {profile} profile. Its configs: {}.",
            offered.join(", ")
        )
    })
}

/// Why a node already labelled with the config cannot be taken through it again: the MIG
/// manager acts on a change of the label (and when its pod starts), so writing the same value
/// would wait for a verdict that never comes.
fn stuck(node: &NodeView, config: &str) -> Option<String> {
    if node.label(MIG_CONFIG_LABEL) != Some(config) {
        return None;
    }
    let name = &node.name;
    match node.label(MIG_STATE_LABEL).unwrap_or("") {
        "success" => None,
        "failed" => Some(format!(
            "node {name} carries {MIG_CONFIG_LABEL}={config} already and its MIG manager \
            reports failed. It tries again only when the label changes or its pod restarts: \
            drain the node and delete the nvidia-mig-manager pod on it, or run this action with \
            another config first."
        )),
        state => Some(format!(
            "node {name} is being reconfigured to {config} already ({MIG_STATE_LABEL}={state}); \
            wait for the MIG manager's verdict, then run the action again."
        )),
    }
}

/// Why the action will not take a node through the config, as a diagnostic's summary and
/// detail.
fn refusal(node: &NodeView, config: &str) -> Option<(&'static str, String)> {
    if let Some(why) = unfit(node, config) {
        return Some(("MIG config does not fit the node", why));
    }
    stuck(node, config).map(|why| ("Node already on this MIG config", why))
}

/// How one node's turn went wrong.
struct NodeFailure {
    summary: &'static str,
    detail: String,
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
        let selector_text = super::access::selector_text(selector);
        let look = async {
            let c = super::access::connect(&self.state, &args.kubernetes)
                .await
                .map_err(|d| d.detail)?;
            let nodes = c
                .nodes_matching(&selector_text)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((c.target, nodes))
        };
        let (target, nodes) = match tokio::time::timeout(PLAN_LOOK_LIMIT, look).await {
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
        for (summary, why) in nodes.iter().filter_map(|n| refusal(n, wanted)) {
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
        let c = match super::access::connect(&self.state, &args.kubernetes).await {
            Ok(c) => c,
            Err(d) => return diags.push(d),
        };
        let selector_text = super::access::selector_text(selector);
        // The lookup before any node is touched, held to terraform's stop and a minute.
        let lookup = OpCtx::new(LOOKUP_LIMIT, self.state.stop.clone());
        let nodes = match call(&lookup, "list the nodes", c.nodes_matching(&selector_text)).await {
            Ok(n) => n,
            Err(Cut::Kube(e)) => {
                return diags.push(
                    super::access::kube_error("list the nodes", &e)
                        .at(AttrPath::attr("node_selector")),
                );
            }
            Err(Cut::Interrupted(_)) => {
                return diags.push(Diagnostic::error(
                    "MIG reconfiguration interrupted",
                    "The nodes were not listed before terraform stopped or the minute ran out; \
                    no node was touched.",
                ));
            }
        };
        if nodes.is_empty() {
            return diags.push(
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
        }
        let refused: Vec<_> = nodes.iter().filter_map(|n| refusal(n, config)).collect();
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
        let mut finished: Vec<String> = Vec::new();
        let batches: Vec<&[NodeView]> = todo.chunks(width).collect();
        for (i, batch) in batches.iter().enumerate() {
            let results = join_all(batch.iter().map(|n| turn.node(n))).await;
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
                            "Reconfigured to {config}: {}. Not touched: {}.",
                            list_or_none(&finished),
                            list_or_none(&untouched)
                        ),
                    ));
                }
                return;
            }
        }
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// What every node's turn shares.
struct Turn<'a> {
    c: &'a Cluster,
    config: &'a str,
    timeout: Duration,
    force: bool,
    state: &'a ProviderState,
    progress: &'a Progress,
}

impl Turn<'_> {
    async fn say(&self, node: &str, what: impl std::fmt::Display + Send) {
        self.progress.send(format!("{node}: {what}")).await;
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

    fn fail(&self, summary: &'static str, detail: String) -> NodeFailure {
        NodeFailure { summary, detail }
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
        self.fail(summary, format!("Node {name}: {why}. {left_cordoned}"))
    }

    async fn node(&self, node: &NodeView) -> Result<(), NodeFailure> {
        let name = node.name.as_str();
        let ctx = OpCtx::new(self.timeout, self.state.stop.clone());
        if !node.unschedulable {
            if let Err(cut) = call(&ctx, "cordon", self.c.set_unschedulable(name, true)).await {
                // A request cut short may have landed: undo it either way.
                let undone = self.undo_cordon(node).await;
                return Err(match cut {
                    Cut::Kube(e) => self.fail(
                        "Kubernetes API error",
                        format!("Could not cordon node {name}: {e}. {undone}"),
                    ),
                    Cut::Interrupted(i) => {
                        let (summary, why) =
                            interrupted(i, format!("Node {name} was not cordoned in time."));
                        self.fail(summary, format!("{why} {undone}"))
                    }
                });
            }
            self.say(name, "cordoned").await;
        }
        if let Err((summary, why)) = self.drain(node, &ctx).await {
            let undone = self.undo_cordon(node).await;
            return Err(self.fail(summary, format!("{why} {undone}")));
        }
        let left_cordoned = format!(
            "{name} stays cordoned: pods may use it again once {MIG_STATE_LABEL}=success (then \
            `kubectl uncordon {name}`)."
        );
        let labels = [
            (MIG_CONFIG_LABEL, Some(self.config)),
            (MIG_STATE_LABEL, Some("pending")),
        ];
        match call(&ctx, "label", self.c.label_node(name, &labels)).await {
            Ok(()) => {}
            Err(Cut::Kube(e)) => {
                let undone = self.undo_cordon(node).await;
                return Err(self.fail(
                    "Kubernetes API error",
                    format!("Could not label node {name}: {e}. {undone}"),
                ));
            }
            // The label may have been written: the node may be repartitioning.
            Err(Cut::Interrupted(i)) => return Err(self.cut_short(name, i, &left_cordoned)),
        }
        self.say(name, format!("{MIG_CONFIG_LABEL}={}", self.config))
            .await;
        let mut last_state = String::new();
        loop {
            let seen = match call(&ctx, "read the node", self.c.node(name)).await {
                Ok(Some(n)) => n,
                Ok(None) => {
                    return Err(self.fail(
                        "Node went away",
                        format!("Node {name} was deleted while its GPUs were being repartitioned."),
                    ));
                }
                Err(Cut::Kube(e)) => {
                    return Err(self.fail(
                        "Kubernetes API error",
                        format!("Could not read node {name}: {e}. {left_cordoned}"),
                    ));
                }
                Err(Cut::Interrupted(i)) => return Err(self.cut_short(name, i, &left_cordoned)),
            };
            let st = seen.label(MIG_STATE_LABEL).unwrap_or("").to_string();
            match st.as_str() {
                "success" => break,
                "failed" => {
                    return Err(self.fail(
                        "MIG reconfiguration failed",
                        format!(
                            "The MIG manager on {name} reports {MIG_STATE_LABEL}=failed for \
                            {}. Its logs say why (`kubectl logs -n <operator namespace> -l \
                            app=nvidia-mig-manager`, on that node). {left_cordoned}",
                            self.config
                        ),
                    ));
                }
                _ => {}
            }
            if st != last_state {
                self.say(name, format!("{MIG_STATE_LABEL}={st}")).await;
                last_state = st;
            }
            if let Err(i) = ctx.sleep(RETRY, "the MIG manager").await {
                return Err(self.cut_short(name, i, &left_cordoned));
            }
        }
        // Its verdict is in: the uncordon is not held to the node's time, only bounded.
        if !node.unschedulable
            && let Err(e) = bounded_undo(self.c.set_unschedulable(name, false)).await
        {
            return Err(self.fail(
                "Kubernetes API error",
                format!(
                    "{name} was reconfigured to {} but could not be uncordoned: {e}. Run \
                        `kubectl uncordon {name}`.",
                    self.config
                ),
            ));
        }
        if node.unschedulable {
            self.say(
                name,
                format!(
                    "reconfigured to {}; left cordoned, as it was before the action",
                    self.config
                ),
            )
            .await;
        } else {
            self.say(name, format!("reconfigured to {}, uncordoned", self.config))
                .await;
        }
        Ok(())
    }

    /// Evicts the node's pods until they are gone; the error is a summary and a detail.
    async fn drain(&self, node: &NodeView, ctx: &OpCtx) -> Result<(), (&'static str, String)> {
        let name = node.name.as_str();
        let api = |what: &str, e: KubeError| {
            (
                "Kubernetes API error",
                format!("Could not {what} on node {name}: {e}."),
            )
        };
        let cut = |what: &str, c: Cut| match c {
            Cut::Kube(e) => api(what, e),
            Cut::Interrupted(i) => interrupted(
                i,
                format!("Node {name} could not be drained: the request to {what} did not finish."),
            ),
        };
        let plan = call(ctx, "list the pods", self.c.drain_plan(name))
            .await
            .map_err(|c| cut("list the pods", c))?;
        let mut evict = plan.evict.clone();
        if !plan.unowned.is_empty() {
            if !self.force {
                return Err((
                    "Pods without a controller",
                    format!(
                        "Node {name} runs pods no controller owns, which an eviction would \
                        delete for good: {}. Move them, or set force = true to evict them \
                        anyway.",
                        join(&plan.unowned)
                    ),
                ));
            }
            evict.extend(plan.unowned.iter().cloned());
        }
        let mut pending = evict.clone();
        let mut told = String::new();
        while !pending.is_empty() {
            let mut still = Vec::new();
            let mut why = String::new();
            for p in pending {
                match call(ctx, "evict", self.c.evict(&p)).await {
                    Ok(Eviction::Done) => self.say(name, format!("evicted {p}")).await,
                    Ok(Eviction::Refused(m)) => {
                        why = m;
                        still.push(p);
                    }
                    Err(c) => return Err(cut(&format!("evict {p}"), c)),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            if why != told {
                self.say(
                    name,
                    format!("eviction of {} refused for now: {why}", join(&pending)),
                )
                .await;
                told = why.clone();
            }
            if let Err(i) = ctx.sleep(RETRY, "evictions").await {
                return Err(interrupted(
                    i,
                    format!(
                        "Node {name} could not be drained: the eviction of {} was refused \
                        ({why}). A PodDisruptionBudget allows no disruption now: wait until \
                        its pods are healthy elsewhere, or raise node_timeout.",
                        join(&pending)
                    ),
                ));
            }
        }
        let mut wait: Vec<PodRef> = evict;
        wait.extend(plan.terminating.iter().cloned());
        loop {
            let left = call(ctx, "read the evicted pods", self.c.pods_still_there(&wait))
                .await
                .map_err(|c| cut("read the evicted pods", c))?;
            if left.is_empty() {
                break;
            }
            if let Err(i) = ctx.sleep(RETRY, "evicted pods to end").await {
                return Err(interrupted(
                    i,
                    format!(
                        "Node {name} could not be drained: these pods were evicted but have \
                        not ended: {} (their termination grace period, or a finalizer).",
                        join(&left)
                    ),
                ));
            }
        }
        let n = wait.len();
        let pods = if n == 1 { "pod" } else { "pods" };
        self.say(name, format!("drained ({n} {pods} gone)")).await;
        Ok(())
    }
}

/// A request of a node's turn that did not succeed: the API's error, or the node's time or
/// terraform's stop came first.
enum Cut {
    Kube(KubeError),
    Interrupted(Interrupted),
}

/// Holds a request to the node's time and terraform's stop: the kube client's own retries of a
/// 503 (an API server restarting) could otherwise outlast both.
async fn call<T>(
    ctx: &OpCtx,
    what: &str,
    request: impl std::future::Future<Output = Result<T, KubeError>>,
) -> Result<T, Cut> {
    match ctx.run(what, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Cut::Kube(e)),
        Err(i) => Err(Cut::Interrupted(i)),
    }
}

/// An uncordon after the node's time or a stop: bounded on its own, terraform is waiting.
async fn bounded_undo(
    request: impl std::future::Future<Output = Result<(), KubeError>>,
) -> Result<(), String> {
    match tokio::time::timeout(UNDO_LIMIT, request).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {}s", UNDO_LIMIT.as_secs())),
    }
}

fn interrupted(i: Interrupted, timed_out: String) -> (&'static str, String) {
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

fn join(pods: &[PodRef]) -> String {
    pods.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> NodeView {
        NodeView {
            name: "n1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            unschedulable: false,
        }
    }

    #[test]
    fn configs_are_label_values_and_profiles_some_gpu_has() {
        assert!(check_config("all-1g.10gb").is_ok());
        assert!(check_config("all-1g.10gb.me").is_ok());
        assert!(check_config("all-disabled").is_ok());
        assert!(check_config("my-custom-layout").is_ok());
        let e = check_config("all-9g.99gb").unwrap_err();
        assert!(
            e.contains("all-1g.5gb") && e.contains("all-disabled"),
            "{e}"
        );
        assert!(check_config("all 1g").unwrap_err().contains("label value"));
        assert!(check_config("").is_err());
    }

    #[test]
    fn a_node_already_labelled_is_done_or_stuck() {
        let at = |state: &str| node(&[(MIG_CONFIG_LABEL, "all-1g.5gb"), (MIG_STATE_LABEL, state)]);
        assert_eq!(stuck(&at("success"), "all-1g.5gb"), None);
        assert!(
            stuck(&at("failed"), "all-1g.5gb")
                .is_some_and(|e| e.contains("nvidia-mig-manager pod"))
        );
        assert!(stuck(&at("pending"), "all-1g.5gb").is_some_and(|e| e.contains("pending")));
        // Another config is a change the MIG manager acts on.
        assert_eq!(stuck(&at("failed"), "all-2g.10gb"), None);
    }

    #[test]
    fn a_profile_must_fit_the_node_gpu() {
        let a100_40 = node(&[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB")]);
        assert_eq!(unfit(&a100_40, "all-1g.5gb"), None);
        let e = unfit(&a100_40, "all-1g.20gb").expect("no 1g.20gb on an A100 40GB");
        assert!(e.contains("n1") && e.contains("all-1g.5gb"), "{e}");
        // GFD's renamed product under the single strategy still names the hardware.
        let renamed = node(&[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")]);
        assert_eq!(unfit(&renamed, "all-2g.10gb"), None);
        let t4 = node(&[("nvidia.com/gpu.product", "Tesla-T4")]);
        assert!(unfit(&t4, "all-1g.5gb").is_some_and(|e| e.contains("no MIG")));
        let no_mig = node(&[("nvidia.com/mig.capable", "false")]);
        assert!(unfit(&no_mig, "all-disabled").is_some());
        assert!(unfit(&node(&[]), "all-1g.5gb").is_some_and(|e| e.contains("gpu.product")));
        // Whole-GPU configs and the user's own are the MIG manager's to judge.
        assert_eq!(unfit(&node(&[]), "all-disabled"), None);
        assert_eq!(unfit(&node(&[]), "my-layout"), None);
    }
}
