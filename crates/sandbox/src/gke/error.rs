//! GKE's errors, google.rpc statuses (`{"error": {"code", "message", "status"}}`), which every GKE
//! answer that fails uses: validation, lookups, routes and operations alike.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::util::json_response;

pub(crate) struct GError {
    code: u16,
    message: String,
}

pub(super) fn gerr(code: u16, message: impl Into<String>) -> GError {
    GError {
        code,
        message: message.into(),
    }
}

impl GError {
    /// google.rpc's status name of this error, e.g. RESOURCE_EXHAUSTED.
    pub(crate) fn status(&self) -> &'static str {
        status_name(self.code, &self.message)
    }
}

pub(super) fn invalid(message: impl Into<String>) -> GError {
    gerr(400, message)
}

fn status_name(code: u16, message: &str) -> &'static str {
    match code {
        400 if message.contains(" is currently ") => "FAILED_PRECONDITION",
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

impl IntoResponse for GError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let s = status_name(self.code, &self.message);
        json_response(
            status,
            &json!({"error": {"code": self.code, "message": self.message, "status": s}}),
        )
    }
}
