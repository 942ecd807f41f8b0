//! Delivery `argocd`: the configs go into the Helm values of the Argo CD `Application` that
//! installs the GPU operator's chart, and Argo CD renders them on its next sync. The object's
//! life is the GitOps deliveries' (`gitops`); this file says which object and how to name it.

use async_trait::async_trait;
use tfplugin::object::DecodeError;
use tfplugin::schema::{Attribute, Block};
use tfplugin::{Diagnostics, Value};

use super::super::desired::Desired;
use super::gitops::{VALUES_PATH_DESCRIPTION, ValuesObject, namespace_attribute};
use super::life::{About, At, BlockAbout, ClusterView, Lifecycle, Placement, Reload, Writing};
use super::takeover::Takeover;
use super::values::{DEFAULT_VALUES_PATH, names_stay_strings, values_path_attribute};
use crate::cluster::KubeError;
use crate::cluster::gitops::{Holder, Kind};

const NAME: &str = "argocd";
const DEFAULT_NAMESPACE: &str = "argocd";

tfplugin::object! {
    /// The `argocd` block.
    pub struct ArgoArgs {
        pub application: String,
        pub namespace: Option<String>,
        pub chart: Option<String>,
        pub values_path: Option<String>,
    }
}

fn block() -> Block {
    Block::new(
        "Deliver through the Argo CD `Application` that installs the GPU \
        operator's chart: the configs are written into its Helm values \
        (`spec.source.helm.valuesObject`, or that of the one `spec.sources[]` entry that is the \
        chart), every other value is left alone, and Argo CD renders them on its next sync. Only \
        `values_path` changes; a hand edit there is drift. Destroy gives the Application back what \
        it had there. The `helm.values` string is read (it renders too) but never rewritten; \
        `valuesObject` takes precedence over it.",
    )
    .attr(
        Attribute::string("application")
            .required()
            .describe("Name of the Application, e.g. `gpu-operator`."),
    )
    .attr(namespace_attribute(&format!(
        "Namespace of the Application. Default `{DEFAULT_NAMESPACE}`."
    )))
    .attr(Attribute::string("chart").optional().describe(
        "With several `spec.sources`, the `chart` of the one that installs the operator, e.g. \
            `gpu-operator`.",
    ))
    .attr(values_path_attribute(VALUES_PATH_DESCRIPTION))
}

impl ArgoArgs {
    fn values_path(&self) -> &str {
        self.values_path.as_deref().unwrap_or(DEFAULT_VALUES_PATH)
    }

    fn object(&self) -> ValuesObject<'_> {
        ValuesObject {
            holder: Holder {
                kind: Kind::ArgoCd,
                namespace: self
                    .namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
                name: self.application.clone(),
                chart: self.chart.clone(),
            },
            values_path: self.values_path(),
            block: NAME,
            name_attr: "application",
            parent_hint: "Change the values in the parent's source instead, or have the parent \
                ignore them (`ignoreDifferences` on `/spec/source/helm/valuesObject`, with \
                `RespectIgnoreDifferences=true`)",
        }
    }
}

#[async_trait]
impl Lifecycle for ArgoArgs {
    fn about() -> About {
        About {
            name: NAME,
            summary: "`argocd` (the values of the Argo CD Application that installs it)",
            block: Some(BlockAbout {
                schema: block,
                names: "the object that holds the operator's values",
                example: "argocd { application = \"gpu-operator\" }",
                import_id: "<namespace>/<application>/<configmap>",
            }),
        }
    }

    /// The object's namespace stays unset when it is the default, as a configuration leaves it.
    fn imported(namespace: &str, application: &str) -> Self {
        Self {
            application: application.to_string(),
            namespace: (namespace != DEFAULT_NAMESPACE).then(|| namespace.to_string()),
            ..Self::default()
        }
    }

    fn import_object(&self) -> Option<(String, String)> {
        let holder = self.object().holder;
        Some((holder.namespace, holder.name))
    }

    /// The chart installs the operator into the Application's `spec.destination.namespace`.
    fn placement(_: &Value) -> Result<Placement, DecodeError> {
        Ok(Placement::AtApply)
    }

    fn check(&self, desired: &Desired, diags: &mut Diagnostics) -> bool {
        names_stay_strings(desired, diags)
    }

    fn chart_values(&self, desired: &Desired) -> serde_json::Value {
        desired.helm_values(self.values_path())
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
