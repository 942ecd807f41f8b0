//! The RPCs about the provider as a whole. Terraform calls them before any resource: what the
//! provider offers, then its configuration, checked and then applied.

use std::sync::Arc;

use super::registry::Registry;
use super::template::{WithDiagnostics, try_diag};
use crate::schema::validate_config;
use crate::server::convert::{codec_diag, decode};
use crate::server::proto::tfplugin6 as pb;
use crate::{AttrPath, Diagnostics};

pub(super) fn metadata(reg: &Registry) -> pb::get_metadata::Response {
    let sorted = |it: Vec<&String>| {
        let mut v: Vec<String> = it.into_iter().cloned().collect();
        v.sort();
        v
    };
    pb::get_metadata::Response {
        server_capabilities: Some(super::registry::SERVER_CAPABILITIES),
        data_sources: sorted(reg.data_sources.keys().collect())
            .into_iter()
            .map(|type_name| pb::get_metadata::DataSourceMetadata { type_name })
            .collect(),
        resources: sorted(reg.resources.keys().collect())
            .into_iter()
            .map(|type_name| pb::get_metadata::ResourceMetadata { type_name })
            .collect(),
        list_resources: sorted(reg.list_resources.keys().collect())
            .into_iter()
            .map(|type_name| pb::get_metadata::ListResourceMetadata { type_name })
            .collect(),
        actions: sorted(reg.actions.keys().collect())
            .into_iter()
            .map(|type_name| pb::get_metadata::ActionMetadata { type_name })
            .collect(),
        functions: sorted(reg.functions.keys().collect())
            .into_iter()
            .map(|name| pb::get_metadata::FunctionMetadata { name })
            .collect(),
        ..Default::default()
    }
}

pub(super) fn schema(reg: &Registry) -> pb::get_provider_schema::Response {
    reg.schema_response().clone()
}

pub(super) async fn validate(
    reg: Arc<Registry>,
    req: pb::validate_provider_config::Request,
) -> pb::validate_provider_config::Response {
    type R = pb::validate_provider_config::Response;
    let schema = &reg.provider_schema;
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty())
            .map_err(|e| codec_diag("provider configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
    reg.provider.validate_config(&config, &mut diags);
    R::from_diagnostics(&diags)
}

pub(super) async fn configure(
    reg: Arc<Registry>,
    req: pb::configure_provider::Request,
) -> pb::configure_provider::Response {
    type R = pb::configure_provider::Response;
    let config = try_diag!(
        decode(req.config.as_ref(), &reg.provider_schema.ty())
            .map_err(|e| codec_diag("provider configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    reg.provider
        .configure(&req.terraform_version, &config, &mut diags)
        .await;
    R::from_diagnostics(&diags)
}
