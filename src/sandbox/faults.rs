//! The control plane of the sandbox: fault injection and the inventory.
//!
//! `POST /_sandbox/faults` with `{"match": {"method"?, "path_contains"?}, "count", "kind", "retry_after"?,
//! "delay_ms"?}` makes the next `count` matching requests fail: `429` (with Retry-After), `500`, `503`,
//! `drop` (the connection is cut before an answer), `slow` (answered after `delay_ms`) or
//! `fail_operation` (the request succeeds but its operation ends Failed). Errors use the matched
//! cloud's error shape. `GET` lists the armed faults, `DELETE` clears them.
//!
//! Hostile answers, all `200 OK` with `application/json`, for testing that clients bound what they
//! read and how long they wait: `malformed` (not JSON), `wrong_types` (JSON whose fields have the
//! wrong types), `huge` (a chunked body of `size_mb` MiB, default 128), `endless` (a chunked body
//! that never ends) and `trickle` (one byte every `delay_ms`, default 1000, forever).

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;

use super::util::json_response;
use super::{Sandbox, World};

#[derive(Debug, Default)]
pub struct Faults {
    armed: Vec<Fault>,
    next_id: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fault {
    #[serde(default)]
    pub id: u64,
    #[serde(default, rename = "match")]
    pub matcher: Match,
    #[serde(default = "one")]
    pub count: u32,
    pub kind: FaultKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Body size of a `huge` answer in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_mb: Option<u64>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_contains: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultKind {
    #[serde(rename = "429")]
    TooManyRequests,
    #[serde(rename = "500")]
    Internal,
    #[serde(rename = "503")]
    Unavailable,
    #[serde(rename = "drop")]
    Drop,
    #[serde(rename = "slow")]
    Slow,
    #[serde(rename = "fail_operation")]
    FailOperation,
    #[serde(rename = "malformed")]
    Malformed,
    #[serde(rename = "wrong_types")]
    WrongTypes,
    #[serde(rename = "huge")]
    Huge,
    #[serde(rename = "endless")]
    Endless,
    #[serde(rename = "trickle")]
    Trickle,
}

/// Request extension: the operation this request starts must end Failed.
#[derive(Debug, Clone, Copy)]
pub struct FailOperation;

impl Faults {
    fn take(&mut self, method: &Method, path: &str) -> Option<Fault> {
        let i = self.armed.iter().position(|f| {
            f.matcher
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method.as_str()))
                && f.matcher
                    .path_contains
                    .as_deref()
                    .is_none_or(|p| path.contains(p))
        })?;
        let f = self.armed[i].clone();
        self.armed[i].count -= 1;
        if self.armed[i].count == 0 {
            self.armed.remove(i);
        }
        Some(f)
    }
}

