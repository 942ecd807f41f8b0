//! Delivery `cluster_policy`, the default: a ConfigMap of ours and the ClusterPolicy's pointer at
//! it, both by server-side apply, with the field ownership that keeps the operator's Helm release
//! upgradable (see `cluster::delivery` for why a field is taken or refused). What it took from an
//! update manager is recorded ([`PolicyTaken`]) and given back on destroy.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tfplugin::object::DecodeError;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::super::diagnostics::{kube_diagnostic, warn_operator_mismatch};
use super::found::{Found, none_if_missing};
use super::life::{About, At, ClusterView, Lifecycle, Placement, Reload, Writing};
use super::takeover::{Record, Takeover};
use crate::cluster::{self as k, Cluster, KubeError, PolicyPointer, helm};

tfplugin::object! {
    /// Its settings: none, so it has no block.
    pub struct ClusterPolicy {}
}

/// What this delivery took over: ClusterPolicy field path -> the value an update manager had
/// set there.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct PolicyTaken(BTreeMap<String, k::TakenField>);

impl Record for PolicyTaken {
    const KEY: &'static str = "cluster_policy";
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A strategy held with no record of what was there (an imported config) is not simply given
/// up: see [`strategy_to_keep`].
const STRATEGY: &str = "spec.mig.strategy";

#[async_trait]
impl Lifecycle for ClusterPolicy {
    fn about() -> About {
        About {
            name: "cluster_policy",
            summary: "`cluster_policy` (default: server-side apply of the ConfigMap and the \
                ClusterPolicy pointer)",
            block: None,
        }
    }

    /// The ConfigMap the ClusterPolicy points the plugin at, where this provider's field
    /// manager applied the pointer, or no Helm release made the ClusterPolicy (then the pointer
    /// was set by hand, and taking it over is this delivery's).
    async fn discover(c: &Cluster) -> Result<Vec<Found>, KubeError> {
        let Some(p) = none_if_missing(c.cluster_policy().await.map(Some))? else {
            return Ok(Vec::new());
        };
        let (Some(name), Some(ns)) = (p.name, p.operand_namespace) else {
            return Ok(Vec::new());
        };
        if !p.pointer_ours && p.release.is_some() {
            return Ok(Vec::new());
        }
        Ok(vec![Found {
            import_id: format!("{ns}/{name}"),
            namespace: ns,
            name,
            delivery: Self::about().name,
            through: format!("the ClusterPolicy {}", k::CLUSTER_POLICY),
            certain: p.pointer_ours,
        }])
    }

    fn imported(_: &str, _: &str) -> Self {
        ClusterPolicy {}
    }

    fn placement(_: &Value) -> Result<Placement, DecodeError> {
        Ok(Placement::Default)
    }

    fn own_configmap(&self) -> bool {
        true
    }

    async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let (c, d) = (at.cluster, at.desired);
        let pointer = match c.cluster_policy().await {
            Ok(p) => p,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", d.access, &e));
                return None;
            }
        };
        warn_operator_mismatch(
            d,
            pointer.operand_namespace.as_deref(),
            pointer.mig_strategy.as_deref(),
            diags,
        );
        take_policy_fields(at, &mut taken.open(), diags).await?;
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
                d.access,
                &e,
            ));
            return None;
        }
        Some(Reload::Restart(
            pointer
                .operand_namespace
                .unwrap_or_else(|| d.namespace.clone()),
        ))
    }

    async fn read_back(
        &self,
        at: &At<'_>,
        _: &[String],
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let (c, d) = (at.cluster, at.desired);
        let (ns, name) = (d.namespace.as_str(), d.name.as_str());
        let pointer = match c.cluster_policy().await {
            Ok(p) => p,
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", d.access, &e));
                return None;
            }
        };
        let data = match c.configmap(ns, name).await {
            Ok(d) => d,
            Err(e) => {
                diags.push(kube_diagnostic("read the ConfigMap", d.access, &e));
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

    /// The pointer is given up while it is still ours to give (with the fields taken from
    /// others given back first), then the ConfigMap goes.
    async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        _: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let (c, d) = (at.cluster, at.desired);
        let mut operand_ns = d.namespace.clone();
        match c.cluster_policy().await {
            Ok(p) => {
                if let Some(o) = &p.operand_namespace {
                    operand_ns = o.clone();
                }
                if p.name.as_deref() == Some(d.name.as_str())
                    && let Err(e) = give_up_pointer(c, &p, &taken.get()).await
                {
                    diags.push(kube_diagnostic(
                        "release the ClusterPolicy pointer",
                        d.access,
                        &e,
                    ));
                    return None;
                }
            }
            Err(KubeError::MissingCrd) | Err(KubeError::MissingClusterPolicy(_)) => {}
            Err(e) => {
                diags.push(kube_diagnostic("read the ClusterPolicy", d.access, &e));
                return None;
            }
        }
        if let Err(e) = c.delete_configmap(&d.namespace, &d.name).await {
            diags.push(kube_diagnostic("delete the ConfigMap", d.access, &e));
            return None;
        }
        Some(Reload::Restart(operand_ns))
    }
}

