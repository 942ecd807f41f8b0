//! What `terraform query` and an import by identity learn from the cluster: the device plugin
//! configs its plugins read and which delivery writes each (`delivery::found`), as list items
//! (identity, a name to show, and on request the state an import gives them).

use tfplugin::api::{Private, Resource};
use tfplugin::object::ToValue;
use tfplugin::{Diagnostic, Diagnostics, Value};

use super::delivery::{Found, found};
use super::model::ObjectIdentity;
use super::resource::DevicePluginConfigResource;
use crate::cluster as k;

/// One config as `terraform query` shows it.
pub struct Listed {
    pub identity: Value,
    pub display_name: String,
    /// The state an import gives it, when asked for; None when that import does not read.
    pub state: Option<Value>,
}

impl DevicePluginConfigResource {
    /// What the cluster the provider's `kubernetes` block reaches says; None after an error.
    async fn found_on_cluster(&self, diags: &mut Diagnostics) -> Option<Vec<Found>> {
        let settings = self.state.settings().kubernetes.clone();
        let c = match k::connect(&settings).await {
            Ok(c) => c,
            Err(e) => {
                diags.push(super::diagnostics::kube_diagnostic("connect", None, &e));
                return None;
            }
        };
        found(&c, diags).await
    }

    /// The configs the cluster's device plugins read, of `delivery` when given, each with the
    /// state an import gives it when `with_state`.
    pub async fn listed(
        &self,
        delivery: Option<&str>,
        with_state: bool,
        diags: &mut Diagnostics,
    ) -> Option<Vec<Listed>> {
        let all = self.found_on_cluster(diags).await?;
        let mut out = Vec::new();
        for f in all
            .into_iter()
            .filter(|f| delivery.is_none_or(|d| d == f.delivery))
        {
            let state = match with_state {
                true => self.imported_state(&f.import_id, diags).await,
                false => None,
            };
            out.push(Listed {
                identity: ObjectIdentity {
                    namespace: Some(f.namespace.clone()),
                    name: Some(f.name.clone()),
                }
                .to_value(),
                display_name: format!(
                    "{}/{} ({}, through {})",
                    f.namespace, f.name, f.delivery, f.through
                ),
                state,
            });
        }
        Some(out)
    }

    /// The state `import` then `read` give the ID.
    async fn imported_state(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let skeleton = self.import(id, diags).await?;
        self.read(&skeleton, &mut Private::default(), diags).await
    }

    /// The import ID an identity (namespace and name of the ConfigMap) stands for: the one of
    /// the delivery that writes it, as the cluster shows it, else the default delivery's.
    pub(super) async fn identity_import_id(
        &self,
        namespace: &str,
        name: &str,
        diags: &mut Diagnostics,
    ) -> String {
        let plain = format!("{namespace}/{name}");
        let mut looked = Diagnostics::new();
        let found = self.found_on_cluster(&mut looked).await;
        let hit = found
            .iter()
            .flatten()
            .find(|f| f.namespace == namespace && f.name == name);
        match hit {
            Some(f) => f.import_id.clone(),
            None => {
                if !looked.is_empty() {
                    let why: Vec<String> = looked.0.iter().map(|d| d.detail.clone()).collect();
                    diags.push(Diagnostic::warning(
                        "Delivery of the imported config not known",
                        format!(
                            "The provider could not look at all that might deliver {plain} \
                            ({}), so it is imported with the default delivery. If a Helm \
                            release, a GitOps object or NVIDIA's device plugin chart delivers \
                            it, import it by ID instead \
                            (`<delivery>:<namespace>/<object>/<configmap>`).",
                            why.join("; ")
                        ),
                    ));
                }
                plain
            }
        }
    }
}
