//! Delivery `argocd`: the configs go into the Helm values of the Argo CD `Application` that
//! installs the GPU operator's chart, and Argo CD renders them on its next sync. The object's
//! life is the GitOps deliveries' (`gitops`); this file says which object and how to name it.

use tfplugin::schema::{Attribute, Block};

use super::gitops::{GitopsSettings, VALUES_PATH_DESCRIPTION, ValuesObject, namespace_attribute};
use super::life::{About, BlockAbout};
use super::values::{DEFAULT_VALUES_PATH, values_path_attribute};
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
}

impl GitopsSettings for ArgoArgs {
    fn describe() -> About {
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
    fn from_import(namespace: &str, application: &str) -> Self {
        Self {
            application: application.to_string(),
            namespace: (namespace != DEFAULT_NAMESPACE).then(|| namespace.to_string()),
            ..Self::default()
        }
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
