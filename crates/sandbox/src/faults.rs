//! The control plane of the sandbox: fault injection and the inventory.
//!
//! `POST /_sandbox/faults` with `{"match": {"method"?, "path_contains"?, "path_ends_with"?}, "count",
//! "kind", "retry_after"?, "delay_ms"?}` makes the next `count` matching requests fail: `429` (with
//! Retry-After), `500`, `503`,
//! `drop` (the connection is cut before an answer), `drop_after` (the request is served, then the
//! connection is cut: the cloud acted, the client never hears of it), `slow` (answered after
//! `delay_ms`) or `fail_operation` (the request succeeds but its operation ends Failed). Errors use the matched
//! cloud's error shape. `GET` lists the armed faults, `DELETE` clears them.
//!
//! Hostile answers, all `200 OK` with `application/json`, for testing that clients bound what they
//! read and how long they wait: `malformed` (not JSON), `wrong_types` (JSON whose fields have the
//! wrong types), `huge` (a chunked body of `size_mb` MiB, default 128), `endless` (a chunked body
//! that never ends) and `trickle` (one byte every `delay_ms`, default 1000, forever).
//!
//! `POST /_sandbox/chaos` with `{"seed", "rate", "kinds", "match"?, "retry_after"?}` arms seeded
//! random faults: every matching request (not met by an armed fault) fails with probability
//! `rate`, as one of `kinds` (`fail_operation` only for mutations: not GET, not a token). The draw
//! for the n-th request of a stream (method and path, with operation and update ids masked) is a
//! pure function of the seed, the stream and n, so a run replays from its seed as far as each
//! stream's own order of requests is the same. `GET` shows the chaos and what it injected, per
//! kind; `DELETE` disarms it and answers the same counts.
//!
//! This module only decides whether and how a request fails; it knows no cloud. The router's fault
//! layer (`routes.rs`) asks it for the fault a request meets and passes in how an error looks on the
//! API the request was meant for, which each cloud defines next to its own error type. So the clouds
//! never depend on fault injection, nor fault injection on them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;

use super::util::{fnv1a, json_response};

/// The armed faults and chaos of one sandbox, shared by its fault layer and control endpoints.
pub(crate) type SharedFaults = Arc<Mutex<Faults>>;

pub(crate) fn lock(faults: &SharedFaults) -> MutexGuard<'_, Faults> {
    // A panic while holding the lock must not disable the control plane.
    faults.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Default)]
pub(crate) struct Faults {
    armed: Vec<Fault>,
    next_id: u64,
    chaos: Option<Chaos>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Fault {
    #[serde(default)]
    pub(crate) id: u64,
    #[serde(default, rename = "match")]
    pub(crate) matcher: Match,
    #[serde(default = "one")]
    pub(crate) count: u32,
    pub(crate) kind: FaultKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) delay_ms: Option<u64>,
    /// Body size of a `huge` answer in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size_mb: Option<u64>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Match {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path_contains: Option<String>,
    /// Tells a list (`/node-groups`) from the reads of its items (`/node-groups/ng1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path_ends_with: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum FaultKind {
    #[serde(rename = "429")]
    TooManyRequests,
    #[serde(rename = "500")]
    Internal,
    #[serde(rename = "503")]
    Unavailable,
    #[serde(rename = "drop")]
    Drop,
    #[serde(rename = "drop_after")]
    DropAfter,
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
pub(crate) struct FailOperation;

impl Faults {
    /// The fault, if any, that the next request of this method and path meets.
    pub(crate) fn take(&mut self, method: &Method, path: &str) -> Option<Fault> {
        let Some(i) = self
            .armed
            .iter()
            .position(|f| f.matcher.matches(method, path))
        else {
            return self.chaos.as_mut().and_then(|c| c.draw(method, path));
        };
        let f = self.armed[i].clone();
        self.armed[i].count -= 1;
        if self.armed[i].count == 0 {
            self.armed.remove(i);
        }
        Some(f)
    }
}

/// How chaos is armed (the body of `POST /_sandbox/chaos`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChaosConfig {
    pub(crate) seed: u64,
    /// Probability that a matching request fails, 0 to 1.
    pub(crate) rate: f64,
    pub(crate) kinds: Vec<FaultKind>,
    #[serde(default, rename = "match")]
    pub(crate) matcher: Match,
    /// Retry-After of the 429s chaos answers, in seconds (its 503s have none). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<u64>,
}

