//! The provider's types by name, with their schemas, built once at start. Terraform asks for the
//! schemas on every run and names a type in every request, so both answers are computed here
//! once rather than on each call.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::{DataSource, Function, IdentitySchema, ListResource, Provider, Resource};
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
    pub(super) schema_response: pb::get_provider_schema::Response,
}

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
        let functions: HashMap<_, _> = provider
            .functions()
            .into_iter()
            .map(|f| (f.name().to_string(), f))
            .collect();
        let fn_defs: HashMap<String, pb::Function> = functions
            .iter()
            .map(|(n, f)| (n.clone(), convert::function(&f.signature())))
            .collect();
        let schema_response = pb::get_provider_schema::Response {
            provider: Some(convert::schema(&provider_schema)),
            resource_schemas: resources
                .iter()
                .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                .collect(),
            data_source_schemas: data_sources
                .iter()
                .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                .collect(),
            functions: fn_defs,
            list_resource_schemas: list_resources
                .iter()
                .map(|(n, (_, s))| (n.clone(), convert::schema(s)))
                .collect(),
            server_capabilities: Some(pb::ServerCapabilities {
                plan_destroy: false,
                get_provider_schema_optional: true,
                move_resource_state: false,
            }),
            ..Default::default()
        };
        Registry {
            provider,
            provider_schema,
            data_sources,
            resources,
            functions,
            identities,
            list_resources,
            schema_response,
        }
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
