//! Azure AD's client-credentials token endpoint (`POST /{tenant}/oauth2/v2.0/token`), whose bearer
//! tokens ARM then requires. Errors use Azure AD's shape (`error`, `error_description` with its AADSTS
//! code, `error_codes`, `timestamp`), not ARM's.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::Sandbox;
use crate::dates::{now_ms, rfc3339_millis};
use crate::util::{json_response, parse_pairs};

/// `POST /{tenant}/oauth2/v2.0/token`, client-credentials grant. Any client id and secret are accepted
/// except the secret "invalid", so tests can exercise the failure path.
pub(crate) async fn token(
    State(sb): State<Sandbox>,
    method: Method,
    axum::extract::Path(tenant): axum::extract::Path<String>,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "invalid_request", "error_description": "AADSTS900561: The endpoint \
                only accepts POST requests.", "error_codes": [900561]}),
        );
    }
    let form = parse_pairs(&String::from_utf8_lossy(&body), true);
    let grant = match granted(&form) {
        Ok(g) => g,
        Err(refusal) => return refusal.response(),
    };
    let token = issue_token(&tenant, &grant);
    sb.with_world(|w, ctx| {
        w.aks.tokens.insert(token.clone());
        ctx.mutated();
    });
    json_response(
        StatusCode::OK,
        &json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
    )
}

/// Who asked, for which resource: what a token is issued for.
struct Grant<'a> {
    client_id: &'a str,
    /// The requested scope, `<resource>/.default`.
    scope: &'a str,
}

/// Checks a client-credentials request as Azure AD does, in its order: the grant type, the client,
/// its credential, then the scope. A refusal is the answer to send.
fn granted(form: &[(String, String)]) -> Result<Grant<'_>, AadError> {
    let get = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    match get("grant_type") {
        Some("client_credentials") => {}
        Some(_) => {
            return Err(AadError {
                status: StatusCode::BAD_REQUEST,
                error: "unsupported_grant_type",
                code: 70003,
                description: "The app requested an unsupported grant type.",
            });
        }
        None => {
            return Err(AadError {
                status: StatusCode::BAD_REQUEST,
                error: "invalid_request",
                code: 900144,
                description: "The request body must contain the following parameter: \
                    'grant_type'.",
            });
        }
    }
    let Some(client_id) = get("client_id").filter(|c| !c.is_empty()) else {
        return Err(AadError {
            status: StatusCode::BAD_REQUEST,
            error: "invalid_request",
            code: 900144,
            description: "The request body must contain the following parameter: 'client_id'.",
        });
    };
    let secret = get("client_secret");
    let assertion = get("client_assertion");
    if secret.is_none() && assertion.is_none() {
        return Err(AadError {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_client",
            code: 7000218,
            description: "The request body must contain the following parameter: \
                'client_assertion' or 'client_secret'.",
        });
    }
    if secret == Some("invalid") || assertion == Some("invalid") {
        return Err(AadError {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_client",
            code: 7000215,
            description: "Invalid client secret provided.",
        });
    }
    let scope = get("scope").unwrap_or("");
    if !scope.ends_with("/.default") {
        return Err(AadError {
            status: StatusCode::BAD_REQUEST,
            error: "invalid_scope",
            code: 1002012,
            description: "The provided value for scope is not valid. Client credential flows must \
                have a scope value with /.default suffixed to the resource identifier.",
        });
    }
    Ok(Grant { client_id, scope })
}

/// A refusal in Azure AD's shape: the OAuth error, and the AADSTS code with its description.
struct AadError {
    status: StatusCode,
    error: &'static str,
    code: u32,
    description: &'static str,
}

impl AadError {
    fn response(self) -> Response {
        let AadError {
            status,
            error,
            code,
            description,
        } = self;
        json_response(
            status,
            &json!({"error": error, "error_description": format!("AADSTS{code}: {description}"), "error_codes": [code], "timestamp": rfc3339_millis(now_ms())}),
        )
    }
}

/// A JWT shaped like Azure AD's (audience, issuer, times, app and tenant), unsigned (`alg: none`):
/// ARM only checks that this endpoint issued it.
fn issue_token(tenant: &str, grant: &Grant) -> String {
    let now = now_ms() / 1000;
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let jti = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let aud = grant.scope.trim_end_matches("/.default");
    let client_id = grant.client_id;
    format!(
        "{}.{}.sandbox",
        b64(&json!({"typ": "JWT", "alg": "none"})),
        b64(
            &json!({"aud": aud, "iss": format!("https://sts.windows.net/{tenant}/"), "iat": now, "nbf": now, "exp": now + 3600, "appid": client_id, "tid": tenant, "jti": jti})
        )
    )
}