#[derive(Debug)]
struct Chaos {
    config: ChaosConfig,
    /// Requests seen per stream, for the position of the next draw.
    streams: HashMap<String, u64>,
    requests: u64,
    injected: BTreeMap<String, u64>,
}

impl Chaos {
    fn report(&self) -> Value {
        json!({"chaos": self.config, "requests": self.requests, "injected": self.injected})
    }

    /// The fault, if any, that the next request of this method and path meets.
    fn draw(&mut self, method: &Method, path: &str) -> Option<Fault> {
        let c = &self.config;
        if !c.matcher.matches(method, path) {
            return None;
        }
        self.requests += 1;
        let stream = stream_of(method, path);
        let n = self.streams.entry(stream.clone()).or_insert(0);
        *n += 1;
        let x = mix(c.seed ^ mix(fnv1a(&stream) ^ mix(*n)));
        // 53 random bits as a fraction in [0, 1).
        if ((x >> 11) as f64) / ((1u64 << 53) as f64) >= c.rate {
            return None;
        }
        // An operation can only fail where a request starts one: a mutation, not a token.
        let starts_one = method != Method::GET && !path.contains("/oauth2/");
        let kinds: Vec<FaultKind> = c
            .kinds
            .iter()
            .copied()
            .filter(|k| *k != FaultKind::FailOperation || starts_one)
            .collect();
        if kinds.is_empty() {
            return None;
        }
        let kind = kinds[(mix(x) % kinds.len() as u64) as usize];
        let name = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        *self.injected.entry(name).or_insert(0) += 1;
        Some(Fault {
            id: 0,
            matcher: Match::default(),
            count: 1,
            kind,
            retry_after: (kind == FaultKind::TooManyRequests).then(|| c.retry_after.unwrap_or(1)),
            delay_ms: Some(500),
            size_mb: None,
        })
    }
}

impl Match {
    fn matches(&self, method: &Method, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method.as_str()))
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| path.contains(p))
            && self
                .path_ends_with
                .as_deref()
                .is_none_or(|p| path.ends_with(p))
    }
}

/// A request's stream: its method and path with the ids of operations and updates masked, since
/// those differ from run to run.
fn stream_of(method: &Method, path: &str) -> String {
    let mut out = format!("{method} ");
    let mut mask = false;
    for seg in path.split('/') {
        out.push_str(if mask { "*" } else { seg });
        out.push('/');
        mask = matches!(seg, "operations" | "updates");
    }
    out
}