pub async fn middleware(State(sb): State<Sandbox>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with("/_sandbox/") {
        return next.run(req).await;
    }
    let fault = sb.faults().take(req.method(), &path);
    let Some(fault) = fault else {
        return next.run(req).await;
    };
    match fault.kind {
        FaultKind::TooManyRequests => {
            let mut r = cloud_error(&path, StatusCode::TOO_MANY_REQUESTS);
            r.headers_mut().insert(
                "retry-after",
                HeaderValue::from(fault.retry_after.unwrap_or(1)),
            );
            r
        }
        FaultKind::Internal => cloud_error(&path, StatusCode::INTERNAL_SERVER_ERROR),
        FaultKind::Unavailable => {
            let mut r = cloud_error(&path, StatusCode::SERVICE_UNAVAILABLE);
            if let Some(s) = fault.retry_after {
                r.headers_mut().insert("retry-after", HeaderValue::from(s));
            }
            r
        }
        FaultKind::Drop => {
            // A body that fails before its first byte makes hyper abort the connection without
            // completing the response: the client sees a reset/incomplete message.
            let stream = tokio_stream::once(Err::<Bytes, std::io::Error>(std::io::Error::other(
                "sandbox: injected connection drop",
            )));
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::from_stream(stream))
                .unwrap_or_default()
        }
        FaultKind::Slow => {
            tokio::time::sleep(std::time::Duration::from_millis(
                fault.delay_ms.unwrap_or(1000),
            ))
            .await;
            next.run(req).await
        }
        FaultKind::FailOperation => {
            let mut req = req;
            req.extensions_mut().insert(FailOperation);
            next.run(req).await
        }
        FaultKind::Malformed => hostile(Body::from(r#"{"name": "truncated", "properties": {"#)),
        FaultKind::WrongTypes => hostile(Body::from(WRONG_TYPES)),
        FaultKind::Huge => {
            let chunks = fault.size_mb.unwrap_or(128) * (1 << 20) / FILLER.len() as u64;
            let body = tokio_stream::iter(
                std::iter::once(Bytes::from_static(b"{\"filler\": \""))
                    .chain(std::iter::repeat_n(
                        Bytes::from_static(FILLER),
                        chunks as usize,
                    ))
                    .chain(std::iter::once(Bytes::from_static(b"\"}"))),
            )
            .map(Ok::<_, std::io::Error>);
            hostile(Body::from_stream(body))
        }
        FaultKind::Endless => {
            let body = tokio_stream::iter(
                std::iter::once(Bytes::from_static(b"{\"filler\": \""))
                    .chain(std::iter::repeat(Bytes::from_static(FILLER))),
            )
            .map(Ok::<_, std::io::Error>);
            hostile(Body::from_stream(body))
        }
        FaultKind::Trickle => {
            let every = std::time::Duration::from_millis(fault.delay_ms.unwrap_or(1000).max(1));
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
            tokio::spawn(async move {
                let mut byte: &'static [u8] = b"{";
                // Ends when the client goes away and the body is dropped.
                while tx.send(Ok(Bytes::from_static(byte))).await.is_ok() {
                    byte = b" ";
                    tokio::time::sleep(every).await;
                }
            });
            hostile(Body::from_stream(
                tokio_stream::wrappers::ReceiverStream::new(rx),
            ))
        }
    }
}

/// 64 KiB of JSON string content.
static FILLER: &[u8] = &[b'x'; 64 * 1024];

/// Valid JSON in which the fields the clouds' and Kubernetes' documents share have the wrong types.
const WRONG_TYPES: &str = r#"{"id": 7, "name": ["not", "a", "string"], "properties": "not an object", "status": {"not": "a string"}, "config": 42, "nodegroup": "not an object", "update": 12, "kind": 3, "apiVersion": false, "metadata": "not an object", "data": [1, 2], "spec": 9}"#;

fn hostile(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(body)
        .unwrap_or_default()
}

/// An injected failure in the error shape of the API the path belongs to.
fn cloud_error(path: &str, status: StatusCode) -> Response {
    let msg = format!("sandbox fault injection: {status}");
    if path.starts_with("/v1/") {
        let s = match status.as_u16() {
            429 => "RESOURCE_EXHAUSTED",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        };
        return json_response(
            status,
            &json!({"error": {"code": status.as_u16(), "message": msg, "status": s}}),
        );
    }
    if path.starts_with("/k8s/") {
        let reason = match status.as_u16() {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        return json_response(
            status,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": msg, "reason": reason, "code": status.as_u16()}),
        );
    }
    if path.starts_with("/clusters") {
        let t = match status.as_u16() {
            429 => "ThrottlingException",
            503 => "ServiceUnavailableException",
            _ => "ServerException",
        };
        let mut r = json_response(status, &json!({ "message": msg }));
        r.headers_mut()
            .insert("x-amzn-errortype", HeaderValue::from_static(t));
        return r;
    }
    let code = match status.as_u16() {
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalServerError",
    };
    json_response(status, &json!({"error": {"code": code, "message": msg}}))
}

pub async fn faults_endpoint(State(sb): State<Sandbox>, method: Method, body: Bytes) -> Response {
    match method {
        Method::GET => {
            let f = sb.faults();
            json_response(StatusCode::OK, &json!({ "faults": f.armed }))
        }
        Method::DELETE => {
            sb.faults().armed.clear();
            json_response(StatusCode::OK, &json!({ "faults": [] }))
        }
        Method::POST => match serde_json::from_slice::<Fault>(&body) {
            Ok(mut fault) if fault.count > 0 => {
                let mut f = sb.faults();
                f.next_id += 1;
                fault.id = f.next_id;
                f.armed.push(fault.clone());
                json_response(
                    StatusCode::CREATED,
                    &serde_json::to_value(&fault).unwrap_or(Value::Null),
                )
            }
            Ok(_) => json_response(
                StatusCode::BAD_REQUEST,
                &json!({"error": "count must be at least 1"}),
            ),
            Err(e) => json_response(
                StatusCode::BAD_REQUEST,
                &json!({ "error": format!("bad fault: {e}") }),
            ),
        },
        _ => json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "use GET, POST or DELETE"}),
        ),
    }
}

pub async fn inventory(State(sb): State<Sandbox>) -> Response {
    json_response(StatusCode::OK, &sb.inventory())
}

/// A stable JSON listing of the world: clusters and pools sorted by cloud, cluster and name; each
/// pool carries its state and the document a GET on the cloud's API returns for it.
pub fn inventory_of(w: &World) -> Value {
    let mut clusters = Vec::new();
    let mut pools = Vec::new();
    for c in w.aks.clusters.values() {
        clusters.push(json!({"cloud": "aks", "name": c.name, "subscription": c.subscription, "resourceGroup": c.resource_group, "location": c.location}));
        for p in c.pools.values() {
            pools.push(json!({"cloud": "aks", "cluster": c.name, "name": p.name, "state": p.provisioning_state, "resource": super::arm::pool_json(c, p)}));
        }
    }
    for c in w.gke.clusters.values() {
        clusters.push(
            json!({"cloud": "gke", "name": c.name, "project": c.project, "location": c.location}),
        );
        for p in c.pools.values() {
            pools.push(json!({"cloud": "gke", "cluster": c.name, "name": p.name, "state": p.status, "resource": super::gke::pool_json(c, p)}));
        }
    }
    for c in w.eks.clusters.values() {
        clusters.push(json!({"cloud": "eks", "name": c.name, "region": c.region}));
        for p in c.nodegroups.values() {
            pools.push(json!({"cloud": "eks", "cluster": c.name, "name": p.name, "state": p.status, "resource": super::eks::nodegroup_json(c, p)}));
        }
    }
    json!({"clusters": clusters, "pools": pools})
}
