//! `fracgpu_karpenter_nodepool`: a Karpenter NodePool whose nodes share their GPUs, the
//! NodeOverlays that tell Karpenter a node's slices, and the node class it may make, on EKS
//! Karpenter or AKS node auto-provisioning. The handlers below stay short: the objects come from
//! `render`, which asks the pool's provisioner (`provisioner`, one file each) what differs per
//! cloud; the model lives in `model`, the cluster work in `ops` (through
//! `crate::cluster::karpenter_api`).
//!
//! Drift: `objects` holds, per object, the fields the provider sets; a refresh writes what the
//! cluster holds of them (`model::project`), so any hand edit or deleted overlay makes the plan
//! differ from the rendering, an update in place. A NodePool gone makes the plan create it.
//! Import reads the declaration the NodePool carries (`model::DECLARATION`).

mod model;
mod ops;
mod problem;
pub mod provisioner;
pub mod render;
mod resource;
mod schema;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use crate::cluster::Cluster;
use crate::cluster::karpenter_api::OverlayGate;
use crate::operation::{Cut, OpCtx, bounded};
use gpu::SharingMode;
use tfplugin::api::{IdentityAttribute, IdentitySchema, PlanRequest, Private, Resource};
use tfplugin::object::{Decoded, FromValue, ToValue, merge};
use tfplugin::plan::Planned;
use tfplugin::schema::Schema;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Type, Value};

use model::{Args, Computed, Desired, Gate, PoolIdentity, REIMPORT, declared_state, resolve};
use ops::Waited;
use schema::{NAME_RE, TIMEOUTS};

pub(crate) use model::DECLARATION;
pub use resource::{KarpenterNodePool, TYPE_NAME};
pub use schema::schema;

/// How long a plan waits to learn whether Karpenter reads NodeOverlays, before it goes on
/// without the answer.
const GATE_LOOK: Duration = Duration::from_secs(5);

fn cut_diagnostic(cut: Cut, op: &str, limit: Duration) -> Diagnostic {
    match cut {
        Cut::Timeout => Diagnostic::error(
            "Operation timed out",
            format!(
                "The {op} did not finish within {}s; raise timeouts.{op} or check the cluster \
                (a delete waits for Karpenter to drain and terminate the pool's nodes). The \
                next plan shows what is left to do.",
                limit.as_secs()
            ),
        )
        .at(AttrPath::attr("timeouts")),
        Cut::Stop => Diagnostic::error(
            "Interrupted",
            format!(
                "The {op} stopped because terraform was interrupted. The next plan shows what is \
                left to do."
            ),
        ),
    }
}

/// The warning of a plan whose pool Karpenter will not size by slices: what real Karpenter does
/// then, and what the limits were written as so that the bill stays within `limit_gpus`.
fn gate_warning(gate: &OverlayGate, desired: &Desired) -> Diagnostic {
    let who = match gate {
        OverlayGate::Off(d) => format!(
            "The Karpenter Deployment {d} runs with the NodeOverlay feature gate off (it is \
            alpha and off by default)"
        ),
        _ => "The NodeOverlay feature gate of this cluster's Karpenter could not be read (no \
            Deployment labelled app.kubernetes.io/name=karpenter is visible: managed Karpenter, \
            as EKS Auto Mode and AKS node auto-provisioning run it, is outside the cluster, or \
            the credentials cannot list Deployments), so this pool is planned as if it were off"
            .to_string(),
    };
    let d = &desired.rendered.derived;
    let what = if d.resource_name == "nvidia.com/gpu" {
        let limit = match desired.pool.limit_gpus {
            Some(n) => format!(
                "Its limits are written in whole GPUs (nvidia.com/gpu: {n}, the unit Karpenter \
                then counts in), so it never launches more than limit_gpus = {n} GPUs"
            ),
            None => "Without limit_gpus nothing bounds how many GPUs it launches".to_string(),
        };
        format!(
            "Karpenter reads no NodeOverlay, so it sizes this pool's nodes by whole GPUs: each \
            pending pod of one nvidia.com/gpu slice counts as one GPU (ten such pods bring ten \
            GPUs of nodes, e.g. three 4-GPU instances where one GPU would do), and consolidation \
            does not count slices. {limit}."
        )
    } else {
        format!(
            "No instance type offers {} without the NodeOverlays, so its pending pods stay \
            pending and Karpenter launches nothing for them.",
            d.resource_name
        )
    };
    Diagnostic::warning(
        "Karpenter ignores NodeOverlays",
        format!(
            "{who}. {what} Turn the gate on with the chart value \
            `settings.featureGates.nodeOverlay=true` (the controller's FEATURE_GATES or \
            --feature-gates NodeOverlay=true), then apply again: node_overlay_gate reads `on` \
            and the limits count slices."
        ),
    )
}

