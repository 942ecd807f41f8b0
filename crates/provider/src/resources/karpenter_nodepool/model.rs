//! The typed model of `fracgpu_karpenter_nodepool`, the way from its arguments to the objects
//! `render` makes ([`resolve`]), the provisioner's block read by its kind (`provisioner`), and the two things that let the cluster
//! answer for the state: the fields of each object the provider sets, read back as JSON
//! ([`project`]), and the declaration the NodePool carries for import ([`declaration`]).

use std::collections::BTreeMap;

use crate::model::{KubernetesArgs, Sharing, TaintArgs, TolerationOut, domain_diagnostic};
use tfplugin::object::{FromValue, Known, SingleBlock, ToValue};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::problem::Problem;
use super::provisioner::registry::ProvisionerBlock;
use super::render::{self as kp, Budget, Disruption, KarpenterPool, Rendered};
use super::schema::{CAPACITY_TYPES, DEFAULT_CAPACITY_TYPE};

/// The annotation on the NodePool that holds the arguments it was made from (never the
/// `kubernetes` block, which may hold credentials), so that an import gets them back exactly.
pub(crate) const DECLARATION: &str = "fracgpu.dev/declaration";

/// The last fix for a state that does not read.
pub(super) const REIMPORT: &str =
    "re-import the pool (`terraform import` with the NodePool's name)";

tfplugin::object! {
    /// One `disruption.budget`.
    pub struct BudgetArgs {
        pub nodes: String,
        pub schedule: Option<String>,
        pub duration: Option<String>,
    }
}

tfplugin::object! {
    /// The `disruption` block.
    pub struct DisruptionArgs {
        pub consolidation_policy: Known<String>,
        pub consolidate_after: Known<String>,
        pub budget: Vec<BudgetArgs>,
    }
}

tfplugin::object! {
    /// The arguments, as a configuration, plan or state holds them.
    pub struct Args {
        pub name: String,
        pub gpu_model: String,
        pub gpu_counts: Vec<u32>,
        pub capacity_types: Known<Vec<String>>,
        pub limit_gpus: Option<u32>,
        pub weight: Option<u32>,
        pub labels: Option<BTreeMap<String, String>>,
        pub taints: Option<Vec<TaintArgs>>,
        pub disruption: SingleBlock<DisruptionArgs>,
        pub kubernetes: SingleBlock<KubernetesArgs>,
        /// The config name the pool's nodes carry now (computed; a plan's or a state's): kept
        /// while the settings it names hold (`gpu::Derived::keep_config_name`).
        pub device_plugin_config_name: Known<String>,
    }
    flatten {
        pub sharing: Sharing,
        /// The provisioner's block (`eks`, `aks`), which its kind reads.
        pub provisioner: ProvisionerBlock,
    }
}

tfplugin::object! {
    /// What the pool derives, known at plan time, and what the cluster holds of its objects.
    pub struct Computed {
        pub id: String,
        pub resource_name: String,
        pub slices_per_gpu: u32,
        pub memory_per_slice_mb: u32,
        pub node_capacity: BTreeMap<String, u32>,
        pub limits: BTreeMap<String, u32>,
        pub node_selector: BTreeMap<String, String>,
        pub tolerations: Vec<TolerationOut>,
        pub node_labels: BTreeMap<String, String>,
        pub device_plugin_config_name: Option<String>,
        pub device_plugin_config: Option<String>,
        pub objects: BTreeMap<String, String>,
        pub node_overlay_gate: String,
    }
}

tfplugin::object! {
    /// The identity: the NodePool's name.
    pub struct PoolIdentity {
        pub name: Option<String>,
    }
}

/// What a known configuration, plan or state asks for.
pub(super) struct Desired {
    pub(super) pool: KarpenterPool,
    pub(super) rendered: Rendered,
    /// The gate the rendering assumed.
    pub(super) gate: Gate,
}

impl Desired {
    /// The objects the pool owns, in the order they are written: the node class it makes, the
    /// overlays, then the NodePool, so that Karpenter never sees the pool without what tells it
    /// a node's slices. Deleted in the reverse order.
    pub(super) fn owned(&self) -> Vec<serde_json::Value> {
        let r = &self.rendered;
        let mut out: Vec<serde_json::Value> = r.node_class.iter().cloned().collect();
        out.extend(r.overlays.iter().cloned());
        out.push(r.node_pool.clone());
        out
    }