/// SplitMix64's output function: any input to a well-mixed 64-bit value.
fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Serves `req` as `fault` says: an error rendered by `error` in the shape of the API the request
/// was meant for, a cut connection, a delayed or hostile answer, or the real answer with the
/// operation marked to fail.
pub(crate) async fn apply(
    fault: Fault,
    req: Request,
    next: Next,
    error: impl FnOnce(StatusCode) -> Response,
) -> Response {
    match fault.kind {
        FaultKind::TooManyRequests => {
            let mut r = error(StatusCode::TOO_MANY_REQUESTS);
            r.headers_mut().insert(
                "retry-after",
                HeaderValue::from(fault.retry_after.unwrap_or(1)),
            );
            r
        }
        FaultKind::Internal => error(StatusCode::INTERNAL_SERVER_ERROR),
        FaultKind::Unavailable => {
            let mut r = error(StatusCode::SERVICE_UNAVAILABLE);
            if let Some(s) = fault.retry_after {
                r.headers_mut().insert("retry-after", HeaderValue::from(s));
            }
            r
        }
        FaultKind::Drop => dropped(),
        FaultKind::DropAfter => {
            let _served = next.run(req).await;
            dropped()
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
        FaultKind::Malformed => hostile(Body::from(MALFORMED)),
        FaultKind::WrongTypes => hostile(Body::from(WRONG_TYPES)),
        FaultKind::Huge => hostile(huge(fault.size_mb.unwrap_or(128))),
        FaultKind::Endless => hostile(endless()),
        FaultKind::Trickle => hostile(trickle(std::time::Duration::from_millis(
            fault.delay_ms.unwrap_or(1000).max(1),
        ))),
    }
}

/// A JSON document of about `size_mb` MiB, sent in chunks.
fn huge(size_mb: u64) -> Body {
    let chunks = size_mb * (1 << 20) / FILLER.len() as u64;
    let body = tokio_stream::iter(
        std::iter::once(Bytes::from_static(FILLER_OPEN))
            .chain(std::iter::repeat_n(
                Bytes::from_static(FILLER),
                chunks as usize,
            ))
            .chain(std::iter::once(Bytes::from_static(FILLER_CLOSE))),
    )
    .map(Ok::<_, std::io::Error>);
    Body::from_stream(body)
}

/// A JSON string that never ends, sent as fast as the client reads.
fn endless() -> Body {
    let body = tokio_stream::iter(
        std::iter::once(Bytes::from_static(FILLER_OPEN))
            .chain(std::iter::repeat(Bytes::from_static(FILLER))),
    )
    .map(Ok::<_, std::io::Error>);
    Body::from_stream(body)
}

/// One byte every `every`, forever: a JSON object that is opened and never goes on.
fn trickle(every: std::time::Duration) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let mut byte: &'static [u8] = TRICKLE_FIRST;
        // Ends when the client goes away and the body is dropped.
        while tx.send(Ok(Bytes::from_static(byte))).await.is_ok() {
            byte = b" ";
            tokio::time::sleep(every).await;
        }
    });
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// A document cut off in the middle.
const MALFORMED: &str = r#"{"name": "truncated", "properties": {"#;

/// What a `huge` or `endless` body opens with: an object whose one string the filler fills.
static FILLER_OPEN: &[u8] = b"{\"filler\": \"";
static FILLER_CLOSE: &[u8] = b"\"}";

/// The first byte of a `trickle` answer, the rest being spaces.
static TRICKLE_FIRST: &[u8] = b"{";

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