/// The gate as the state records it, from what the cluster said.
fn recorded(gate: &OverlayGate) -> Gate {
    match gate {
        OverlayGate::On => Gate::On,
        OverlayGate::Off(_) => Gate::Off,
        OverlayGate::Unknown => Gate::Unknown,
    }
}

impl KarpenterNodePool {
    /// Whether the cluster's Karpenter reads NodeOverlays; unknown when the cluster cannot be
    /// reached (it may be made by the same apply) or does not answer in time.
    async fn look_at_gate(&self, args: &Args) -> OverlayGate {
        let look = async {
            let c = self.connect(Some(args)).await.ok()?;
            Some(c.overlay_gate().await)
        };
        match bounded(GATE_LOOK, &self.state.stop, look).await {
            Ok(Some(g)) => g,
            _ => OverlayGate::Unknown,
        }
    }

    /// The state of a pool just written: the plan with what it derives.
    fn written(planned: &Value, desired: &Desired) -> Value {
        let mut st = planned.clone();
        merge(&mut st, &desired.computed(desired.objects()));
        st
    }

    async fn do_read(&self, state: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let mut state = state.clone();
        // An import's skeleton: only the name, the rest from the NodePool's declaration. The
        // declaration carries no `kubernetes` block, so the client that read it (the
        // provider's settings) reads the rest too.
        let mut imported = None;
        if state.get("gpu_model").is_null() {
            let name = state.get("name").as_str()?.to_string();
            let c = imported.insert(self.connect(None).await.map_err(|d| diags.push(d)).ok()?);
            let live = ops::node_pool(c, &name)
                .await
                .map_err(|e| diags.push(ops::kube_diagnostic("read the NodePool", None, &e)))
                .ok()??;
            let Some(text) = ops::declared(&live) else {
                diags.push(Diagnostic::error(
                    "NodePool not made by this provider",
                    format!(
                        "NodePool {name} carries no {} annotation, so its sharing, GPU counts \
                        and node class cannot be read back whole. Declare the pool in \
                        fracgpu_karpenter_nodepool under another name and delete this one, or \
                        delete it and let the resource make it.",
                        model::DECLARATION
                    ),
                ));
                return None;
            };
            state = declared_state(text)
                .map_err(|e| {
                    diags.push(Diagnostic::error(
                        "Unreadable declaration",
                        unreadable(&name, &e),
                    ))
                })
                .ok()?;
        }
        let c = match imported {
            Some(c) => c,
            None => {
                let args = Args::from_value(&state).or_report_state(diags, REIMPORT)?;
                self.connect(Some(&args))
                    .await
                    .map_err(|d| diags.push(d))
                    .ok()?
            }
        };
        Self::observed(&c, state, diags).await
    }

    /// The state with what the cluster holds of the pool's objects; None when the NodePool is
    /// gone or after an error diagnostic.
    async fn observed(c: &Cluster, mut state: Value, diags: &mut Diagnostics) -> Option<Value> {
        let args = Args::from_value(&state).or_report_state(diags, REIMPORT)?;
        // The gate as the cluster says it now, so that a gate turned on or off since the last
        // apply shows as the limits to write.
        let gate = recorded(&c.overlay_gate().await);
        let desired = resolve(&args, gate, diags)?;
        let objects = ops::observe(c, &args, &desired)
            .await
            .map_err(|d| diags.push(d))
            .ok()??;
        merge(&mut state, &desired.computed(objects));
        Some(state)
    }