    /// [`Desired::owned`], the NodePool carrying the declaration.
    pub(super) fn to_write(&self, args: &Args) -> Vec<serde_json::Value> {
        let mut out = self.owned();
        if let Some(pool) = out.last_mut() {
            pool["metadata"]["annotations"] = serde_json::json!({ DECLARATION: declaration(args) });
        }
        out
    }

    /// The computed attributes, with `objects` as given.
    pub(super) fn computed(&self, objects: BTreeMap<String, String>) -> Computed {
        let r = &self.rendered;
        let d = &r.derived;
        let config = d
            .device_plugin_config
            .as_ref()
            .filter(|_| r.user_data.is_none());
        let labels = r
            .node_pool
            .pointer("/spec/template/metadata/labels")
            .and_then(serde_json::Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        Computed {
            id: self.pool.name.clone(),
            resource_name: d.resource_name.clone(),
            slices_per_gpu: d.slices_per_gpu,
            memory_per_slice_mb: d.memory_per_slice_mib,
            node_capacity: r
                .capacity
                .iter()
                .map(|(count, res)| {
                    (
                        count.to_string(),
                        res.get(&d.resource_name).copied().unwrap_or_default(),
                    )
                })
                .collect(),
            limits: r.limits.clone(),
            node_selector: r.node_selector.clone(),
            tolerations: TolerationOut::all(&d.tolerations),
            node_labels: labels,
            device_plugin_config_name: config.map(|c| c.name.clone()),
            device_plugin_config: config.and_then(|c| c.config.render().ok()),
            objects,
            node_overlay_gate: self.gate.as_str().to_string(),
        }
    }

    /// The owned objects by `Kind/name`, as the provider writes them.
    pub(super) fn objects(&self) -> BTreeMap<String, String> {
        self.owned().iter().map(|o| (key(o), pretty(o))).collect()
    }
}

/// `Kind/name` of an object.
pub(super) fn key(obj: &serde_json::Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or_default(),
        obj.pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    )
}

/// Where the plan must replace the pool because its NodePool would point at a node class of
/// another group or kind than the one the cluster holds: Karpenter's CRD makes
/// `spec.template.spec.nodeClassRef.group` and `.kind` immutable (karpenter.sh_nodepools.yaml,
/// "nodeClassRef.group is immutable"), so an update in place would be refused. `prior` is the
/// refreshed state, whose `objects` hold what the cluster has; None when nothing moves.
pub(super) fn node_class_moved(prior: &Value, desired: &Desired) -> Option<AttrPath> {
    let prior = Computed::from_value(prior).ok()?;
    let pool = &desired.rendered.node_pool;
    let held: serde_json::Value = serde_json::from_str(prior.objects.get(&key(pool))?).ok()?;
    let at = "/spec/template/spec/nodeClassRef";
    let part = |o: &serde_json::Value, k: &str| o.pointer(&format!("{at}/{k}")).cloned();
    let moved = ["group", "kind"]
        .iter()
        .any(|k| part(&held, k).is_some() && part(&held, k) != part(pool, k));
    moved.then(|| AttrPath::attr("objects"))
}

pub(super) fn pretty(obj: &serde_json::Value) -> String {
    serde_json::to_string_pretty(obj).unwrap_or_default()
}

/// What `live` holds of the fields `wanted` sets: objects keep only the keys `wanted` has,
/// lists of the same length are compared element by element, anything else is taken whole.
/// A field the server lacks is left out, so its absence shows.
pub(super) fn project(live: &serde_json::Value, wanted: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match (live, wanted) {
        (J::Object(l), J::Object(w)) => J::Object(
            w.iter()
                .filter_map(|(k, wv)| l.get(k).map(|lv| (k.clone(), project(lv, wv))))
                .collect(),
        ),
        (J::Array(l), J::Array(w)) if l.len() == w.len() => {
            J::Array(l.iter().zip(w).map(|(lv, wv)| project(lv, wv)).collect())
        }
        _ => live.clone(),
    }
}