/// Checks who holds the ClusterPolicy fields this resource sets (see `cluster::delivery` for
/// why): a field another manager holds through server-side apply is refused with a diagnostic;
/// what update managers hold is recorded in `taken` before it is overwritten.
async fn take_policy_fields(
    at: &At<'_>,
    taken: &mut PolicyTaken,
    diags: &mut Diagnostics,
) -> Option<()> {
    let d = at.desired;
    let wanted = d.policy_fields();
    let paths: Vec<&str> = wanted.iter().map(|(p, _, _)| *p).collect();
    let fields = match at.cluster.policy_fields(&paths).await {
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
                .0
                .entry(path.to_string())
                .or_insert_with(|| k::TakenField {
                    value: value.clone(),
                    manager: manager.clone(),
                });
        }
    }
    (!refused).then_some(())
}

/// Gives each field taken from an update manager back to it (where this provider still holds
/// it), then gives up this manager's fields with an empty apply (keeping the MIG strategy where
/// [`strategy_to_keep`] says so).
async fn give_up_pointer(
    c: &Cluster,
    p: &PolicyPointer,
    taken: &PolicyTaken,
) -> Result<(), KubeError> {
    for (path, t) in &taken.0 {
        if c.holds(path).await? {
            c.give_back(path, t).await?;
        }
    }
    let keep = if !taken.0.contains_key(STRATEGY) && c.holds(STRATEGY).await? {
        strategy_to_keep(c, p).await?
    } else {
        None
    };
    c.release_pointer(keep.as_deref()).await
}

/// A strategy this provider holds with no record of what was there (an imported config): giving
/// it up would delete it, and the real API server then refuses the ClusterPolicy ("spec.mig in
/// body must be of type object"). It goes back to what the operator's Helm release last rendered
/// there, under the chart's manager (and None is kept); without a release to ask, it stays as
/// it is (the value to keep).
async fn strategy_to_keep(c: &Cluster, p: &PolicyPointer) -> Result<Option<String>, KubeError> {
    let now = c.policy_fields(&[STRATEGY]).await?;
    let now = now.first().and_then(|f| f.value.clone());
    let rendered = match &p.release {
        Some((name, ns)) => match helm::read_release(c, ns, name).await? {
            helm::ReleaseState::Deployed(r) => r
                .rendered("ClusterPolicy", k::CLUSTER_POLICY)
                .and_then(|o| o.pointer("/spec/mig/strategy").cloned()),
            _ => None,
        },
        None => None,
    };
    let manager = c.update_managers().await?.into_iter().next();
    match (rendered, manager) {
        (Some(value), Some(manager)) if Some(&value) != now.as_ref() => {
            c.give_back(STRATEGY, &k::TakenField { value, manager })
                .await?;
            Ok(None)
        }
        _ => Ok(now.and_then(|v| v.as_str().map(str::to_string))),
    }
}
