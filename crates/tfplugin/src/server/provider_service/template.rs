//! What every handler shares, so that each one reads as the same few steps. A handler that fails
//! early answers with its diagnostics alone, and a handler that panics must cost terraform one
//! error diagnostic, not the plugin process and every operation still running in it.

use std::future::Future;

use tonic::{Response, Status};

use super::registry::Registry;
use crate::server::convert::diagnostics;
use crate::server::proto::tfplugin6 as pb;
use crate::{Diagnostic, Diagnostics};

/// Responses that can carry diagnostics, so the shared template can fill them.
pub(super) trait WithDiagnostics: Default {
    fn set_diagnostics(&mut self, d: Vec<pb::Diagnostic>);
    fn from_diagnostics(d: &Diagnostics) -> Self {
        let mut r = Self::default();
        r.set_diagnostics(diagnostics(d));
        r
    }
}

macro_rules! with_diagnostics {
    ($($t:ty),* $(,)?) => {$(
        impl WithDiagnostics for $t {
            fn set_diagnostics(&mut self, d: Vec<pb::Diagnostic>) { self.diagnostics = d; }
        }
    )*};
}

with_diagnostics!(
    pb::validate_provider_config::Response,
    pb::validate_resource_config::Response,
    pb::validate_data_resource_config::Response,
    pb::upgrade_resource_state::Response,
    pb::upgrade_resource_identity::Response,
    pb::configure_provider::Response,
    pb::read_resource::Response,
    pb::plan_resource_change::Response,
    pb::apply_resource_change::Response,
    pb::import_resource_state::Response,
    pb::move_resource_state::Response,
    pb::read_data_source::Response,
    pb::validate_list_resource_config::Response,
    pb::validate_ephemeral_resource_config::Response,
    pb::open_ephemeral_resource::Response,
    pb::renew_ephemeral_resource::Response,
    pb::close_ephemeral_resource::Response,
    pb::validate_action_config::Response,
    pb::plan_action::Response,
);

/// Shorthand for "decode or answer with a diagnostic".
macro_rules! try_diag {
    ($e:expr, $resp:ty) => {
        match $e {
            Ok(v) => v,
            Err(d) => return <$resp>::from_diagnostics(&d),
        }
    };
}
pub(super) use try_diag;

/// Runs a handler in its own task: a panic becomes an error diagnostic on the response. A free
/// function of the registry rather than a method of the service, so that the service (mod.rs)
/// uses this module and not the other way round.
pub(super) async fn guarded<T, F>(
    registry: &Registry,
    rpc: &'static str,
    handler: F,
) -> Result<Response<T>, Status>
where
    T: WithDiagnostics + Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    match tokio::spawn(handler).await {
        Ok(r) => Ok(Response::new(r)),
        Err(e) => Ok(Response::new(T::from_diagnostics(&panic_diagnostic(
            registry, rpc, e,
        )))),
    }
}

pub(super) fn panic_diagnostic(
    reg: &Registry,
    rpc: &str,
    e: tokio::task::JoinError,
) -> Diagnostics {
    let cause = match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    };
    Diagnostic::error(
        "Provider internal error",
        format!(
            "The provider failed while handling {rpc}: {cause}. This is a bug in {}; please \
            report it with the configuration that triggered it.",
            reg.binary()
        ),
    )
    .into()
}
