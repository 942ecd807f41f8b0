//! ARM requests: one request with the client's token and a bounded answer (`send_once`), and the same
//! retried on throttling, server errors and dropped connections (`send`). Error answers become
//! [`CloudError`]s with ARM's own code and message.

use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::client::AksClient;
use super::mapping::aks_location;
use crate::cloud::error::{CloudError, Detail, error_chain};
use crate::cloud::pool::Location;
use crate::operation::OpCtx;
use crate::operation::{Attempt, Failure, retry, retry_after_seconds, retryable_status};

const API_VERSION: &str = "2025-10-01";

/// Responses larger than this are refused: no agent pool document comes near it, nor a cluster's
/// with AKS's 100 agent pools in it (a few kB each).
const MAX_BODY: usize = 4 * 1024 * 1024;

impl AksClient {
    pub(super) fn pool_url(&self, location: &Location, name: &str) -> Result<Url, CloudError> {
        self.arm_url(location, &["agentPools", name])
    }

    /// The cluster's agent pool collection, which a GET lists.
    pub(super) fn pools_url(&self, location: &Location) -> Result<Url, CloudError> {
        self.arm_url(location, &["agentPools"])
    }

    /// The managed cluster, whose document holds every agent pool in `agentPoolProfiles`.
    pub(super) fn cluster_url(&self, location: &Location) -> Result<Url, CloudError> {
        self.arm_url(location, &[])
    }

    /// The cluster's URL with `tail`'s segments after it.
    fn arm_url(&self, location: &Location, tail: &[&str]) -> Result<Url, CloudError> {
        let (sub, rg, cluster) = aks_location(location)?;
        let mut u = self.arm.clone();
        {
            let mut seg = u
                .path_segments_mut()
                .map_err(|_| CloudError::Auth("the ARM endpoint cannot be a base URL".into()))?;
            seg.pop_if_empty().extend([
                "subscriptions",
                sub,
                "resourceGroups",
                rg,
                "providers",
                "Microsoft.ContainerService",
                "managedClusters",
                cluster,
            ]);
            seg.extend(tail);
        }
        u.query_pairs_mut().append_pair("api-version", API_VERSION);
        Ok(u)
    }

    /// The `nextLink` of a list page, followed only where the bearer token may go: the ARM
    /// endpoint the client was built for (a page pointing elsewhere would hand it the token).
    pub(super) fn next_link(&self, link: &str) -> Result<Url, CloudError> {
        let url = Url::parse(link).map_err(|e| {
            CloudError::BadResponse(Detail::caused_by(format!("list nextLink {link:?}: {e}"), e))
        })?;
        if url.origin() != self.arm.origin() {
            return Err(CloudError::BadResponse(
                format!(
                    "list nextLink points to {}, not to the ARM endpoint {}; not followed",
                    url.origin().ascii_serialization(),
                    self.arm.origin().ascii_serialization()
                )
                .into(),
            ));
        }
        Ok(url)
    }

    /// One request, no retries. A response is returned whatever its status; transport failures (including a
    /// body cut short) are `Transport`.
    pub(super) async fn send_once(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<&Value>,
        ctx: &OpCtx,
    ) -> Result<Resp, CloudError> {
        let token = self.token(ctx).await?;
        let remaining = ctx.deadline.saturating_duration_since(Instant::now());
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .bearer_auth(token)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(
                self.timing
                    .request_timeout
                    .min(remaining + Duration::from_secs(1)),
            );
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        tracing::debug!(method = %method, path = url.path(), "ARM request");
        let what = format!("{method} {}", url.path());
        let fut = async {
            let resp = req.send().await.map_err(|e| {
                let message = format!("{what}: {}", error_chain(&e));
                CloudError::Transport(Detail::caused_by(message, e))
            })?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = read_bounded(resp, &what).await?;
            Ok(Resp {
                status,
                headers,
                body,
            })
        };
        ctx.run(&what, fut).await?
    }

    /// A request retried on 429/5xx and transport failures, with backoff, Retry-After and jitter.
    /// Once the attempts are spent, the last answer is returned as it came.
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<&Value>,
        ctx: &OpCtx,
    ) -> Result<Resp, CloudError> {
        let method = &method;
        let waiting_for = &format!("a retry of {method} {}", url.path());
        let attempt = move || async move {
            let failed = |last, retry_after| {
                Attempt::Failed(Failure {
                    last,
                    retry_after,
                    waiting_for: waiting_for.clone(),
                })
            };
            match self.send_once(method.clone(), url, body, ctx).await {
                Ok(r) if retryable_status(r.status) => {
                    let retry_after = r.retry_after();
                    Ok(failed(Ok(r), retry_after))
                }
                Ok(r) => Ok(Attempt::Done(r)),
                Err(e @ CloudError::Transport(_)) => Ok(failed(Err(e), None)),
                Err(e) => Err(e),
            }
        };
        let log = |f: &Failure<Resp, CloudError>, attempt: u32, _| match &f.last {
            Ok(r) => tracing::debug!(status = r.status, attempt, "ARM request will be retried"),
            Err(CloudError::Transport(m)) => {
                tracing::debug!(error = %m, attempt, "ARM request will be retried")
            }
            Err(_) => {}
        };
        retry(
            ctx,
            self.timing.retries(),
            self.timing.max_attempts,
            attempt,
            log,
        )
        .await
    }
}

pub(super) struct Resp {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

impl Resp {
    pub(super) fn retry_after(&self) -> Option<Duration> {
        retry_after_seconds(
            self.headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
        )
    }

    pub(super) fn json(&self) -> Result<Value, CloudError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            CloudError::BadResponse(Detail::caused_by(format!("agent pool document: {e}"), e))
        })
    }

    /// The ARM error of a non-success answer; a 401 means the token was refused.
    pub(super) fn api_error(&self) -> CloudError {
        let parsed: Option<ErrorEnvelope> = serde_json::from_slice(&self.body).ok();
        let (code, message) = match parsed.and_then(|p| p.error) {
            Some(e) => (
                e.code.unwrap_or_else(|| format!("HTTP{}", self.status)),
                e.message.unwrap_or_default(),
            ),
            None => {
                let text = String::from_utf8_lossy(&self.body);
                let text: String = text.chars().take(300).collect();
                (format!("HTTP{}", self.status), text)
            }
        };
        if self.status == 401 {
            return CloudError::Auth(
                format!("ARM refused the access token: {code}: {message}").into(),
            );
        }
        CloudError::Api {
            status: self.status,
            code,
            message,
        }
    }
}

/// An answer's body, at most [`MAX_BODY`] bytes.
pub(super) async fn read_bounded(
    resp: reqwest::Response,
    what: &str,
) -> Result<Vec<u8>, CloudError> {
    crate::cloud::answer::read_body(resp, what, MAX_BODY).await
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: Option<ErrorBody>,
}

#[derive(Deserialize, Default)]
pub(super) struct ErrorBody {
    pub(super) code: Option<String>,
    pub(super) message: Option<String>,
}
