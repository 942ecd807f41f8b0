//! One call to GKE, retried: transient failures (429, 5xx, UNAVAILABLE, dropped connections) a
//! few times, and for mutations GKE's "operation in progress" refusals until the deadline. The
//! client library's errors become [`CloudError`]s that keep google.rpc's code and message.

use std::future::Future;
use std::time::Duration;

use google_cloud_container_v1 as gcc;
use google_cloud_container_v1::model::{self as m, Operation};

use super::client::{GkeClient, MAX_TRANSIENT_RETRIES, RETRY_CAP};
use crate::cloud::error::{CloudError, Detail, error_chain};
use crate::operation::OpCtx;
use crate::operation::{
    Attempt, Backoff, Check, Failure, retry, retry_after_seconds, retryable_status,
};

/// What a failed call is worth.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// 429, 5xx, UNAVAILABLE, a dropped or refused connection: try again after a backoff.
    Transient,
    /// GKE runs another operation on the cluster or pool: wait for it, then try again.
    Busy,
    Final,
}

fn verdict(e: &gcc::Error) -> Verdict {
    if let Some(s) = e.status() {
        use google_cloud_gax::error::rpc::Code;
        match s.code {
            Code::Unavailable => return Verdict::Transient,
            Code::FailedPrecondition | Code::ResourceExhausted if is_busy_message(&s.message) => {
                return Verdict::Busy;
            }
            _ => {}
        }
    }
    if let Some(code) = e.http_status_code() {
        return if retryable_status(code) {
            Verdict::Transient
        } else {
            Verdict::Final
        };
    }
    if e.is_io() || e.is_connect() || e.is_transport() || e.is_timeout() {
        return Verdict::Transient;
    }
    Verdict::Final
}

/// GKE refuses an operation while an incompatible one runs, with 400 FAILED_PRECONDITION:
/// "Operation operation-... is currently creating a node pool for cluster c1. Please wait and try
/// again once it is done." (another on the pool, or one on the cluster: "... is currently upgrading
/// cluster c1. ..."), or "Cluster is running incompatible operation operation-...". And it refuses a
/// sixth concurrent operation on a cluster with 429 RESOURCE_EXHAUSTED: "Too many operations:
/// cluster \"c1\" hits the concurrent operations quota 5, please try again later." This client
/// queues its own operations (see `queue`), so these come from other clients' operations; like the
/// google provider (resource_container_node_pool.go, retryWhileIncompatibleOperation), it waits them
/// out until the deadline. Other FAILED_PRECONDITIONs and RESOURCE_EXHAUSTEDs are not this.
pub(super) fn is_busy_message(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("concurrent operations quota")
        || m.contains("incompatible operation")
        || m.contains("operation in progress")
        || m.contains("wait and try again")
        || (m.contains("operation") && m.contains("is currently"))
}

fn http_of_code(code: &str) -> u16 {
    match code {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "UNAUTHENTICATED" => 401,
        "PERMISSION_DENIED" => 403,
        "NOT_FOUND" => 404,
        "ALREADY_EXISTS" | "ABORTED" => 409,
        "RESOURCE_EXHAUSTED" => 429,
        "CANCELLED" => 499,
        "UNIMPLEMENTED" => 501,
        "UNAVAILABLE" => 503,
        "DEADLINE_EXCEEDED" => 504,
        _ => 500,
    }
}

fn code_of_http(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The client library's error as the cloud-neutral one, keeping google.rpc's code and message
/// (and the error itself as the source of the errors that have no code).
fn cloud_error(e: gcc::Error) -> CloudError {
    if let Some(s) = e.status() {
        let code = s.code.name().to_string();
        return CloudError::Api {
            status: e.http_status_code().unwrap_or_else(|| http_of_code(&code)),
            message: s.message.clone(),
            code,
        };
    }
    if let Some(status) = e.http_status_code() {
        let body = e
            .http_payload()
            .map(|b| {
                String::from_utf8_lossy(b)
                    .chars()
                    .take(300)
                    .collect::<String>()
            })
            .unwrap_or_default();
        return CloudError::Api {
            status,
            code: code_of_http(status).to_string(),
            message: if body.trim().is_empty() {
                format!("HTTP {status} without a google.rpc status")
            } else {
                body
            },
        };
    }
    let message = error_chain(&e);
    if e.is_authentication() {
        return CloudError::Auth(Detail::caused_by(message, e));
    }
    if e.is_deserialization() || e.is_serialization() {
        return CloudError::BadResponse(Detail::caused_by(message, e));
    }
    CloudError::Transport(Detail::caused_by(message, e))
}

fn retry_after(e: &gcc::Error) -> Option<Duration> {
    retry_after_seconds(
        e.http_headers()
            .and_then(|h| h.get("retry-after"))
            .and_then(|v| v.to_str().ok()),
    )
}

/// Where an operation stands: DONE (and then whether it failed, as `OperationFailed` with
/// google.rpc's code) or still running.
pub(super) fn operation_state(op: &Operation) -> Result<Check<()>, CloudError> {
    if op.status != m::operation::Status::Done {
        return Ok(Check::Pending {
            retry_after: None,
            waiting_for: None,
        });
    }
    match &op.error {
        Some(err) if err.code != 0 || !err.message.is_empty() => Err(CloudError::OperationFailed {
            code: op_error_code(err.code),
            message: err.message.clone(),
        }),
        _ => Ok(Check::Done(())),
    }
}

fn op_error_code(code: i32) -> String {
    google_cloud_gax::error::rpc::Code::from(code)
        .name()
        .to_string()
}

impl GkeClient {
    /// Calls `f` until it succeeds, retrying transient failures (at most
    /// MAX_TRANSIENT_RETRIES times) and, for mutations, GKE's "operation in progress" refusals
    /// (until the deadline), all bounded by `ctx`.
    pub(super) async fn call<T, Fut>(
        &self,
        ctx: &OpCtx,
        what: &str,
        mutation: bool,
        mut f: impl FnMut() -> Fut,
    ) -> Result<T, CloudError>
    where
        Fut: Future<Output = gcc::Result<T>>,
    {
        let attempt = move || {
            let sent = f();
            async move {
                // A call in flight is abandoned at the deadline or on a stop: terraform waits for
                // the provider to return before it exits.
                let e = match ctx.run(what, sent).await? {
                    Ok(v) => return Ok(Attempt::Done(v)),
                    Err(e) => e,
                };
                let verdict = verdict(&e);
                if !(verdict == Verdict::Transient || (verdict == Verdict::Busy && mutation)) {
                    return Err(cloud_error(e));
                }
                let retry_after = retry_after(&e);
                let last = cloud_error(e);
                let failure = Failure {
                    // A timeout names what kept us waiting, e.g. another operation on the cluster.
                    waiting_for: format!("{what} (last answer: {last})"),
                    last: Err(last),
                    retry_after,
                };
                Ok(if verdict == Verdict::Busy {
                    Attempt::Busy(failure)
                } else {
                    Attempt::Failed(failure)
                })
            }
        };
        let log = |f: &Failure<T, CloudError>, _: u32, delay: Duration| {
            if let Err(last) = &f.last {
                tracing::debug!(
                    call = what,
                    error = %last,
                    retry_in_ms = delay.as_millis() as u64,
                    "GKE call failed; retrying"
                );
            }
        };
        let backoff = Backoff::new(self.timing.retry_first, RETRY_CAP);
        // The attempts are the first and its transient retries.
        retry(ctx, backoff, MAX_TRANSIENT_RETRIES + 1, attempt, log).await
    }
}
