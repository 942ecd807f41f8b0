//! The HTTP face: `/k8s/{cloud}/{cluster}/...` answers like that cluster's API server would.

use super::KubeApi;
use super::discovery::{group_doc, group_list, openapi_gv, openapi_root, resource_list, version};
use super::kinds::{self, Kind};
use super::patch::PatchType;
use super::select::{FieldReq, Selector};
use super::status::ApiError;
use super::store::{Validation, WriteCtx};
use super::table;
use super::tls::TlsListener;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The API server's own limit on request bodies.
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

pub(crate) fn router(api: Arc<KubeApi>) -> Router {
    Router::new()
        .route("/k8s/{cloud}/{cluster}", any(handle_root))
        .route("/k8s/{cloud}/{cluster}/", any(handle_root))
        .route("/k8s/{cloud}/{cluster}/{*rest}", any(handle))
        .with_state(api)
}

fn reply(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn err(e: ApiError) -> Response {
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

impl KubeApi {
    /// Serves `/k8s/{cloud}/{cluster}/...`; the sandbox's main app nests or merges it.
    pub fn router(self: &Arc<Self>) -> Router {
        router(self.clone())
    }

    /// Serves [`KubeApi::router`] over HTTPS on `listener` until the task is dropped.
    pub async fn serve_tls(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<()> {
        let tls =
            TlsListener::new(listener, &self.tls_identity()).map_err(std::io::Error::other)?;
        axum::serve(tls, self.router()).await
    }
}

/// An injected failure (the sandbox's fault layer) as this API server answers errors.
pub(crate) fn injected(status: StatusCode, message: String) -> Response {
    err(ApiError::injected(status.as_u16(), message))
}

async fn handle_root(
    State(api): State<Arc<KubeApi>>,
    Path((cloud, cluster)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = api.authorize(&cloud, &cluster, &headers) {
        return err(e);
    }
    reply(
        200,
        &json!({"paths": ["/api", "/api/v1", "/apis", "/apis/apps/v1", "/apis/apiextensions.k8s.io/v1", "/apis/nvidia.com/v1", "/version"]}),
    )
}

fn parse_query(q: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pair in q.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(percent_decode(k), percent_decode(v));
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn handle(
    State(api): State<Arc<KubeApi>>,
    Path((cloud, cluster, rest)): Path<(String, String, String)>,
    method: Method,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if !api.has_cluster(&cloud, &cluster) {
        return err(ApiError::no_such_path());
    }
    match segs.as_slice() {
        ["version"] => return reply(200, &version()),
        ["healthz"] | ["livez"] | ["readyz"] => return (StatusCode::OK, "ok").into_response(),
        _ => {}
    }
    if let Err(e) = api.authorize(&cloud, &cluster, &headers) {
        return err(e);
    }
    let query = parse_query(q.as_deref());
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return err(ApiError::too_large(MAX_BODY)),
    };
    let crd = api
        .with_cluster(&cloud, &cluster, |c| c.crd_present())
        .unwrap_or(false);
    if method == Method::GET && query.get("watch").is_some_and(|w| w == "true" || w == "1") {
        return match watch_target(&segs, crd) {
            Some((kind, ns)) => watch(api, cloud, cluster, kind, ns, &query).await,
            None => err(ApiError::method_not_allowed("WATCH")),
        };
    }
    let warnings = RefCell::new(Vec::new());
    let result = match segs.as_slice() {
        ["api"] => Ok((
            200,
            json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        )),
        ["apis"] => Ok((200, group_list(crd))),
        ["api", "v1"] => Ok((200, resource_list("", "v1"))),
        ["apis", g] => group_doc(g, crd)
            .map(|d| (200, d))
            .ok_or_else(ApiError::no_such_group),
        ["openapi", "v3"] => Ok((200, openapi_root(crd))),
        ["openapi", "v3", gv @ ..] => openapi_gv(&gv.join("/"), crd)
            .map(|d| (200, d))
            .ok_or_else(ApiError::no_such_path),
        ["apis", g, v] if kinds::GROUPS.contains(&(*g, *v)) && (*g != "nvidia.com" || crd) => {
            Ok((200, resource_list(g, v)))
        }
        ["apis", _, _] => Err(ApiError::no_such_group()),
        ["api", "v1", rest @ ..] => resource(
            &api, &cloud, &cluster, "", "v1", rest, &method, &query, &headers, &bytes, &warnings,
        ),
        ["apis", g, v, rest @ ..] if *g != "nvidia.com" || crd => resource(
            &api, &cloud, &cluster, g, v, rest, &method, &query, &headers, &bytes, &warnings,
        ),
        ["apis", _, _, ..] => Err(ApiError::no_such_group()),
        _ => Err(ApiError::no_such_path()),
    };
    let mut resp = match result {
        Ok((code, v)) => reply(code, &v),
        Err(e) => err(e),
    };
    // Each as the API server's warning recorder writes it: code 299, agent "-", quoted text.
    for w in warnings.into_inner() {
        let text = format!("299 - {w:?}");
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn field_manager(query: &BTreeMap<String, String>, headers: &HeaderMap) -> String {
    if let Some(m) = query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    // The API server's default: the user agent up to its first '/'.
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn json_body(kind: Kind, bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if bytes.starts_with(b"k8s\0") {
        return super::proto::decode(bytes).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                kind.kind, kind.version, kind.kind
            ))
        });
    }
    serde_json::from_slice(bytes)
        .or_else(|_| {
            std::str::from_utf8(bytes)
                .map_err(|e| e.to_string())
                .and_then(|s| serde_saphyr::from_str::<Value>(s).map_err(|e| e.to_string()))
        })
        .map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                kind.kind, kind.version, kind.kind
            ))
        })
}

