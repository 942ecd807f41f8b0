//! What the handlers share: one request taken apart, and the answers they give (a JSON body, or
//! the Status of an error as the API server writes it).

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::BTreeMap;

use crate::kube::status::ApiError;

/// One request to one cluster's API, as the handlers below take it apart.
pub(crate) struct Request {
    pub(crate) cloud: String,
    pub(crate) cluster: String,
    pub(crate) method: Method,
    pub(crate) query: BTreeMap<String, String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Who asks (after impersonation).
    pub(crate) user: crate::kube::identity::User,
}

pub(super) fn reply(code: u16, v: &Value) -> Response {
    reply_as(code, v, "application/json")
}

pub(super) fn reply_as(code: u16, v: &Value, content_type: &'static str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, content_type)],
        v.to_string(),
    )
        .into_response()
}

pub(super) fn err(e: ApiError) -> Response {
    if e.code == 404 && e.reason.is_empty() {
        // Go's net/http NotFound, where no API group answers the path.
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", e.message),
        )
            .into_response();
    }
    reply(e.code, &e.to_json())
}
