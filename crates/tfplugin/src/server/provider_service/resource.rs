//! The managed resource RPCs, in the order terraform calls them over an object's life: validate,
//! upgrade and read the stored state, plan, apply, and import. What terraform expects of each
//! answer (null state means gone, a failed step keeps the prior state) is decided here, so that
//! a resource only says what it did.

use std::sync::Arc;

use super::identity;
use super::registry::Registry;
use super::template::{WithDiagnostics, try_diag};
use crate::api::{PlanRequest, Private};
use crate::schema::validate_config;
use crate::server::convert::{self, codec_diag, decode, diagnostics, encode};
use crate::server::proto::tfplugin6 as pb;
use crate::{AttrPath, Diagnostic, Diagnostics, Value, plan};

pub(super) async fn validate(
    reg: Arc<Registry>,
    req: pb::validate_resource_config::Request,
) -> pb::validate_resource_config::Response {
    type R = pb::validate_resource_config::Response;
    let (res, schema) = try_diag!(reg.resource(&req.type_name), R);
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty()).map_err(|e| codec_diag("configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
    res.validate(&config, &mut diags);
    R::from_diagnostics(&diags)
}

pub(super) async fn upgrade_state(
    reg: Arc<Registry>,
    req: pb::upgrade_resource_state::Request,
) -> pb::upgrade_resource_state::Response {
    type R = pb::upgrade_resource_state::Response;
    let (_, schema) = try_diag!(reg.resource(&req.type_name), R);
    if req.version > schema.version {
        return R::from_diagnostics(
            &Diagnostic::error(
                "State written by a newer provider",
                format!(
                    "The state of this {} has schema version {}, newer than this provider's {}. \
                    Upgrade {}.",
                    req.type_name,
                    req.version,
                    schema.version,
                    reg.binary()
                ),
            )
            .into(),
        );
    }
    // Every schema version so far has the same shape, so older states decode as they are.
    let raw = req.raw_state.map(|r| r.json).unwrap_or_default();
    let ty = schema.ty();
    let state = try_diag!(
        crate::json::decode(&raw, &ty).map_err(|e| codec_diag("stored state", &e)),
        R
    );
    let upgraded = try_diag!(
        encode(&state, &ty).map_err(|e| codec_diag("upgraded state", &e)),
        R
    );
    R {
        upgraded_state: Some(upgraded),
        diagnostics: Vec::new(),
    }
}

pub(super) async fn read(
    reg: Arc<Registry>,
    req: pb::read_resource::Request,
) -> pb::read_resource::Response {
    type R = pb::read_resource::Response;
    let (res, schema, id_schema) = try_diag!(reg.resource_with_identity(&req.type_name), R);
    let ty = schema.ty();
    let state = try_diag!(
        decode(req.current_state.as_ref(), &ty).map_err(|e| codec_diag("current state", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    let mut private = Private(req.private);
    let new_state = if state.is_null() {
        None
    } else {
        res.read(&state, &mut private, &mut diags).await
    };
    let new_identity = match &new_state {
        Some(v) => try_diag!(identity::of(res, id_schema, v), R),
        None => None,
    };
    let new_state = match new_state {
        Some(v) => try_diag!(
            encode(&v, &ty).map_err(|e| codec_diag("refreshed state", &e)),
            R
        ),
        // The object is gone: an empty value tells terraform to plan its creation.
        None if !diags.has_errors() => pb::DynamicValue::default(),
        // A failed read keeps the prior state.
        None => req.current_state.unwrap_or_default(),
    };
    R {
        new_state: Some(new_state),
        diagnostics: diagnostics(&diags),
        private: private.0,
        new_identity,
        ..Default::default()
    }
}

pub(super) async fn plan(
    reg: Arc<Registry>,
    req: pb::plan_resource_change::Request,
) -> pb::plan_resource_change::Response {
    type R = pb::plan_resource_change::Response;
    let (res, schema, id_schema) = try_diag!(reg.resource_with_identity(&req.type_name), R);
    let ty = schema.ty();
    let prior = try_diag!(
        decode(req.prior_state.as_ref(), &ty).map_err(|e| codec_diag("prior state", &e)),
        R
    );
    let proposed = try_diag!(
        decode(req.proposed_new_state.as_ref(), &ty).map_err(|e| codec_diag("proposed state", &e)),
        R
    );
    let config = try_diag!(
        decode(req.config.as_ref(), &ty).map_err(|e| codec_diag("configuration", &e)),
        R
    );
    if proposed.is_null() {
        // Destroy: nothing to plan; the object keeps its identity until it is gone.
        return R {
            planned_state: req.proposed_new_state,
            planned_private: req.prior_private,
            planned_identity: req.prior_identity,
            ..Default::default()
        };
    }
    let mut planned = plan::plan(&schema.block, &prior, &proposed, &config);
    let mut diags = Diagnostics::new();
    res.modify_plan(
        &PlanRequest {
            prior: &prior,
            config: &config,
        },
        &mut planned,
        &mut diags,
    )
    .await;
    let replace = plan::replace_paths(&schema.block, &prior, &planned.state);
    planned.requires_replace.extend(replace);
    // Known once everything that names the object is: always in an in-place update (those
    // attributes force replacement), and in a create only when the configuration spells it out.
    let planned_identity = try_diag!(identity::of(res, id_schema, &planned.state), R);
    let state = try_diag!(
        encode(&planned.state, &ty).map_err(|e| codec_diag("planned state", &e)),
        R
    );
    R {
        planned_state: Some(state),
        planned_identity,
        requires_replace: planned.requires_replace.iter().map(convert::path).collect(),
        planned_private: req.prior_private,
        diagnostics: diagnostics(&diags),
        ..Default::default()
    }
}

pub(super) async fn apply(
    reg: Arc<Registry>,
    req: pb::apply_resource_change::Request,
) -> pb::apply_resource_change::Response {
    type R = pb::apply_resource_change::Response;
    let (res, schema, id_schema) = try_diag!(reg.resource_with_identity(&req.type_name), R);
    let ty = schema.ty();
    let prior = try_diag!(
        decode(req.prior_state.as_ref(), &ty).map_err(|e| codec_diag("prior state", &e)),
        R
    );
    let planned = try_diag!(
        decode(req.planned_state.as_ref(), &ty).map_err(|e| codec_diag("planned state", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    let mut private = Private(req.planned_private);
    let new_state = if planned.is_null() {
        res.delete(&prior, &private, &mut diags).await;
        // A failed delete keeps the object in state.
        if diags.has_errors() {
            prior
        } else {
            Value::Null
        }
    } else if prior.is_null() {
        res.create(&planned, &mut private, &mut diags).await
    } else {
        res.update(&prior, &planned, &mut private, &mut diags).await
    };
    let new_identity = try_diag!(identity::of(res, id_schema, &new_state), R);
    let new_state = try_diag!(
        encode(&new_state, &ty).map_err(|e| codec_diag("new state", &e)),
        R
    );
    R {
        new_state: Some(new_state),
        new_identity,
        private: private.0,
        diagnostics: diagnostics(&diags),
        ..Default::default()
    }
}

pub(super) async fn import(
    reg: Arc<Registry>,
    req: pb::import_resource_state::Request,
) -> pb::import_resource_state::Response {
    type R = pb::import_resource_state::Response;
    let (res, schema, id_schema) = try_diag!(reg.resource_with_identity(&req.type_name), R);
    let mut diags = Diagnostics::new();
    // An `import` block names the object by ID or, from terraform 1.12, by identity; the ID is
    // empty in the second case.
    let given = req
        .identity
        .as_ref()
        .and_then(|i| i.identity_data.as_ref())
        .filter(|_| req.id.is_empty());
    let state = match (given, id_schema) {
        (Some(data), Some(ids)) => {
            let given = try_diag!(
                decode(Some(data), &ids.ty()).map_err(|e| codec_diag("import identity", &e)),
                R
            );
            res.import_identity(&given, &mut diags).await
        }
        (Some(_), None) => {
            diags.push(Diagnostic::error(
                "Import by identity not supported",
                format!(
                    "{} has no identity; import it by its ID (`import {{ id = \"...\" }}`).",
                    req.type_name
                ),
            ));
            None
        }
        (None, _) => res.import(&req.id, &mut diags).await,
    };
    let Some(state) = state else {
        return R::from_diagnostics(&diags);
    };
    let identity = try_diag!(identity::of(res, id_schema, &state), R);
    let state = try_diag!(
        encode(&state, &schema.ty()).map_err(|e| codec_diag("imported state", &e)),
        R
    );
    R {
        imported_resources: vec![pb::import_resource_state::ImportedResource {
            type_name: req.type_name,
            state: Some(state),
            identity,
            ..Default::default()
        }],
        diagnostics: diagnostics(&diags),
        ..Default::default()
    }
}
