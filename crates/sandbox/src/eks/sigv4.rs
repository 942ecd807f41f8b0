//! AWS Signature Version 4, as far as the emulator needs it: a request must carry a well-formed
//! `AWS4-HMAC-SHA256` Authorization header and a matching `X-Amz-Date`, as EKS and Auto Scaling
//! refuse one without;
//! the signature itself is not checked (any key works), and the credential scope's region picks the
//! region whose clusters the request sees.

use axum::http::{HeaderMap, StatusCode};

use super::error::{AwsError, aws};

/// Check the shape of a SigV4 Authorization header whose scope names `service` (`eks`, or
/// `autoscaling` for the Auto Scaling API) and return the credential scope's region.
pub(super) fn sigv4_region(headers: &HeaderMap, service: &str) -> Result<String, AwsError> {
    let forbidden = |kind: &'static str, m: &str| aws(StatusCode::FORBIDDEN, kind, m);
    let Some(auth) = headers.get("authorization").and_then(|h| h.to_str().ok()) else {
        return Err(forbidden(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ));
    };
    let incomplete = |m: &str| forbidden("IncompleteSignatureException", m);
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return Err(incomplete(
            "Authorization header requires the AWS4-HMAC-SHA256 algorithm.",
        ));
    };
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        return Err(incomplete(
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' \
                parameters.",
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    if scope.len() != 5
        || scope[0].is_empty()
        || scope[1].len() != 8
        || !scope[1].bytes().all(|b| b.is_ascii_digit())
        || scope[4] != "aws4_request"
    {
        return Err(incomplete(&format!(
            "Credential must have the form <key>/<yyyymmdd>/<region>/{service}/aws4_request."
        )));
    }
    if scope[3] != service {
        return Err(forbidden(
            "InvalidSignatureException",
            &format!("Credential should be scoped to correct service: '{service}'."),
        ));
    }
    if signature.len() != 64 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(incomplete("Signature must be 64 hexadecimal characters."));
    }
    let signed: Vec<&str> = signed.split(';').collect();
    if !signed.contains(&"host") {
        return Err(incomplete("SignedHeaders must include 'host'."));
    }
    let date = headers
        .get("x-amz-date")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if date.len() != 16 || !date.starts_with(scope[1]) {
        return Err(incomplete(
            "X-Amz-Date header missing or not matching the credential scope date.",
        ));
    }
    Ok(scope[2].to_string())
}

/// The service the credential scope of a request's SigV4 Authorization header names, if it has
/// a readable one (`.../<region>/<service>/aws4_request`).
pub(super) fn scope_service(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get("authorization")?.to_str().ok()?;
    let credential = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")?
        .split(',')
        .find_map(|p| p.trim().strip_prefix("Credential="))?;
    credential.split('/').nth(3)
}
