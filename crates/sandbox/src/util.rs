//! Small helpers shared by the emulators: query and form parsing, JSON responses, a stable hash.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": {"code": "NotFound", "message": format!("no sandbox API at {}", uri.path())}}),
    )
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Decode `%XX` and, for forms, `+`. Invalid escapes are kept as they are.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a=1&b=2` into pairs (query strings and form bodies).
pub(crate) fn parse_pairs(s: &str, plus_is_space: bool) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(k, plus_is_space),
                percent_decode(v, plus_is_space),
            )
        })
        .collect()
}

pub(crate) fn query_get(query: Option<&str>, key: &str) -> Option<String> {
    parse_pairs(query.unwrap_or(""), true)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// `http://host:port` of the request, for absolute URLs in headers and documents.
pub(crate) fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// Split a path into decoded segments.
pub(crate) fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect()
}

/// FNV-1a: a string to 64 bits, stable across processes and restarts (unlike std's hasher), for
/// names, ids and draws that must come out the same every time.
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_pairs() {
        assert_eq!(percent_decode("a%2Fb+c%zz%", true), "a/b c%zz%");
        assert_eq!(percent_decode("a+b", false), "a+b");
        assert_eq!(
            query_get(Some("api-version=2025-10-01&x=%24y"), "x").as_deref(),
            Some("$y")
        );
        assert_eq!(query_get(Some("x"), "x").as_deref(), Some(""));
    }
}
