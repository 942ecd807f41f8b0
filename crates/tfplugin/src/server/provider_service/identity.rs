//! Resource identity (protocol 6.9, terraform 1.12 and later): the few attributes that name one
//! object for as long as it lives. Terraform asks for the identity schemas beside the resource
//! schemas, stores the identity each Read, Plan, Apply and Import answer carries next to the
//! state, imports by it (`import { identity = {...} }`), and list resources return it. Older
//! terraform never asks and ignores the fields, so identities cost it nothing.
//!
//! What terraform checks of an identity (internal/terraform/node_resource_abstract_instance.go,
//! validateIdentity and validateIdentityKnown): it conforms to the identity schema's object type,
//! and it is wholly known everywhere but in the plan of a create or a replacement. A resource
//! answers None while it cannot tell, which sends no identity at all.

use std::sync::Arc;

use super::registry::Registry;
use super::template::{WithDiagnostics, try_diag};
use crate::api::{IdentitySchema, Resource};
use crate::server::convert::{codec_diag, encode};
use crate::server::proto::tfplugin6 as pb;
use crate::{Diagnostic, Diagnostics, Value};

pub(super) fn schemas(reg: &Registry) -> pb::get_resource_identity_schemas::Response {
    pb::get_resource_identity_schemas::Response {
        identity_schemas: reg
            .identities
            .iter()
            .map(|(name, s)| (name.clone(), schema(s)))
            .collect(),
        diagnostics: Vec::new(),
    }
}

fn schema(s: &IdentitySchema) -> pb::ResourceIdentitySchema {
    pb::ResourceIdentitySchema {
        version: s.version,
        identity_attributes: s
            .attributes
            .iter()
            .map(|a| pb::resource_identity_schema::IdentityAttribute {
                name: a.name.to_string(),
                r#type: a.ty.to_json_bytes(),
                required_for_import: a.required_for_import,
                optional_for_import: a.optional_for_import,
                description: a.description.to_string(),
            })
            .collect(),
    }
}

/// Terraform hands over identities it stored as JSON, with the version that wrote them. Every
/// identity schema so far has one version, so an identity decodes as it is; one written by a
/// newer provider is refused rather than misread.
pub(super) async fn upgrade(
    reg: Arc<Registry>,
    req: pb::upgrade_resource_identity::Request,
) -> pb::upgrade_resource_identity::Response {
    type R = pb::upgrade_resource_identity::Response;
    let (_, _, identity) = try_diag!(reg.resource_with_identity(&req.type_name), R);
    let Some(identity) = identity else {
        return R::from_diagnostics(
            &Diagnostic::error(
                "Resource has no identity",
                format!(
                    "{} declares no identity, yet terraform asked to upgrade one. Upgrade \
                        terraform or {} so both agree on the schema.",
                    req.type_name,
                    reg.binary()
                ),
            )
            .into(),
        );
    };
    if req.version > identity.version {
        return R::from_diagnostics(
            &Diagnostic::error(
                "Identity written by a newer provider",
                format!(
                    "The stored identity of this {} has version {}, newer than this provider's {}. \
                    Upgrade {}.",
                    req.type_name,
                    req.version,
                    identity.version,
                    reg.binary()
                ),
            )
            .into(),
        );
    }
    let raw = req.raw_identity.map(|r| r.json).unwrap_or_default();
    let ty = identity.ty();
    let value = try_diag!(
        crate::json::decode(&raw, &ty).map_err(|e| codec_diag("stored identity", &e)),
        R
    );
    let upgraded = try_diag!(
        encode(&value, &ty).map_err(|e| codec_diag("upgraded identity", &e)),
        R
    );
    R {
        upgraded_identity: Some(pb::ResourceIdentityData {
            identity_data: Some(upgraded),
        }),
        diagnostics: Vec::new(),
    }
}

/// The identity of the object `state` describes, ready for a response; None for a resource
/// without identity, a null state, or one whose identity the resource cannot tell yet.
pub(super) fn of(
    res: &Arc<dyn Resource>,
    schema: Option<&IdentitySchema>,
    state: &Value,
) -> Result<Option<pb::ResourceIdentityData>, Diagnostics> {
    let Some(schema) = schema else {
        return Ok(None);
    };
    if state.is_null() {
        return Ok(None);
    }
    let Some(identity) = res.identity(state).filter(Value::is_fully_known) else {
        return Ok(None);
    };
    let data = encode(&identity, &schema.ty()).map_err(|e| codec_diag("identity", &e))?;
    Ok(Some(pb::ResourceIdentityData {
        identity_data: Some(data),
    }))
}
