//! The data source RPCs. A data source has no state of its own: terraform validates its
//! configuration and reads it on every plan.

use std::sync::Arc;

use super::registry::Registry;
use super::template::{WithDiagnostics, try_diag};
use crate::schema::validate_config;
use crate::server::convert::{codec_diag, decode, diagnostics, encode};
use crate::server::proto::tfplugin6 as pb;
use crate::{AttrPath, Diagnostics};

pub(super) async fn validate(
    reg: Arc<Registry>,
    req: pb::validate_data_resource_config::Request,
) -> pb::validate_data_resource_config::Response {
    type R = pb::validate_data_resource_config::Response;
    let (ds, schema) = try_diag!(reg.data_source(&req.type_name), R);
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty()).map_err(|e| codec_diag("configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
    ds.validate(&config, &mut diags);
    R::from_diagnostics(&diags)
}

pub(super) async fn read(
    reg: Arc<Registry>,
    req: pb::read_data_source::Request,
) -> pb::read_data_source::Response {
    type R = pb::read_data_source::Response;
    let (ds, schema) = try_diag!(reg.data_source(&req.type_name), R);
    let ty = schema.ty();
    let config = try_diag!(
        decode(req.config.as_ref(), &ty).map_err(|e| codec_diag("configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    let state = ds.read(&config, &mut diags).await;
    if diags.has_errors() {
        return R::from_diagnostics(&diags);
    }
    let state = try_diag!(
        encode(&state, &ty).map_err(|e| codec_diag("data source result", &e)),
        R
    );
    R {
        state: Some(state),
        diagnostics: diagnostics(&diags),
        ..Default::default()
    }
}
