//! ARM's error shape, `{"error": {"code", "message", "target"?}}`, which every ARM answer that fails
//! uses: validation, lookups, routes and operations alike.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::util::json_response;

pub(crate) struct ArmError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
    pub(super) target: Option<String>,
}

pub(super) fn err(status: StatusCode, code: &'static str, message: impl Into<String>) -> ArmError {
    ArmError {
        status,
        code,
        message: message.into(),
        target: None,
    }
}

pub(super) fn invalid(target: &str, message: impl Into<String>) -> ArmError {
    ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidParameter",
        message: message.into(),
        target: Some(target.into()),
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(t) = self.target {
            e["target"] = json!(t);
        }
        json_response(self.status, &json!({ "error": e }))
    }
}

pub(super) fn error_body(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}
