//! One EKS API call, retried: throttling, 5xx and broken connections are tried again with backoff
//! (a server's Retry-After wins) up to [`MAX_ATTEMPTS`], never beyond the operation's deadline or a
//! stop. The SDK's errors become [`CloudError`]s; every answer's body is bounded before the SDK
//! reads it.

use std::future::Future;
use std::time::Duration;

use aws_sdk_eks::config::http::HttpResponse;
use aws_sdk_eks::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use super::client::{EksClient, MAX_ATTEMPTS};
use crate::cloud::error::{CloudError, Detail};
use crate::operation::OpCtx;
use crate::operation::{Attempt, Backoff, Failure, retry, retry_after_seconds, retryable_status};

/// Codes that mean the credentials, not the request, are the problem.
const AUTH_CODES: &[&str] = &[
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
];
const THROTTLING_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ServerException",
    "ServiceUnavailableException",
];

impl EksClient {
    /// One API call with our retry policy: retryable failures are tried again with backoff (or the
    /// server's Retry-After) up to [`MAX_ATTEMPTS`]; the deadline and a stop end it at any point.
    pub(super) async fn call<T, E, F, Fut>(
        &self,
        ctx: &OpCtx,
        what: &str,
        mut send: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let attempt_timeout = self.attempt_timeout;
        let throttles = &self.throttles;
        let attempt = move || {
            let sent = tokio::time::timeout(attempt_timeout, send());
            async move {
                // A call in flight is abandoned at the deadline or on a stop.
                let failure = match ctx.run(what, sent).await? {
                    Ok(Ok(v)) => return Ok(Attempt::Done(v)),
                    Ok(Err(e)) => classify(e),
                    Err(_) => Classified {
                        error: CloudError::Transport(
                            format!("{what}: no answer within {}s", attempt_timeout.as_secs())
                                .into(),
                        ),
                        retryable: true,
                        retry_after: None,
                    },
                };
                if !failure.retryable {
                    return Err(failure.error);
                }
                if matches!(failure.error, CloudError::Api { .. }) {
                    throttles.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(Attempt::Failed(Failure {
                    last: Err(failure.error),
                    retry_after: failure.retry_after,
                    waiting_for: what.to_string(),
                }))
            }
        };
        let log = |f: &Failure<T, CloudError>, attempt: u32, _| {
            if let Err(e) = &f.last {
                tracing::debug!(attempt, call = what, error = %e, "eks call failed, retrying");
            }
        };
        let backoff = Backoff::new(self.retry_first, self.retry_cap);
        retry(ctx, backoff, MAX_ATTEMPTS, attempt, log).await
    }
}

/// A failed call as the retry loop sees it.
struct Classified {
    error: CloudError,
    retryable: bool,
    retry_after: Option<Duration>,
}

fn classify<E>(e: SdkError<E, HttpResponse>) -> Classified
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let text = format!("{}", DisplayErrorContext(&e));
    let about_credentials = text.to_ascii_lowercase().contains("credential");
    // Decided while `e` is borrowed; `e` then becomes the error's source.
    let (kind, message, retryable, retry_after): (fn(Detail) -> CloudError, _, _, _) = match &e {
        SdkError::ServiceError(se) => {
            let raw = se.raw();
            let status = raw.status().as_u16();
            if (200..300).contains(&status) && se.err().code().is_none() {
                // A success status whose body the SDK could not read.
                (CloudError::BadResponse, text, false, None)
            } else {
                let code = se
                    .err()
                    .code()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("HTTP{status}"));
                let message =
                    se.err().message().map(str::to_string).unwrap_or_else(|| {
                        format!("HTTP status {status} without an error message")
                    });
                let retry_after = retry_after_seconds(raw.headers().get("retry-after"));
                let retryable =
                    retryable_status(status) || THROTTLING_CODES.contains(&code.as_str());
                if !AUTH_CODES.contains(&code.as_str()) {
                    return Classified {
                        error: CloudError::Api {
                            status,
                            code,
                            message,
                        },
                        retryable,
                        retry_after,
                    };
                }
                (
                    CloudError::Auth,
                    format!("{code}: {message}"),
                    retryable,
                    retry_after,
                )
            }
        }
        SdkError::TimeoutError(_) => (CloudError::Transport, text, true, None),
        SdkError::DispatchFailure(d) => {
            // hyper's "connection closed before message completed" arrives as Other(TransientError).
            // ErrorKind is not re-exported by the SDK, hence its name rather than its variant.
            let transient = d
                .as_connector_error()
                .and_then(|c| c.as_other())
                .is_some_and(|k| format!("{k:?}") != "ClientError");
            if d.is_io() || d.is_timeout() || transient {
                (CloudError::Transport, text, true, None)
            } else if about_credentials {
                (CloudError::Auth, text, false, None)
            } else {
                (CloudError::Transport, text, false, None)
            }
        }
        // A response that broke off or does not parse; the former is worth another try.
        SdkError::ResponseError(_) => (CloudError::BadResponse, text, true, None),
        _ if about_credentials => (CloudError::Auth, text, false, None),
        _ => (CloudError::Transport, text, false, None),
    };
    Classified {
        error: kind(Detail::caused_by(message, e)),
        retryable,
        retry_after,
    }
}

/// EKS answers are a few KiB; anything near this is not EKS.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// From an answer's headers to its last byte.
const BODY_DEADLINE: Duration = Duration::from_secs(60);

/// Puts every answer's body under [`crate::bounded`]'s size and time bound before the SDK reads
/// it whole (it has no limit of its own).
#[derive(Debug)]
pub(super) struct BoundAnswers;

impl aws_sdk_eks::config::Intercept for BoundAnswers {
    fn name(&self) -> &'static str {
        "BoundAnswers"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_sdk_eks::config::interceptors::BeforeDeserializationInterceptorContextMut<
            '_,
        >,
        _components: &aws_sdk_eks::config::RuntimeComponents,
        _cfg: &mut aws_sdk_eks::config::ConfigBag,
    ) -> Result<(), aws_sdk_eks::error::BoxError> {
        use aws_smithy_types::body::SdkBody;
        let body = context.response_mut().body_mut();
        let inner = std::mem::replace(body, SdkBody::taken());
        *body = SdkBody::from_body_1_x(crate::bounded::BoundedBody::new(
            inner,
            MAX_BODY,
            BODY_DEADLINE,
        ));
        Ok(())
    }
}