/// The arguments as JSON, without `kubernetes`.
pub(super) fn declaration(args: &Args) -> String {
    let mut v = to_json(&args.to_value());
    if let Some(m) = v.as_object_mut() {
        m.remove("kubernetes");
    }
    v.to_string()
}

/// A known value as JSON, as terraform's JSON encoding writes it (numbers too large for JSON's
/// as strings, which the decoder takes back).
fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Bool(b) => J::Bool(*b),
        Value::Number(tfplugin::Number::Int(i)) => J::from(*i),
        Value::Number(tfplugin::Number::Float(f)) => J::from(*f),
        Value::Number(n) => J::String(n.to_string()),
        Value::String(s) => J::String(s.clone()),
        Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
            J::Array(items.iter().map(to_json).collect())
        }
        Value::Map(m) | Value::Object(m) => {
            J::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
        _ => J::Null,
    }
}

/// The path of a renderer's problem: blocks are lists of one, so `eks.node_class.ami_version`
/// is `eks[0].node_class[0].ami_version`. Which segments are blocks the schema says.
fn problem_path(dotted: &str) -> AttrPath {
    let schema = super::schema::schema();
    let segments: Vec<&str> = dotted.split('.').collect();
    let mut block = Some(&schema.block);
    let mut path = AttrPath::root();
    for (i, s) in segments.iter().enumerate() {
        path = path.with_attr(s);
        let nested = block.and_then(|b| b.nested_block(s));
        if nested.is_some_and(|n| n.max_items == 1) && i + 1 < segments.len() {
            path = path.with_index(0);
        }
        block = nested.map(|n| &n.block);
    }
    path
}

fn problem_diagnostic(p: &Problem) -> Diagnostic {
    match p {
        Problem::Argument {
            attribute,
            summary,
            detail,
        } => Diagnostic::error(*summary, detail.clone()).at(problem_path(attribute)),
        // The domain checks the pool as a node group of each count; its counts are ours.
        Problem::Domain(e) => domain_diagnostic(e, &[(gpu::Field::GpuCount, "gpu_counts")]),
    }
}

impl Args {
    /// Where a failed request should send the user.
    pub(super) fn access(&self) -> Option<&'static str> {
        self.kubernetes.as_ref().and_then(KubernetesArgs::access)
    }

    /// `capacity_types`, or its default; a list Karpenter could launch nothing from, or one
    /// it would refuse, is a diagnostic.
    fn capacity_types(&self, diags: &mut Diagnostics) -> Vec<String> {
        let capacity_types = self
            .capacity_types
            .0
            .clone()
            .unwrap_or_else(|| vec![DEFAULT_CAPACITY_TYPE.to_string()]);
        let at = AttrPath::attr("capacity_types");
        if capacity_types.is_empty() {
            diags.push(
                Diagnostic::error(
                    "No capacity type",
                    "capacity_types is empty, so Karpenter could launch no node. Name one or \
                    more of on-demand, spot, reserved, or leave it out for on-demand.",
                )
                .at(at.clone()),
            );
        }
        for (i, c) in capacity_types.iter().enumerate() {
            if !CAPACITY_TYPES.contains(&c.as_str()) {
                diags.push(
                    Diagnostic::error(
                        "Invalid capacity type",
                        format!(
                            "capacity_types names {c:?}; Karpenter's capacity types are \
                            on-demand, spot and reserved."
                        ),
                    )
                    .at(at.with_index(i)),
                );
            } else if capacity_types[..i].contains(c) {
                diags.push(
                    Diagnostic::error(
                        "Repeated capacity type",
                        format!("capacity_types names {c:?} twice; name it once."),
                    )
                    .at(at.with_index(i)),
                );
            }
        }
        capacity_types
    }

    /// The `disruption` block as the NodePool takes it, with its defaults; a budget Karpenter
    /// would refuse is a diagnostic.
    fn disruption(&self, diags: &mut Diagnostics) -> Option<Disruption> {
        let d = self.disruption.as_ref()?;
        for (i, b) in d.budget.iter().enumerate() {
            check_budget(b, i, diags);
        }
        Some(Disruption {
            consolidation_policy: d
                .consolidation_policy
                .0
                .clone()
                .unwrap_or_else(|| "WhenEmptyOrUnderutilized".into()),
            consolidate_after: d.consolidate_after.0.clone().unwrap_or_else(|| "0s".into()),
            budgets: d
                .budget
                .iter()
                .map(|b| Budget {
                    nodes: b.nodes.clone(),
                    schedule: b.schedule.clone(),
                    duration: b.duration.clone(),
                })
                .collect(),
        })
    }

    /// The pool as the renderer takes it; what the schema cannot check is a diagnostic here.
    fn pool(&self, diags: &mut Diagnostics) -> Option<KarpenterPool> {
        let before = diags.0.len();
        let gpu = match gpu::gpu_model(&self.gpu_model) {
            Ok(g) => Some(g),
            Err(e) => {
                diags.push(domain_diagnostic(&e, &[]));
                None
            }
        };
        let capacity_types = self.capacity_types(diags);
        let disruption = self.disruption(diags);
        // None without a node class: the schema's ExactlyOneOf reports it.
        let provisioner = self.provisioner.provisioner()?;
        if diags.0.len() > before {
            return None;
        }
        Some(KarpenterPool {
            name: self.name.clone(),
            provisioner,
            gpu: gpu?,
            gpu_counts: self.gpu_counts.clone(),
            sharing: self.sharing.mode(),
            labels: self.labels.clone().unwrap_or_default(),
            taints: crate::model::taints(&self.taints),
            capacity_types,
            limit_gpus: self.limit_gpus,
            disruption,
            weight: self.weight,
            // Until the gate is known to be on, limits in whole GPUs (see `resolve`).
            overlays_read: false,
            config_name: self.device_plugin_config_name.0.clone(),
        })
    }
}