#[allow(clippy::too_many_arguments)]
fn resource(
    api: &KubeApi,
    cloud: &str,
    cluster: &str,
    group: &str,
    version: &str,
    rest: &[&str],
    method: &Method,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    warnings: &RefCell<Vec<String>>,
) -> Result<(u16, Value), ApiError> {
    // namespaces/{ns}/{plural}[/{name}] or {plural}[/{name}]
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if by(group, version, plural).is_some_and(|k| k.namespaced) =>
        {
            (
                Some(*ns),
                *plural,
                tail.first().copied(),
                tail.get(1).copied(),
            )
        }
        [plural, tail @ ..] => (None, *plural, tail.first().copied(), tail.get(1).copied()),
        [] => return Err(ApiError::no_such_path()),
    };
    let kind = by(group, version, plural).ok_or_else(ApiError::no_such_path)?;
    if rest.len() > if ns.is_some() { 5 } else { 3 } {
        return Err(ApiError::no_such_path());
    }
    let evicting = sub == Some("eviction") && kind == kinds::PODS && *method == Method::POST;
    if let Some(s) = sub {
        // Besides a pod's eviction, only the status subresource exists here, readable as the
        // object itself.
        if !evicting && (s != "status" || *method != Method::GET) {
            return Err(ApiError::no_such_path());
        }
    }
    if kind.namespaced && ns.is_none() && name.is_some() {
        return Err(ApiError::no_such_path());
    }
    if kind.read_only && *method != Method::GET {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    let ns_str = ns.unwrap_or_default();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let dry_run = query.get("dryRun").is_some_and(|d| d == "All");
    let manager = field_manager(query, headers);
    let ctx = WriteCtx {
        manager: &manager,
        apply: None,
        validation: match query.get("fieldValidation").map(String::as_str) {
            Some("Ignore") => Validation::Ignore,
            Some("Strict") => Validation::Strict,
            _ => Validation::Warn,
        },
        patch: *method == Method::PATCH,
    };
    let run = |f: &mut dyn FnMut(&mut super::store::Cluster) -> Result<Value, ApiError>| -> Result<Value, ApiError> {
        api.with_cluster_mut(cloud, cluster, dry_run, &mut |c| {
            c.warnings.clear();
            let out = f(c);
            warnings.borrow_mut().append(&mut c.warnings);
            out
        })
        .unwrap_or_else(|| Err(ApiError::no_such_path()))
    };
    if evicting {
        let n = name.unwrap_or_default();
        check_eviction(n, body)?;
        run(&mut |c| c.delete(kinds::PODS, ns_str, n, None))?;
        return Ok((
            201,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Success", "code": 201}),
        ));
    }
    match (method.clone(), name) {
        (Method::GET, None) => {
            let sel = Selector::parse(
                query
                    .get("labelSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?;
            let fields = FieldReq::parse(
                kind,
                query
                    .get("fieldSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?;
            let mut v = api
                .with_cluster(cloud, cluster, |c| c.list(kind, ns, &sel, &fields))
                .ok_or_else(ApiError::no_such_path)?;
            if !kind.custom {
                // A typed list encodes its items without kind and apiVersion; a custom
                // resource's list is unstructured and keeps them.
                for i in v["items"].as_array_mut().into_iter().flatten() {
                    if let Some(m) = i.as_object_mut() {
                        m.remove("kind");
                        m.remove("apiVersion");
                    }
                }
            }
            if table::wants_table(accept) {
                let items = v["items"].as_array().cloned().unwrap_or_default();
                return Ok((
                    200,
                    table::table(
                        kind,
                        &items,
                        v["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or_default(),
                    ),
                ));
            }
            Ok((200, v))
        }
        (Method::GET, Some(n)) => {
            let v = api
                .with_cluster(cloud, cluster, |c| c.get(kind, ns_str, n))
                .ok_or_else(ApiError::no_such_path)??;
            if table::wants_table(accept) && sub.is_none() {
                let rv = v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                return Ok((200, table::table(kind, &[v], &rv)));
            }
            Ok((200, v))
        }
        (Method::POST, None) => {
            let b = json_body(kind, body)?;
            let v = run(&mut |c| c.create(kind, ns_str, b.clone(), &ctx))?;
            Ok((201, v))
        }
        (Method::PUT, Some(n)) => {
            let b = json_body(kind, body)?;
            Ok((
                200,
                run(&mut |c| c.replace(kind, ns_str, n, b.clone(), &ctx))?,
            ))
        }
        (Method::PATCH, Some(n)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let ct = ct
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let ptype = match ct.as_str() {
                "application/merge-patch+json" => PatchType::Merge,
                "application/json-patch+json" => PatchType::Json,
                "application/strategic-merge-patch+json" => PatchType::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+json" => {
                    let Some(m) = query.get("fieldManager").filter(|m| !m.is_empty()) else {
                        return Err(ApiError::invalid(
                            "PatchOptions.meta.k8s.io",
                            "",
                            &[super::status::FieldError::required(
                                "fieldManager",
                                "is required for apply patch",
                            )],
                        ));
                    };
                    let force = query.get("force").is_some_and(|f| f == "true");
                    let b = json_body(kind, body)?;
                    let created = !api
                        .with_cluster(cloud, cluster, |c| c.get(kind, ns_str, n).is_ok())
                        .unwrap_or(false);
                    let v = run(&mut |c| c.apply(kind, ns_str, n, b.clone(), m, force))?;
                    return Ok((if created { 201 } else { 200 }, v));
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let b: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            Ok((
                200,
                run(&mut |c| c.patch(kind, ns_str, n, ptype, &b, &ctx))?,
            ))
        }
        (Method::DELETE, Some(n)) => {
            let pre: Option<String> = serde_json::from_slice::<Value>(body).ok().and_then(|o| {
                o.pointer("/preconditions/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            Ok((
                200,
                run(&mut |c| c.delete(kind, ns_str, n, pre.as_deref()))?,
            ))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

/// The body of `POST .../pods/{name}/eviction`, as kube-apiserver's eviction subresource takes
/// it (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go): an Eviction (policy/v1)
/// naming the pod of the URL. The pod is then deleted and the answer is a Status of success (201). The
/// sandbox serves no PodDisruptionBudgets, so no eviction is refused with 429, and the delete is
/// immediate, as every delete here is (no kubelet ends the pod's containers).
fn check_eviction(name: &str, body: &[u8]) -> Result<(), ApiError> {
    let b: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding Eviction: {e}")))?;
    // A body without kind and apiVersion is read as the endpoint's kind, as the API server's
    // create handler defaults them (the kube crate sends only `metadata`).
    let kind_ok = matches!(
        b.get("kind").and_then(Value::as_str),
        None | Some("Eviction")
    ) && matches!(
        b.get("apiVersion").and_then(Value::as_str),
        None | Some("policy/v1" | "policy/v1beta1")
    );
    if !kind_ok {
        return Err(ApiError::bad_request(
            "the body of an eviction must be a policy/v1 Eviction",
        ));
    }
    if b.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    Ok(())
}

/// A watchable collection: `{prefix}/{plural}` or `{prefix}/namespaces/{ns}/{plural}`.
fn watch_target(segs: &[&str], crd: bool) -> Option<(Kind, Option<String>)> {
    let (group, version, rest) = match segs {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] if *g != "nvidia.com" || crd => (*g, *v, rest),
        _ => return None,
    };
    match rest {
        ["namespaces", ns, plural] => by(group, version, plural)
            .filter(|k| k.namespaced)
            .map(|k| (k, Some(ns.to_string()))),
        [plural] => by(group, version, plural).map(|k| (k, None)),
        _ => None,
    }
}

/// Streams watch events (newline-delimited JSON) until `timeoutSeconds` or the client goes away.
/// Without a resourceVersion (or with "0") the current objects come first as ADDED; from a
/// resourceVersion older than the remembered history, a 410 Expired ERROR event, as the real server does.
async fn watch(
    api: Arc<KubeApi>,
    cloud: String,
    cluster: String,
    kind: Kind,
    ns: Option<String>,
    query: &BTreeMap<String, String>,
) -> Response {
    let sel = match Selector::parse(
        query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    ) {
        Ok(s) => s,
        Err(e) => return err(e),
    };
    let fields = match FieldReq::parse(
        kind,
        query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    ) {
        Ok(f) => f,
        Err(e) => return err(e),
    };
    let from: Option<u64> = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(v) => match v.parse() {
            Ok(n) => Some(n),
            Err(_) => {
                return err(ApiError::bad_request(format!(
                    "invalid resource version: {v}"
                )));
            }
        },
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(1800)
        .min(1800);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    let mut changes = api.subscribe();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(timeout);
        let matches = |o: &Value| {
            sel.matches(&super::meta::labels_of(o)) && fields.iter().all(|f| f.matches(o))
        };
        let line = |t: &str, o: &Value| {
            Ok(Bytes::from(format!(
                "{}\n",
                json!({"type": t, "object": o})
            )))
        };
        let mut last = match from {
            Some(rv) => rv,
            None => {
                let Some((items, rv)) = api.with_cluster(&cloud, &cluster, |c| {
                    (c.list(kind, ns.as_deref(), &sel, &fields), c.rv)
                }) else {
                    return;
                };
                for o in items["items"].as_array().cloned().unwrap_or_default() {
                    if tx.send(line("ADDED", &o)).await.is_err() {
                        return;
                    }
                }
                rv
            }
        };
        loop {
            let Some(batch) = api.with_cluster(&cloud, &cluster, |c| {
                c.events_since(last, kind, ns.as_deref()).map(|e| (e, c.rv))
            }) else {
                return;
            };
            let Some((events, rv)) = batch else {
                let gone =
                    ApiError::new(410, "Expired", format!("too old resource version: {last}"))
                        .to_json();
                let _ = tx.send(line("ERROR", &gone)).await;
                return;
            };
            for e in events.iter().filter(|e| matches(&e.object)) {
                if tx.send(line(e.event_type, &e.object)).await.is_err() {
                    return;
                }
            }
            last = rv;
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tx.closed() => return,
            }
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
        .into_response()
}

fn by(group: &str, version: &str, plural: &str) -> Option<Kind> {
    kinds::by_plural(group, version, plural)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_queries() {
        let q = super::parse_query(Some("labelSelector=a%3Db%2Cc&x=1+2&fieldManager=m"));
        assert_eq!(q["labelSelector"], "a=b,c");
        assert_eq!(q["x"], "1 2");
        assert_eq!(super::percent_decode("%zz%4"), "%zz%4");
    }
}
