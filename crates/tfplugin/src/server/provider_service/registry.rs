//! The provider's types by name, with their schemas, built once at start. Terraform names a type
//! in every request, so the schemas are built here once rather than on each call. The full
//! GetProviderSchema answer is built on the first request for it: the provider declares that
//! answer optional, so terraform, which caches schemas, asks only some processes for it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::{Action, DataSource, Function, IdentitySchema, ListResource, Provider, Resource};
use crate::schema::Schema;
use crate::server::convert;
use crate::server::proto::tfplugin6 as pb;
use crate::{Diagnostic, Diagnostics};

/// A resource, its schema, and its identity schema when it has one.
pub(super) type WithIdentity<'a> = (
    &'a Arc<dyn Resource>,
    &'a Schema,
    Option<&'a IdentitySchema>,
);

pub(crate) struct Registry {
    pub(super) provider: Arc<dyn Provider>,
    pub(super) provider_schema: Schema,
    pub(super) data_sources: HashMap<String, (Arc<dyn DataSource>, Schema)>,
    pub(super) resources: HashMap<String, (Arc<dyn Resource>, Schema)>,
    pub(super) functions: HashMap<String, Arc<dyn Function>>,
    /// The identity schema of each resource that has one.
    pub(super) identities: HashMap<String, IdentitySchema>,
    pub(super) list_resources: HashMap<String, (Arc<dyn ListResource>, Schema)>,
    pub(super) actions: HashMap<String, (Arc<dyn Action>, Schema)>,
    /// The GetProviderSchema answer, built when first asked for.
    schema_response: std::sync::OnceLock<pb::get_provider_schema::Response>,
}

/// What the provider tells terraform it can do.
pub(super) const SERVER_CAPABILITIES: pb::ServerCapabilities = pb::ServerCapabilities {
    plan_destroy: false,
    get_provider_schema_optional: true,
    move_resource_state: false,
};

impl Registry {
    pub(crate) fn new(provider: Arc<dyn Provider>) -> Registry {
        let provider_schema = provider.schema();
        let data_sources: HashMap<_, _> = provider
            .data_sources()
            .into_iter()
            .map(|d| (d.type_name().to_string(), (d.clone(), d.schema())))
            .collect();
        let resources: HashMap<_, _> = provider
            .resources()
            .into_iter()
            .map(|r| (r.type_name().to_string(), (r.clone(), r.schema())))
            .collect();
        let identities: HashMap<_, _> = resources
            .iter()
            .filter_map(|(n, (r, _))| Some((n.clone(), r.identity_schema()?)))
            .collect();
        let list_resources: HashMap<_, _> = provider
            .list_resources()
            .into_iter()
            .map(|l| (l.type_name().to_string(), (l.clone(), l.schema())))
            .collect();
        let actions: HashMap<_, _> = provider
            .actions()
            .into_iter()
            .map(|a| (a.type_name().to_string(), (a.clone(), a.schema())))
            .collect();
        let functions: HashMap<_, _> = provider
            .functions()
            .into_iter()
            .map(|f| (f.name().to_string(), f))
            .collect();
        Registry {
            provider,
            provider_schema,
            data_sources,
            resources,
            functions,
            identities,
            list_resources,
            actions,
            schema_response: std::sync::OnceLock::new(),
        }
    }

    /// The GetProviderSchema answer: every schema and function signature, converted once.
    pub(super) fn schema_response(&self) -> &pb::get_provider_schema::Response {
        self.schema_response.get_or_init(|| {
            fn schemas_of<T>(m: &HashMap<String, (T, Schema)>) -> HashMap<String, pb::Schema> {
                m.iter()
                    .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                    .collect()
            }
            pb::get_provider_schema::Response {
                provider: Some(convert::schema(&self.provider_schema)),
                resource_schemas: schemas_of(&self.resources),
                data_source_schemas: schemas_of(&self.data_sources),
                functions: self
                    .functions
                    .iter()
                    .map(|(n, f)| (n.clone(), convert::function(&f.signature())))
                    .collect(),
                list_resource_schemas: schemas_of(&self.list_resources),
                // Terraform looks an action up here before each call (plugin6/grpc_provider.go
                // PlanAction, InvokeAction: "unknown action" otherwise); an older terraform skips
                // the field it does not know.
                action_schemas: self
                    .actions
                    .iter()
                    .map(|(n, (_, s))| {
                        let schema = Some(convert::schema(s));
                        (n.clone(), pb::ActionSchema { schema })
                    })
                    .collect(),
                server_capabilities: Some(SERVER_CAPABILITIES),
                ..Default::default()
            }
        })
    }

    /// The name users know the provider by in messages: terraform runs a provider's plugin only
    /// under the file name `terraform-provider-<type>`.
    pub(super) fn binary(&self) -> String {
        format!("terraform-provider-{}", self.provider.type_name())
    }

    pub(super) fn resource(
        &self,
        name: &str,
    ) -> Result<(&Arc<dyn Resource>, &Schema), Diagnostics> {
        self.resources
            .get(name)
            .map(|(r, s)| (r, s))
            .ok_or_else(|| unknown_type("resource", name, self.resources.keys()))
    }

    /// A resource with its schema and identity schema, for the RPCs that carry identities.
    pub(super) fn resource_with_identity(
        &self,
        name: &str,
    ) -> Result<WithIdentity<'_>, Diagnostics> {
        let (r, s) = self.resource(name)?;
        Ok((r, s, self.identities.get(name)))
    }

    pub(super) fn list_resource(
        &self,
        name: &str,
    ) -> Result<(&Arc<dyn ListResource>, &Schema), Diagnostics> {
        self.list_resources
            .get(name)
            .map(|(l, s)| (l, s))
            .ok_or_else(|| unknown_type("list resource", name, self.list_resources.keys()))
    }

    pub(super) fn action(&self, name: &str) -> Result<(&Arc<dyn Action>, &Schema), Diagnostics> {
        self.actions
            .get(name)
            .map(|(a, s)| (a, s))
            .ok_or_else(|| unknown_type("action", name, self.actions.keys()))
    }

    pub(super) fn data_source(
        &self,
        name: &str,
    ) -> Result<(&Arc<dyn DataSource>, &Schema), Diagnostics> {
        self.data_sources
            .get(name)
            .map(|(d, s)| (d, s))
            .ok_or_else(|| unknown_type("data source", name, self.data_sources.keys()))
    }
}

fn unknown_type<'a>(
    kind: &str,
    name: &str,
    known: impl Iterator<Item = &'a String>,
) -> Diagnostics {
    let mut known: Vec<&str> = known.map(String::as_str).collect();
    known.sort_unstable();
    Diagnostic::error(
        format!("Unknown {kind} type"),
        format!(
            "This provider has no {kind} {name:?}. Known: {}.",
            known.join(", ")
        ),
    )
    .into()
}
