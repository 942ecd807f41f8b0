//! What the GitOps deliveries (`argocd`, `flux`) share: the object whose Helm values hold the
//! operator's, as their block names it ([`ValuesObject`]), and its life, which is the whole of
//! their [`Lifecycle`]: each says only which object ([`GitopsSettings`]). Only the paths this
//! resource owns change, what was there is recorded on the first write for destroy, and the
//! controller renders the chart on its own sync, so nothing is restarted. Drift is what the
//! object's values say the chart will render: the live objects may lag behind the sync.

use async_trait::async_trait;
use tfplugin::object::DecodeError;
use tfplugin::schema::Attribute;
use tfplugin::validators::Matches;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use super::super::desired::Desired;
use super::super::diagnostics::{kube_diagnostic, warn_operator_mismatch};
use super::super::names::{DNS_LABEL_HINT, DNS_LABEL_RE};
use super::found::Found;
use super::life::{About, At, ClusterView, Lifecycle, Placement, Reload, Writing};
use super::takeover::Takeover;
use super::values::{
    ChartConfig, DEFAULT_VALUES_PATH, ValuesTaken, mig_strategy_path, names_stay_strings,
};
use crate::cluster::gitops::{Held, Holder};
use crate::cluster::values::value_at;
use crate::cluster::{Cluster, KubeError};

/// A GitOps delivery's settings: its name and block, and the object they name. Its
/// [`Lifecycle`] is the same for each (below).
pub(super) trait GitopsSettings: Send + Sync {
    /// Its name, its block and how the schema lists it ([`Lifecycle::about`]).
    fn describe() -> About
    where
        Self: Sized;

    /// Its settings naming the object `namespace/object` ([`Lifecycle::imported`]).
    fn from_import(namespace: &str, object: &str) -> Self
    where
        Self: Sized;

    /// The object that holds the operator's values.
    fn object(&self) -> ValuesObject<'_>;
}

#[async_trait]
impl<T: GitopsSettings> Lifecycle for T {
    fn about() -> About {
        T::describe()
    }

    fn imported(namespace: &str, object: &str) -> Self {
        T::from_import(namespace, object)
    }

    fn import_object(&self) -> Option<(String, String)> {
        let holder = self.object().holder;
        Some((holder.namespace, holder.name))
    }

    /// The chart installs the operator into the object's destination (an Application's
    /// `spec.destination.namespace`, a HelmRelease's `spec.targetNamespace`).
    fn placement(_: &Value) -> Result<Placement, DecodeError> {
        Ok(Placement::AtApply)
    }

    /// Every object of the kind whose values at the default path have the chart create the
    /// device plugin's ConfigMap, in the namespace it installs the operator into.
    async fn discover(c: &Cluster) -> Result<Vec<Found>, KubeError> {
        let name = T::describe().name;
        let kind = T::from_import("", "").object().holder.kind;
        let mut out = Vec::new();
        for (h, held) in c.list_holders(kind).await? {
            let cfg = value_at(&held.effective, &format!("{DEFAULT_VALUES_PATH}.config"))
                .map(ChartConfig::of)
                .unwrap_or_default();
            let (Some(cm), true, Some(ns)) = (cfg.name(), cfg.created(), held.operator_namespace)
            else {
                continue;
            };
            out.push(Found {
                import_id: format!("{name}:{}/{}/{cm}", h.namespace, h.name),
                namespace: ns,
                name: cm,
                delivery: name,
                through: format!("the {} {}/{}", kind.noun(), h.namespace, h.name),
                certain: true,
            });
        }
        Ok(out)
    }

    fn check(&self, desired: &Desired, diags: &mut Diagnostics) -> bool {
        names_stay_strings(desired, diags)
    }

    fn chart_values(&self, desired: &Desired) -> serde_json::Value {
        desired.helm_values(self.object().values_path)
    }

    async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        self.object().write(at, taken, w, diags).await
    }

    async fn prove_access(&self, at: &At<'_>) -> Result<(), KubeError> {
        self.object().prove_access(at).await
    }

    async fn read_back(
        &self,
        at: &At<'_>,
        _: &[String],
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        self.object().read_back(at, diags).await
    }

    async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        _: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        self.object().restore(at, taken, diags).await
    }
}

/// The `values_path` attribute's description in a GitOps block.
pub(super) const VALUES_PATH_DESCRIPTION: &str =
    "Dotted path of the operator's `devicePlugin` values in the chart. Default `devicePlugin`.";

/// A GitOps block's `namespace` attribute, described by `description`.
pub(super) fn namespace_attribute(description: &str) -> Attribute {
    Attribute::string("namespace")
        .optional()
        .describe(description)
        .validate(Matches::new(DNS_LABEL_RE, DNS_LABEL_HINT))
}

/// An Argo CD Application or Flux HelmRelease that holds the operator's values, as a block
/// names it.
pub(super) struct ValuesObject<'a> {
    pub holder: Holder,
    pub values_path: &'a str,
    /// The block, for diagnostics: `argocd`.
    pub block: &'static str,
    /// The block's attribute that names the object: `application`.
    pub name_attr: &'static str,
    /// What to do when a parent manages the object and would undo the write.
    pub parent_hint: &'static str,
}