    /// The NodePools of the cluster the provider's settings reach (as an import reads it), for
    /// `terraform query`: those this provider made, with their sharing, and the others by name
    /// only (`state` None: nothing to import them from). `sharing` keeps those shared that way;
    /// `with_state` reads each made one back as an import would. A pool whose declaration
    /// cannot be read back is left out with a warning.
    pub async fn listed(
        &self,
        sharing: Option<&str>,
        with_state: bool,
        diags: &mut Diagnostics,
    ) -> Option<Vec<Listed>> {
        let c = self.connect(None).await.map_err(|d| diags.push(d)).ok()?;
        let pools = ops::node_pools(&c)
            .await
            .map_err(|e| diags.push(ops::kube_diagnostic("list the NodePools", None, &e)))
            .ok()?;
        let Some(pools) = pools else {
            diags.push(Diagnostic::warning(
                "No Karpenter on this cluster",
                "The cluster serves no karpenter.sh/v1 NodePools: Karpenter (or AKS node \
                auto-provisioning) is not installed there, or the provider's `kubernetes` block \
                (or KUBECONFIG) reaches another cluster.",
            ));
            return Some(Vec::new());
        };
        let mut out = Vec::new();
        for live in pools {
            let name = live
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string();
            let Some(text) = ops::declared(&live) else {
                if sharing.is_none() {
                    out.push(Listed {
                        display_name: format!("{name} (not made by fracgpu)"),
                        name,
                        state: None,
                    });
                }
                continue;
            };
            let read = declared_state(text).and_then(|st| match Args::from_value(&st) {
                Ok(args) => Ok((st, args)),
                Err(_) => Err("its arguments do not decode".to_string()),
            });
            let (declared, args) = match read {
                Ok(r) => r,
                Err(e) => {
                    diags.push(Diagnostic::warning(
                        "NodePool left out",
                        unreadable(&name, &e),
                    ));
                    continue;
                }
            };
            let mode = args.sharing.mode();
            if sharing.is_some_and(|s| s != mode.name()) {
                continue;
            }
            let state = if with_state {
                let mut own = Diagnostics::new();
                let Some(st) = Self::observed(&c, declared, &mut own).await else {
                    let why = own
                        .0
                        .iter()
                        .map(|d| format!("{}: {}", d.summary, d.detail))
                        .collect::<Vec<_>>()
                        .join("; ");
                    let why = if why.is_empty() {
                        "it was deleted while the query ran".to_string()
                    } else {
                        why
                    };
                    diags.push(Diagnostic::warning(
                        "NodePool left out",
                        format!("NodePool {name} could not be read back as an import would: {why}"),
                    ));
                    continue;
                };
                Some(st)
            } else {
                None
            };
            out.push(Listed {
                display_name: listed_name(&name, &args, &mode),
                name,
                state,
            });
        }
        Some(out)
    }
}

/// Why a NodePool's declaration gives no state.
fn unreadable(name: &str, e: &str) -> String {
    format!(
        "NodePool {name}'s {} annotation does not read as this provider's arguments ({e}); it \
        was edited by hand or written by another version.",
        model::DECLARATION
    )
}

/// A NodePool as `terraform query` lists it.
pub struct Listed {
    pub name: String,
    pub display_name: String,
    /// The state an import gives it; None for a NodePool this provider did not make, or when
    /// the resource was not asked for.
    pub state: Option<Value>,
}

/// What `terraform query` shows of a pool this provider made: where, which GPUs, how shared.
fn listed_name(name: &str, args: &Args, mode: &SharingMode) -> String {
    let place = args.provisioner.kind().map_or("Karpenter", |k| k.title());
    let counts = args
        .gpu_counts
        .iter()
        .map(|n| format!("x{n}"))
        .collect::<Vec<_>>()
        .join(" or ");
    format!(
        "{name} ({place}, {} {counts}, {})",
        args.gpu_model,
        mode.label()
    )
}

/// Fills the computed attributes from the rendering: on create and update, and on a plan
/// after a refresh that found drift, where the rendering is what the apply sets back.
fn plan_computed(planned: &mut Planned) -> Option<(Args, Desired)> {
    let st = &mut planned.state;
    if st.is_null() {
        return None;
    }
    let Ok(args) = Args::from_value(st) else {
        let id = st.get("name").as_str().map(str::to_string);
        merge(st, &model::unknown_computed(id.as_deref()));
        return None;
    };
    // Validation reported the problems already.
    let desired = resolve(&args, Gate::of(st), &mut Diagnostics::new())?;
    merge(st, &desired.computed(desired.objects()));
    Some((args, desired))
}

