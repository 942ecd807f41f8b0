//! Delivery `flux`: the configs go into the `spec.values` of the Flux `HelmRelease` that
//! installs the GPU operator's chart, and helm-controller renders them on its next
//! reconciliation. The object's life is the GitOps deliveries' (`gitops`); this file says which
//! object and how to name it.

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

const NAME: &str = "flux";
const DEFAULT_NAMESPACE: &str = "flux-system";

tfplugin::object! {
    /// The `flux` block.
    pub struct FluxArgs {
        pub helm_release: String,
        pub namespace: Option<String>,
        pub values_path: Option<String>,
    }
}

fn block() -> Block {
    Block::new(
        "Deliver through the Flux `HelmRelease` that installs the GPU operator's \
        chart: the configs are written into its `spec.values` (which Flux merges over \
        `valuesFrom`), every other value is left alone, and helm-controller renders them on its \
        next reconciliation. A hand edit there is drift; destroy gives the HelmRelease back what \
        it had there.",
    )
    .attr(
        Attribute::string("helm_release")
            .required()
            .describe("Name of the HelmRelease, e.g. `gpu-operator`."),
    )
    .attr(namespace_attribute(&format!(
        "Namespace of the HelmRelease. Default `{DEFAULT_NAMESPACE}`."
    )))
    .attr(values_path_attribute(VALUES_PATH_DESCRIPTION))
}

impl FluxArgs {
    fn values_path(&self) -> &str {
        self.values_path.as_deref().unwrap_or(DEFAULT_VALUES_PATH)
    }

    fn object(&self) -> ValuesObject<'_> {
        ValuesObject {
            holder: Holder {
                kind: Kind::Flux,
                namespace: self
                    .namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
                name: self.helm_release.clone(),
                chart: None,
            },
            values_path: self.values_path(),
            block: NAME,
            name_attr: "helm_release",
            parent_hint: "Change the values in the Kustomization's source instead, or move these \
                values out of what it applies",
        }
    }
}

#[async_trait]
impl Lifecycle for FluxArgs {
    fn about() -> About {
        About {
            name: NAME,
            summary: "`flux` (the values of its Flux HelmRelease)",
            block: Some(BlockAbout {
                schema: block,
                names: "the object that holds the operator's values",
                example: "flux { helm_release = \"gpu-operator\" }",
                import_id: "<namespace>/<helm_release>/<configmap>",
            }),
        }
    }

    /// The object's namespace stays unset when it is the default, as a configuration leaves it.
    fn imported(namespace: &str, helm_release: &str) -> Self {
        Self {
            helm_release: helm_release.to_string(),
            namespace: (namespace != DEFAULT_NAMESPACE).then(|| namespace.to_string()),
            ..Self::default()
        }
    }

    fn import_object(&self) -> Option<(String, String)> {
        let holder = self.object().holder;
        Some((holder.namespace, holder.name))
    }

    /// The chart installs the operator into the HelmRelease's `spec.targetNamespace`.
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
