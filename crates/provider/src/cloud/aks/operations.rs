//! ARM's long-running operations: following `Azure-AsyncOperation` (else `Location`, else the
//! pool's own `provisioningState`) until a PUT or DELETE has finished, and one PUT attempt for the
//! create and update retries.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;

use super::client::AksClient;
use super::http::{ErrorBody, Resp};
use super::mapping::{provisioning_state, terminal, to_pool};
use crate::cloud::error::{CloudError, Detail};
use crate::cloud::pool::{Location, Pool};
use crate::operation::OpCtx;
use crate::operation::{Attempt, Check, Failure, Start, poll_until, retryable_status};

impl AksClient {
    /// Whether a URL the server handed us (operation status) may receive our bearer token.
    fn same_origin(&self, u: &Url) -> bool {
        u.scheme() == self.arm.scheme()
            && u.host_str() == self.arm.host_str()
            && u.port_or_known_default() == self.arm.port_or_known_default()
    }

    /// The pool's raw document, or None on 404.
    pub(super) async fn get_raw(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Value>, CloudError> {
        let url = self.pool_url(location, name)?;
        let r = self.send(reqwest::Method::GET, &url, None, ctx).await?;
        match r.status {
            200 => r.json().map(Some),
            404 => {
                let e = r.api_error();
                match &e {
                    CloudError::Api { code, .. }
                        if matches!(
                            code.as_str(),
                            "NotFound" | "ResourceNotFound" | "ResourceGroupNotFound"
                        ) =>
                    {
                        Ok(None)
                    }
                    _ => Err(e),
                }
            }
            _ => Err(r.api_error()),
        }
    }

    pub(super) async fn get_with(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        match self.get_raw(location, name, ctx).await? {
            None => Ok(None),
            Some(doc) => {
                let pool = to_pool(location, name, &doc)?;
                if pool.status.eq_ignore_ascii_case("Deleting") {
                    return Ok(None);
                }
                Ok(Some(pool))
            }
        }
    }

    /// Polls the pool until its provisioningState is terminal. Failed/Canceled become OperationFailed.
    pub(super) async fn wait_pool(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
        retry_after: Option<Duration>,
    ) -> Result<Pool, CloudError> {
        let what = format!("agent pool '{name}' to finish provisioning");
        let start = Start::Sleep(retry_after);
        poll_until(ctx, self.timing.polls(), what, start, move |_| async move {
            let Some(doc) = self.get_raw(location, name, ctx).await? else {
                return Err(CloudError::OperationFailed {
                    code: "NotFound".into(),
                    message: format!("agent pool '{name}' disappeared while it was provisioning"),
                });
            };
            let pool = to_pool(location, name, &doc)?;
            match terminal(&pool.status) {
                Some(true) => Ok(Check::Done(pool)),
                Some(false) => Err(CloudError::OperationFailed {
                    code: format!("Provisioning{}", pool.status),
                    message: format!(
                        "agent pool '{name}' ended in provisioningState {}",
                        pool.status
                    ),
                }),
                None => Ok(Check::Pending {
                    retry_after: None,
                    waiting_for: None,
                }),
            }
        })
        .await
    }

    /// Waits for the operation a PUT or DELETE started: its Azure-AsyncOperation document, else its
    /// Location. Returns Ok when the operation succeeded or cannot be followed (the caller then checks
    /// the resource itself).
    pub(super) async fn wait_operation(
        &self,
        r: &Resp,
        what: &str,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let header = |h: &str| {
            r.headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| Url::parse(v).ok())
                .filter(|u| self.same_origin(u))
        };
        let start = Start::Sleep(r.retry_after());
        if let Some(op) = header("azure-asyncoperation") {
            let op = &op;
            return poll_until(
                ctx,
                self.timing.polls(),
                what.into(),
                start,
                move |_| async move {
                    let resp = self.send(reqwest::Method::GET, op, None, ctx).await?;
                    if resp.status == 404 {
                        return Ok(Check::Done(()));
                    }
                    if resp.status != 200 {
                        return Err(resp.api_error());
                    }
                    let doc: OperationDoc = serde_json::from_slice(&resp.body).map_err(|e| {
                        CloudError::BadResponse(Detail::caused_by(
                            format!("operation status document: {e}"),
                            e,
                        ))
                    })?;
                    match doc.status.as_str() {
                        s if s.eq_ignore_ascii_case("Succeeded") => Ok(Check::Done(())),
                        s if s.eq_ignore_ascii_case("Failed")
                            || s.eq_ignore_ascii_case("Canceled") =>
                        {
                            let e = doc.error.unwrap_or_default();
                            Err(CloudError::OperationFailed {
                                code: e.code.unwrap_or_else(|| format!("Operation{s}")),
                                message: e
                                    .message
                                    .unwrap_or_else(|| format!("the operation ended {s}")),
                            })
                        }
                        _ => Ok(Check::Pending {
                            retry_after: resp.retry_after(),
                            waiting_for: None,
                        }),
                    }
                },
            )
            .await;
        }
        if let Some(loc) = header("location") {
            // Each 202 may name the next URL to look at. (Behind a Mutex only because a check's
            // future must be Send.)
            let loc = &Mutex::new(loc);
            return poll_until(
                ctx,
                self.timing.polls(),
                what.into(),
                start,
                move |_| async move {
                    let url = loc.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    let resp = self.send(reqwest::Method::GET, &url, None, ctx).await?;
                    match resp.status {
                        202 => {
                            if let Some(next) = resp
                                .headers
                                .get("location")
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| Url::parse(v).ok())
                                .filter(|u| self.same_origin(u))
                            {
                                *loc.lock().unwrap_or_else(PoisonError::into_inner) = next;
                            }
                            Ok(Check::Pending {
                                retry_after: resp.retry_after(),
                                waiting_for: None,
                            })
                        }
                        200 | 201 | 204 | 404 => Ok(Check::Done(())),
                        _ => match resp.api_error() {
                            CloudError::Api { code, message, .. } => {
                                Err(CloudError::OperationFailed { code, message })
                            }
                            e => Err(e),
                        },
                    }
                },
            )
            .await;
        }
        Ok(())
    }

    /// A PUT answered 200/201: wait for its operation and return the pool as it ends up.
    async fn finish_put(
        &self,
        r: Resp,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let doc = r.json()?;
        let pool = to_pool(location, name, &doc)?;
        match terminal(&pool.status) {
            Some(true) => return Ok(pool),
            Some(false) => {
                return Err(CloudError::OperationFailed {
                    code: format!("Provisioning{}", pool.status),
                    message: format!(
                        "agent pool '{name}' is in provisioningState {}",
                        pool.status
                    ),
                });
            }
            None => {}
        }
        let what = format!("agent pool '{name}' to finish provisioning");
        self.wait_operation(&r, &what, ctx).await?;
        self.wait_pool(location, name, ctx, Some(Duration::ZERO))
            .await
    }

    /// Waits until GET answers 404. `retry_after` is the delay after the first look only.
    pub(super) async fn wait_gone(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
        retry_after: Option<Duration>,
    ) -> Result<(), CloudError> {
        let what = format!("agent pool '{name}' to be deleted");
        let mut first = retry_after;
        poll_until(ctx, self.timing.polls(), what, Start::Now, move |_| {
            let retry_after = first.take();
            async move {
                let Some(doc) = self.get_raw(location, name, ctx).await? else {
                    return Ok(Check::Done(()));
                };
                let state = provisioning_state(&doc);
                if state.eq_ignore_ascii_case("Failed") {
                    return Err(CloudError::OperationFailed {
                        code: "DeleteFailed".into(),
                        message: format!(
                            "deleting agent pool '{name}' left it in provisioningState Failed"
                        ),
                    });
                }
                Ok(Check::Pending {
                    retry_after,
                    waiting_for: None,
                })
            }
        })
        .await
    }

    /// One PUT attempt of `body`.
    pub(super) async fn put_attempt(
        &self,
        put: &PutTarget<'_>,
        body: &Value,
        ctx: &OpCtx,
    ) -> Result<Attempt<Pool, CloudError>, CloudError> {
        let name = put.name;
        let failed = |last, retry_after| {
            Attempt::Failed(Failure {
                last,
                retry_after,
                waiting_for: format!("a retry of PUT agent pool '{name}'"),
            })
        };
        match self
            .send_once(reqwest::Method::PUT, put.url, Some(body), ctx)
            .await
        {
            Ok(r) if matches!(r.status, 200 | 201) => self
                .finish_put(r, put.location, name, ctx)
                .await
                .map(Attempt::Done),
            Ok(r) if retryable_status(r.status) => Ok(failed(Err(r.api_error()), r.retry_after())),
            Ok(r) => Err(r.api_error()),
            // The PUT may or may not have reached ARM: the next attempt reads the pool first.
            Err(e @ CloudError::Transport(_)) => Ok(failed(Err(e), None)),
            Err(e) => Err(e),
        }
    }
}

/// The debug line of a PUT about to be retried.
pub(super) fn log_put_retry(f: &Failure<Pool, CloudError>, _: u32, _: Duration) {
    if let Err(CloudError::Transport(m)) = &f.last {
        tracing::debug!(error = %m, "PUT will be retried");
    }
}

/// The pool a PUT goes to.
pub(super) struct PutTarget<'a> {
    pub(super) url: &'a Url,
    pub(super) location: &'a Location,
    pub(super) name: &'a str,
}

#[derive(Deserialize)]
struct OperationDoc {
    status: String,
    error: Option<ErrorBody>,
}
