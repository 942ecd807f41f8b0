//! Delivery `flux`: the configs go into the `spec.values` of the Flux `HelmRelease` that
//! installs the GPU operator's chart, and helm-controller renders them on its next
//! reconciliation. The object's life is the GitOps deliveries' (`gitops`); this file says which
//! object and how to name it.

use tfplugin::schema::{Attribute, Block};

use super::gitops::{GitopsSettings, VALUES_PATH_DESCRIPTION, ValuesObject, namespace_attribute};
use super::life::{About, BlockAbout};
use super::values::{DEFAULT_VALUES_PATH, values_path_attribute};
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
}

impl GitopsSettings for FluxArgs {
    fn describe() -> About {
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
    fn from_import(namespace: &str, helm_release: &str) -> Self {
        Self {
            helm_release: helm_release.to_string(),
            namespace: (namespace != DEFAULT_NAMESPACE).then(|| namespace.to_string()),
            ..Self::default()
        }
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