#[async_trait]
impl Resource for KarpenterNodePool {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(args) = Args::from_value(config).or_report_mismatch(diags) {
            resolve(&args, Gate::Unknown, diags);
        }
    }

    async fn modify_plan(
        &self,
        req: &PlanRequest<'_>,
        planned: &mut Planned,
        diags: &mut Diagnostics,
    ) {
        // The gate a refresh recorded; a new pool asks the cluster.
        let seen = match req.prior.get("node_overlay_gate") {
            Value::String(g) => Some(g.clone()),
            _ => None,
        };
        let gate = match (seen, Args::from_value(&planned.state)) {
            (Some(g), _) => Some((Value::string(&g), None)),
            (None, Ok(args)) => {
                let g = self.look_at_gate(&args).await;
                Some((Value::string(recorded(&g).as_str()), Some(g)))
            }
            (None, Err(_)) => None,
        };
        if let Value::Object(m) = &mut planned.state {
            let v = gate
                .as_ref()
                .map(|(v, _)| v.clone())
                .unwrap_or(Value::UNKNOWN);
            m.insert("node_overlay_gate".into(), v);
        }
        let Some((_, desired)) = plan_computed(planned) else {
            return;
        };
        let changes = Computed::from_value(req.prior)
            .map(|prior| prior.objects != desired.objects())
            .unwrap_or(true);
        if changes && !desired.rendered.overlays.is_empty() {
            let gate = match gate {
                Some((_, Some(g))) => g,
                _ => match Gate::of(&planned.state) {
                    Gate::On => OverlayGate::On,
                    // The Deployment's name is in the read that recorded it; say what is known.
                    Gate::Off => OverlayGate::Off("of the cluster".into()),
                    Gate::Unknown => OverlayGate::Unknown,
                },
            };
            if gate != OverlayGate::On {
                diags.push(gate_warning(&gate, &desired));
            }
        }
        if let Some(path) = model::node_class_moved(req.prior, &desired) {
            planned.requires_replace.push(path);
        }
    }

    async fn create(&self, planned: &Value, _: &mut Private, diags: &mut Diagnostics) -> Value {
        let Some(args) = Args::from_value(planned).or_report(diags) else {
            return Value::Null;
        };
        let Some(desired) = resolve(&args, Gate::of(planned), diags) else {
            return Value::Null;
        };
        let limit = TIMEOUTS.of(planned, "create");
        let written = AtomicBool::new(false);
        let work = async {
            let c = self.connect(Some(&args)).await?;
            ops::create(&c, &args, &desired, &written).await
        };
        let out = bounded(limit, &self.state.stop, work).await;
        tracing::info!(pool = %args.name, ok = matches!(out, Ok(Ok(()))), "karpenter nodepool: create");
        match out {
            Ok(Ok(())) => return Self::written(planned, &desired),
            Ok(Err(d)) => diags.push(d),
            Err(cut) => diags.push(cut_diagnostic(cut, "create", limit)),
        }
        // Once a write was sent, part of the pool may exist: the state keeps it (tainted), so
        // that the next apply deletes what was written and starts again.
        if written.load(Ordering::Relaxed) {
            Self::written(planned, &desired)
        } else {
            Value::Null
        }
    }

    async fn read(&self, state: &Value, _: &mut Private, diags: &mut Diagnostics) -> Option<Value> {
        let limit = TIMEOUTS.of(state, "read");
        bounded(limit, &self.state.stop, self.do_read(state, diags))
            .await
            .unwrap_or_else(|cut| {
                diags.push(cut_diagnostic(cut, "read", limit));
                None
            })
    }

    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        _: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let Some(args) = Args::from_value(planned).or_report(diags) else {
            return prior.clone();
        };
        let Some(desired) = resolve(&args, Gate::of(planned), diags) else {
            return prior.clone();
        };
        // What the prior declaration made, to delete what the new one no longer makes.
        let old = Args::from_value(prior)
            .ok()
            .and_then(|a| resolve(&a, Gate::of(prior), &mut Diagnostics::new()));
        let limit = TIMEOUTS.of(planned, "update");
        let work = async {
            let c = self.connect(Some(&args)).await?;
            ops::update(&c, &args, &desired, old.as_ref()).await
        };
        let out = bounded(limit, &self.state.stop, work).await;
        tracing::info!(pool = %args.name, ok = matches!(out, Ok(Ok(()))), "karpenter nodepool: update");
        match out {
            Ok(Ok(())) => Self::written(planned, &desired),
            Ok(Err(d)) => {
                diags.push(d);
                prior.clone()
            }
            Err(cut) => {
                diags.push(cut_diagnostic(cut, "update", limit));
                prior.clone()
            }
        }
    }

    async fn delete(&self, state: &Value, _: &Private, diags: &mut Diagnostics) {
        let Some(args) = Args::from_value(state).or_report_state(diags, REIMPORT) else {
            return;
        };
        let objects = match resolve(&args, Gate::of(state), &mut Diagnostics::new()) {
            Some(d) => d.owned(),
            None => {
                let listed = Computed::from_value(state)
                    .map(|c| c.objects)
                    .unwrap_or_default();
                ops::objects_of_state(&listed, &args.name)
            }
        };
        let limit = TIMEOUTS.of(state, "delete");
        let ctx = OpCtx::new(limit, self.state.stop.clone());
        let work = async {
            let c = self.connect(Some(&args)).await.map_err(Waited::Failed)?;
            ops::delete(&c, &objects, args.access(), &ctx).await
        };
        let out = bounded(limit, &self.state.stop, work).await;
        tracing::info!(pool = %args.name, ok = matches!(out, Ok(Ok(()))), "karpenter nodepool: delete");
        match out {
            Ok(Ok(())) => {}
            Ok(Err(Waited::Failed(d))) => diags.push(d),
            Ok(Err(Waited::Cut(cut))) | Err(cut) => {
                diags.push(cut_diagnostic(cut, "delete", limit));
            }
        }
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let valid = regex_lite::Regex::new(NAME_RE).is_ok_and(|re| re.is_match(id));
        if !valid {
            diags.push(Diagnostic::error(
                "Invalid import ID",
                format!("{id:?} is not a NodePool name; import with the name, e.g. `t4-slices`."),
            ));
            return None;
        }
        // A skeleton the read after import fills from the NodePool's declaration.
        let mut st = Value::null_object(&schema().ty());
        if let Value::Object(m) = &mut st {
            m.insert("name".into(), Value::string(id));
            m.insert("id".into(), Value::string(id));
        }
        Some(st)
    }

    fn identity_schema(&self) -> Option<IdentitySchema> {
        Some(IdentitySchema {
            version: 0,
            attributes: vec![IdentityAttribute {
                name: "name",
                ty: Type::String,
                required_for_import: true,
                optional_for_import: false,
                description: "Name of the NodePool.",
            }],
        })
    }

    fn identity(&self, state: &Value) -> Option<Value> {
        let name = state.get("name").as_str()?;
        Some(
            PoolIdentity {
                name: Some(name.to_string()),
            }
            .to_value(),
        )
    }

    async fn import_identity(&self, given: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let given = PoolIdentity::from_value(given).or_report(diags)?;
        self.import(&given.name.unwrap_or_default(), diags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{BudgetArgs, DisruptionArgs};
    use provisioner::eks::{Ec2ClassArgs, EksArgs};
    use provisioner::nap::{AksArgs, AksClassArgs};

    /// Types and flags, nested blocks and the provisioners' blocks included: the arguments as
    /// a plan holds them, and a state as the arguments, what the pool derives and the timeouts.
    #[test]
    fn the_models_read_what_the_schema_declares() {
        use tfplugin::shape::{Reads, Shaped, check, object};
        let block = schema().block;
        let at = "fracgpu_karpenter_nodepool";
        assert_eq!(
            check(at, &block, &Args::shape(), Reads::Plan),
            Vec::<String>::new()
        );
        let state = object(
            vec![("timeouts", Value::shape())],
            vec![Args::shape(), Computed::shape()],
        );
        assert_eq!(
            check(at, &block, &state, Reads::State),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_models_name_what_the_schema_declares() {
        let block = schema().block;
        let mut names = Args::attribute_names();
        names.extend(Computed::attribute_names());
        names.push("timeouts");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, block.names());
        let nested = |n: &str| block.nested_block(n).unwrap().block.clone();
        assert_eq!(EksArgs::attribute_names(), nested("eks").names());
        assert_eq!(AksArgs::attribute_names(), nested("aks").names());
        assert_eq!(
            Ec2ClassArgs::attribute_names(),
            nested("eks")
                .nested_block("node_class")
                .unwrap()
                .block
                .names()
        );
        assert_eq!(
            AksClassArgs::attribute_names(),
            nested("aks")
                .nested_block("node_class")
                .unwrap()
                .block
                .names()
        );
        assert_eq!(
            DisruptionArgs::attribute_names(),
            nested("disruption").names()
        );
        assert_eq!(
            BudgetArgs::attribute_names(),
            nested("disruption")
                .nested_block("budget")
                .unwrap()
                .block
                .names()
        );
    }
}