impl ValuesObject<'_> {
    /// The object and its values; None after a diagnostic (missing, unreadable).
    async fn held(&self, at: &At<'_>, diags: &mut Diagnostics) -> Option<Held> {
        let (h, block, name_attr) = (&self.holder, self.block, self.name_attr);
        match at.cluster.read_holder(h).await {
            Ok(Some(held)) => Some(held),
            Ok(None) => {
                diags.push(
                    Diagnostic::error(
                        format!("{} not found", h.kind.noun()),
                        format!(
                            "There is no {} {}/{} (or its CRD is not installed), so there are \
                            no values to write the configs into. Check {block}.{name_attr} and \
                            {block}.namespace.",
                            h.kind.noun(),
                            h.namespace,
                            h.name,
                        ),
                    )
                    .at(AttrPath::attr(block).with_index(0).with_attr(name_attr)),
                );
                None
            }
            Err(e) => {
                diags.push(self.kube_diagnostic("read the", "", at.desired, &e));
                None
            }
        }
    }

    /// Writes the configs into the object's values: only the paths this resource owns change;
    /// what was there before is recorded on the first write, for destroy.
    pub(super) async fn write(
        &self,
        at: &At<'_>,
        taken: &mut Takeover,
        w: &mut Writing,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let d = at.desired;
        let held = self.held(at, diags).await?;
        if let Some(by) = &held.managed_by {
            diags.push(self.managed_warning(by));
        }
        let owned = d.helm_owned(self.values_path);
        let mut taken = taken.open::<ValuesTaken>();
        let changes = taken.changes(&owned, &held.values, w.first);
        let strategy = value_at(&held.effective, &mig_strategy_path(self.values_path))
            .and_then(|v| v.as_str());
        warn_operator_mismatch(d, None, strategy, diags);
        match at
            .cluster
            .write_holder_values(&self.holder, &changes.set)
            .await
        {
            Ok(written) => {
                w.wrote = true;
                w.operator_namespace = written.operator_namespace;
                taken.forget(&changes.released);
                Some(Reload::OnSync)
            }
            Err(e) => {
                diags.push(self.kube_diagnostic("write the", "'s values", d, &e));
                None
            }
        }
    }

    pub(super) async fn prove_access(&self, at: &At<'_>) -> Result<(), KubeError> {
        at.cluster.read_holder(&self.holder).await.map(|_| ())
    }

    /// What the object's values say the chart will render; None after an error diagnostic.
    pub(super) async fn read_back(
        &self,
        at: &At<'_>,
        diags: &mut Diagnostics,
    ) -> Option<ClusterView> {
        let held = match at.cluster.read_holder(&self.holder).await {
            Ok(Some(h)) => h,
            // Gone: the next apply has nowhere to write, and says so.
            Ok(None) => return Some(ClusterView::default()),
            Err(e) => {
                diags.push(self.kube_diagnostic("read the", "", at.desired, &e));
                return None;
            }
        };
        let vp = self.values_path;
        let cfg = value_at(&held.effective, &format!("{vp}.config"))
            .map(ChartConfig::of)
            .unwrap_or_default();
        // Every config these values give is rendered; there are no chart defaults to tell
        // apart here (the chart is not read).
        let data = cfg.data();
        Some(ClusterView {
            pointer_name: if cfg.created() { cfg.name() } else { None },
            default: cfg.default_config(),
            mig_strategy: value_at(&held.effective, &mig_strategy_path(vp))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            mig_strategy_ours: false,
            data: Some(data),
            operator_namespace: held.operator_namespace,
        })
    }

    /// Destroy: the object gets back what it had where this resource wrote (or loses those
    /// paths when there is no record).
    pub(super) async fn restore(
        &self,
        at: &At<'_>,
        taken: &Takeover,
        diags: &mut Diagnostics,
    ) -> Option<Reload> {
        let d = at.desired;
        match at.cluster.read_holder(&self.holder).await {
            // Nothing to give back to.
            Ok(None) => return Some(Reload::OnSync),
            Ok(Some(_)) => {}
            Err(e) => {
                diags.push(self.kube_diagnostic("read the", "", d, &e));
                return None;
            }
        }
        let changes = taken
            .get::<ValuesTaken>()
            .give_back(d.helm_owned(self.values_path));
        match at.cluster.write_holder_values(&self.holder, &changes).await {
            Ok(_) => Some(Reload::OnSync),
            Err(e) => {
                diags.push(self.kube_diagnostic("give the", " its values back", d, &e));
                None
            }
        }
    }

    /// A Kubernetes error about the object: "Could not {verb} {noun}{rest}".
    fn kube_diagnostic(&self, verb: &str, rest: &str, d: &Desired, e: &KubeError) -> Diagnostic {
        let action = format!("{verb} {}{rest}", self.holder.kind.noun());
        kube_diagnostic(&action, d.access, e)
    }

    /// The object is itself kept by a parent that would undo the change.
    fn managed_warning(&self, by: &str) -> Diagnostic {
        let h = &self.holder;
        Diagnostic::warning(
            format!("{} managed by a parent", h.kind.noun()),
            format!(
                "The {} {}/{} is itself managed by {by}: its next sync puts the parent's version \
                of the object back and undoes what this resource wrote. {}.",
                h.kind.noun(),
                h.namespace,
                h.name,
                self.parent_hint,
            ),
        )
        .at(AttrPath::attr(self.block))
    }
}
