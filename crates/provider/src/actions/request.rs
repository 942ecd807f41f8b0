//! How an action's Kubernetes requests end when they do not succeed, and the one way an action
//! sends one: held to the action's time and terraform's stop, since the kube client's own retries
//! of a 503 (an API server restarting) could otherwise outlast both.

use std::future::Future;

use crate::cluster::KubeError;
use crate::operation::{Interrupted, OpCtx};

/// A request or wait of an action that did not succeed: the API's error, or the action's time or
/// terraform's stop came first.
pub(super) enum Halted {
    Kube(KubeError),
    Interrupted(Interrupted),
}

impl From<Interrupted> for Halted {
    fn from(i: Interrupted) -> Halted {
        Halted::Interrupted(i)
    }
}

/// Runs `request` under `ctx`: its time and terraform's stop end it as [`Halted::Interrupted`].
pub(super) async fn call<T>(
    ctx: &OpCtx,
    what: &str,
    request: impl Future<Output = Result<T, KubeError>>,
) -> Result<T, Halted> {
    match ctx.run(what, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Halted::Kube(e)),
        Err(i) => Err(Halted::Interrupted(i)),
    }
}
