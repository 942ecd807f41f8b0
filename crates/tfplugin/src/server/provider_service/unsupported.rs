//! The RPCs for protocol features this layer does not offer: moving state between resource
//! types and ephemeral resources. The schema declares none of them, so terraform
//! has no reason to call these; should it do so anyway, the user reads an error diagnostic saying
//! what is missing rather than a failed gRPC call.

use super::registry::Registry;
use super::template::WithDiagnostics;
use crate::server::proto::tfplugin6 as pb;
use crate::{Diagnostic, Diagnostics};

pub(super) fn move_state(
    reg: &Registry,
    req: pb::move_resource_state::Request,
) -> pb::move_resource_state::Response {
    WithDiagnostics::from_diagnostics(&not_supported(
        reg,
        "Moving state between resource types",
        &req.target_type_name,
    ))
}

/// Every ephemeral resource RPC, whose responses differ only in type.
pub(super) fn ephemeral<R: WithDiagnostics>(reg: &Registry, type_name: &str) -> R {
    R::from_diagnostics(&not_supported(reg, "Ephemeral resources", type_name))
}

fn not_supported(reg: &Registry, what: &str, type_name: &str) -> Diagnostics {
    Diagnostic::error(
        "Not supported",
        format!(
            "{what} are not supported by {} (requested for {type_name:?}).",
            reg.binary()
        ),
    )
    .into()
}
