//! EKS's restJson1 errors (the type in `x-amzn-ErrorType`, a JSON body with `message` and the
//! names EKS adds), which every EKS answer that fails uses: SigV4, validation, lookups, routes and
//! operations alike.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::util::json_response;

pub(crate) struct AwsError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    extra: Vec<(&'static str, String)>,
}

pub(super) fn aws(status: StatusCode, kind: &'static str, message: impl Into<String>) -> AwsError {
    AwsError {
        status,
        kind,
        message: message.into(),
        extra: Vec::new(),
    }
}

pub(super) fn invalid(message: impl Into<String>) -> AwsError {
    aws(
        StatusCode::BAD_REQUEST,
        "InvalidParameterException",
        message,
    )
}

impl AwsError {
    /// Status, error code and message, for an API that renders errors in another shape (Auto
    /// Scaling's awsQuery XML) but shares the checks that make them (SigV4).
    pub(super) fn parts(&self) -> (StatusCode, &'static str, &str) {
        (self.status, self.kind, &self.message)
    }

    pub(super) fn with(mut self, k: &'static str, v: &str) -> Self {
        self.extra.push((k, v.to_string()));
        self
    }
}

impl IntoResponse for AwsError {
    fn into_response(self) -> Response {
        let mut body = json!({ "message": self.message });
        for (k, v) in self.extra {
            body[k] = json!(v);
        }
        let mut r = json_response(self.status, &body);
        r.headers_mut()
            .insert("x-amzn-errortype", HeaderValue::from_static(self.kind));
        r
    }
}