/// The checks of `disruption.budget[i]` Karpenter's CRD would make: a window needs both its
/// schedule and its duration, and `nodes` is a count or a percentage.
fn check_budget(b: &BudgetArgs, i: usize, diags: &mut Diagnostics) {
    let at = AttrPath::attr("disruption")
        .with_index(0)
        .with_attr("budget")
        .with_index(i);
    if b.schedule.is_some() != b.duration.is_some() {
        let (missing, given) = if b.schedule.is_some() {
            ("duration", "schedule")
        } else {
            ("schedule", "duration")
        };
        diags.push(
            Diagnostic::error(
                "Incomplete budget window",
                format!(
                    "A budget's window needs both schedule and duration; this one has \
                    only {given}. Set {missing} too, or remove {given} for a budget that \
                    always holds."
                ),
            )
            .at(at.with_attr(missing)),
        );
    }
    let n = b.nodes.strip_suffix('%').unwrap_or(&b.nodes);
    if n.parse::<u32>().is_err()
        || (b.nodes.ends_with('%') && n.parse::<u32>().is_ok_and(|p| p > 100))
    {
        diags.push(
            Diagnostic::error(
                "Invalid budget",
                format!(
                    "nodes is {:?}; give a count of nodes (`2`) or a percentage from 0% \
                    to 100% (`10%`).",
                    b.nodes
                ),
            )
            .at(at.with_attr("nodes")),
        );
    }
}

/// The NodeOverlay gate of the cluster's Karpenter, as the state records it
/// (`node_overlay_gate`: `on`, `off` or `unknown`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gate {
    On,
    Off,
    Unknown,
}

impl Gate {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Gate::On => "on",
            Gate::Off => "off",
            Gate::Unknown => "unknown",
        }
    }

    /// The gate a plan or state records; unknown when it records none.
    pub(super) fn of(state: &Value) -> Gate {
        match state.get("node_overlay_gate").as_str() {
            Some("on") => Gate::On,
            Some("off") => Gate::Off,
            _ => Gate::Unknown,
        }
    }
}