/// A body that fails before its first byte makes hyper abort the connection without completing the
/// response: the client sees a reset/incomplete message.
fn dropped() -> Response {
    let stream = tokio_stream::once(Err::<Bytes, std::io::Error>(std::io::Error::other(
        "sandbox: injected connection drop",
    )));
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

/// `/_sandbox/faults`.
pub(crate) async fn faults_endpoint(
    State(faults): State<SharedFaults>,
    method: Method,
    body: Bytes,
) -> Response {
    match method {
        Method::GET => {
            let f = lock(&faults);
            json_response(StatusCode::OK, &json!({ "faults": f.armed }))
        }
        Method::DELETE => {
            lock(&faults).armed.clear();
            json_response(StatusCode::OK, &json!({ "faults": [] }))
        }
        Method::POST => match serde_json::from_slice::<Fault>(&body) {
            Ok(mut fault) if fault.count > 0 => {
                let mut f = lock(&faults);
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

/// `/_sandbox/chaos`.
pub(crate) async fn chaos_endpoint(
    State(faults): State<SharedFaults>,
    method: Method,
    body: Bytes,
) -> Response {
    let mut f = lock(&faults);
    match method {
        Method::GET => match &f.chaos {
            Some(c) => json_response(StatusCode::OK, &c.report()),
            None => json_response(StatusCode::OK, &json!({ "chaos": null })),
        },
        Method::DELETE => match f.chaos.take() {
            Some(c) => json_response(StatusCode::OK, &c.report()),
            None => json_response(StatusCode::OK, &json!({ "chaos": null })),
        },
        Method::POST => match serde_json::from_slice::<ChaosConfig>(&body) {
            Ok(config) if (0.0..=1.0).contains(&config.rate) && !config.kinds.is_empty() => {
                let c = Chaos {
                    config,
                    streams: HashMap::new(),
                    requests: 0,
                    injected: BTreeMap::new(),
                };
                let r = json_response(StatusCode::CREATED, &c.report());
                f.chaos = Some(c);
                r
            }
            Ok(_) => json_response(
                StatusCode::BAD_REQUEST,
                &json!({"error": "rate must be between 0 and 1 and kinds must name at least one \
                    fault"}),
            ),
            Err(e) => json_response(
                StatusCode::BAD_REQUEST,
                &json!({ "error": format!("bad chaos: {e}") }),
            ),
        },
        _ => json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "use GET, POST or DELETE"}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chaos(seed: u64, rate: f64, kinds: &[FaultKind]) -> Chaos {
        Chaos {
            config: ChaosConfig {
                seed,
                rate,
                kinds: kinds.to_vec(),
                matcher: Match::default(),
                retry_after: None,
            },
            streams: HashMap::new(),
            requests: 0,
            injected: BTreeMap::new(),
        }
    }

    const ALL: &[FaultKind] = &[
        FaultKind::TooManyRequests,
        FaultKind::Unavailable,
        FaultKind::Drop,
        FaultKind::DropAfter,
        FaultKind::FailOperation,
    ];

    /// The fates of a fixed sequence of requests, interleaving two streams.
    fn fates(c: &mut Chaos) -> Vec<Option<FaultKind>> {
        (0..200)
            .map(|i| {
                let (m, p) = if i % 2 == 0 {
                    (Method::PUT, "/subscriptions/s/agentPools/a")
                } else {
                    (Method::GET, "/v1/projects/p/locations/l/operations/op-123")
                };
                c.draw(&m, p).map(|f| f.kind)
            })
            .collect()
    }

    #[test]
    fn a_seed_replays_its_faults_and_another_seed_does_not() {
        let a = fates(&mut chaos(7, 0.3, ALL));
        assert_eq!(a, fates(&mut chaos(7, 0.3, ALL)));
        assert_ne!(a, fates(&mut chaos(8, 0.3, ALL)));
        let hits = a.iter().flatten().count();
        assert!((30..=90).contains(&hits), "about 30% of 200: {hits}");
    }

    #[test]
    fn a_stream_draws_the_same_whatever_other_streams_do() {
        let mut alone = chaos(3, 0.5, ALL);
        let put = |c: &mut Chaos| c.draw(&Method::PUT, "/x/agentPools/a").map(|f| f.kind);
        let only: Vec<_> = (0..50).map(|_| put(&mut alone)).collect();
        let mut mixed = chaos(3, 0.5, ALL);
        let with_others: Vec<_> = (0..50)
            .map(|_| {
                mixed.draw(&Method::GET, "/y");
                put(&mut mixed)
            })
            .collect();
        assert_eq!(only, with_others);
    }

    #[test]
    fn operations_fail_only_where_a_request_starts_one_and_counts_add_up() {
        let mut c = chaos(1, 1.0, &[FaultKind::FailOperation]);
        assert!(c.draw(&Method::GET, "/x").is_none(), "a GET starts nothing");
        assert!(
            c.draw(&Method::POST, "/tenant/oauth2/v2.0/token").is_none(),
            "nor does a token request"
        );
        assert_eq!(
            c.draw(&Method::DELETE, "/x").map(|f| f.kind),
            Some(FaultKind::FailOperation)
        );
        let mut c = chaos(1, 1.0, ALL);
        for _ in 0..100 {
            assert!(c.draw(&Method::GET, "/x").is_some(), "rate 1 fails all");
        }
        assert_eq!(c.requests, 100);
        assert_eq!(c.injected.values().sum::<u64>(), 100);
        assert!(!c.injected.contains_key("fail_operation"));
        assert!(chaos(1, 0.0, ALL).draw(&Method::PUT, "/x").is_none());
    }

    #[test]
    fn operation_and_update_ids_are_masked_in_streams() {
        assert_eq!(
            stream_of(
                &Method::GET,
                "/v1/projects/p/locations/l/operations/operation-1-ab"
            ),
            stream_of(
                &Method::GET,
                "/v1/projects/p/locations/l/operations/operation-2-cd"
            ),
        );
        assert_eq!(
            stream_of(&Method::GET, "/clusters/c/node-groups/n/updates/u1"),
            stream_of(&Method::GET, "/clusters/c/node-groups/n/updates/u2"),
        );
        assert_ne!(
            stream_of(&Method::GET, "/x/agentPools/a"),
            stream_of(&Method::GET, "/x/agentPools/b"),
        );
    }
}