/// The pool and its objects, or every problem found, as diagnostics on the attributes. `gate`
/// says whether Karpenter reads the overlays, which decides the unit of the limits.
pub(super) fn resolve(args: &Args, gate: Gate, diags: &mut Diagnostics) -> Option<Desired> {
    let mut pool = args.pool(diags)?;
    pool.overlays_read = gate == Gate::On;
    match kp::render(&pool) {
        Ok(rendered) => Some(Desired {
            pool,
            rendered,
            gate,
        }),
        Err(problems) => {
            for p in &problems {
                diags.push(problem_diagnostic(p));
            }
            None
        }
    }
}

/// A state from the declaration a NodePool carries: the arguments, an empty `kubernetes` and
/// `timeouts`, the computed attributes left for the read to fill.
pub(super) fn declared_state(text: &str) -> Result<Value, String> {
    let ty = super::schema::schema().ty();
    let mut st = tfplugin::json::decode(text.as_bytes(), &ty).map_err(|e| e.0)?;
    if let Value::Object(m) = &mut st {
        m.insert("kubernetes".into(), Value::List(vec![]));
        m.insert("timeouts".into(), Value::List(vec![]));
    }
    Ok(st)
}

/// Every computed attribute unknown but the ID: a plan whose arguments are not known yet.
pub(super) fn unknown_computed(id: Option<&str>) -> Value {
    let mut v = Computed::default().to_value();
    if let Value::Object(m) = &mut v {
        for (k, val) in m.iter_mut() {
            *val = match (k.as_str(), id) {
                ("id", Some(id)) => Value::string(id),
                _ => Value::UNKNOWN,
            };
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::provisioner::eks::{EksArgs, EksBlock};
    use super::*;
    use serde_json::json;

    #[test]
    fn projection_keeps_what_the_provider_sets_and_shows_what_is_missing() {
        let wanted = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
            "spec": {"capacity": {"nvidia.com/gpu": "4"}, "requirements": [{"key": "k"}]}});
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}},
            "spec": {"capacity": {"nvidia.com/gpu": "8"}, "requirements": [{"key": "k", "extra": 1}]},
            "status": {}});
        assert_eq!(
            project(&live, &wanted),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                "spec": {"capacity": {"nvidia.com/gpu": "8"}, "requirements": [{"key": "k"}]}})
        );
        let pruned = json!({"metadata": {"name": "a"}, "spec": {"requirements": []}});
        assert_eq!(
            project(&pruned, &wanted),
            json!({"metadata": {"name": "a"}, "spec": {"requirements": []}})
        );
    }

    #[test]
    fn the_declaration_reads_back_as_the_arguments_without_credentials() {
        use crate::model::{KubernetesArgs, TimeSlicingArgs};
        use tfplugin::object::FromValue;
        let mut args = Args {
            name: "t4-slices".into(),
            gpu_model: "T4".into(),
            gpu_counts: vec![1, 4],
            capacity_types: Known(Some(vec!["spot".into()])),
            limit_gpus: Some(8),
            labels: Some(BTreeMap::from([("team".into(), "a".into())])),
            taints: Some(vec![TaintArgs::of(
                "nvidia.com/gpu",
                "Present",
                "NoSchedule",
            )]),
            provisioner: ProvisionerBlock::of(
                &EksBlock,
                EksArgs {
                    node_class_name: Some("default".into()),
                    node_class: SingleBlock(None),
                }
                .to_value(),
            ),
            kubernetes: SingleBlock(Some(KubernetesArgs {
                token: Known(Some("secret".into())),
                ..KubernetesArgs::default()
            })),
            ..Args::default()
        };
        args.sharing.time_slicing = SingleBlock(Some(TimeSlicingArgs {
            replicas: 10,
            rename_by_default: Some(true),
            fail_requests_greater_than_one: Some(false),
        }));
        let text = declaration(&args);
        assert!(!text.contains("secret"), "{text}");
        let back = Args::from_value(&declared_state(&text).unwrap()).unwrap();
        args.kubernetes = SingleBlock(None);
        assert_eq!(back, args);
    }

    #[test]
    fn problem_paths_index_blocks() {
        assert_eq!(
            problem_path("eks.node_class.ami_version").to_string(),
            "eks[0].node_class[0].ami_version"
        );
        assert_eq!(problem_path("mig").to_string(), "mig");
        assert_eq!(problem_path("limit_gpus").to_string(), "limit_gpus");
    }
}
