//! The HTTP face: `/k8s/{cloud}/{cluster}/...` answers like that cluster's API server would, and
//! [`KubeApi::root_router`] serves one cluster at the root of its own address, as a cluster's
//! API server is reached. Discovery and OpenAPI are answered here; a resource's requests in
//! [`resource`], watches in [`watch`].

mod answer;
mod resource;
mod watch;

use answer::{Request, err, reply, reply_as};

use super::KubeApi;
use super::discovery::{self, group_doc, group_list, resource_list, root_paths};
use super::kinds::Kind;
use super::openapi;
use super::status::ApiError;
use super::tls::TlsListener;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The API server's own limit on request bodies.
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

pub(crate) fn router(api: Arc<KubeApi>) -> Router {
    Router::new()
        .route("/k8s/{cloud}/{cluster}", any(handle_prefixed))
        .route("/k8s/{cloud}/{cluster}/", any(handle_prefixed))
        .route("/k8s/{cloud}/{cluster}/{*rest}", any(handle_prefixed))
        .with_state(api)
}

impl KubeApi {
    /// Serves `/k8s/{cloud}/{cluster}/...`; the sandbox's main app nests or merges it.
    pub fn router(self: &Arc<Self>) -> Router {
        router(self.clone())
    }

    /// Serves one cluster's API at the root (`/api`, `/apis`, ...), as its own API server.
    pub fn root_router(self: &Arc<Self>, cloud: &str, cluster: &str) -> Router {
        let state = (self.clone(), cloud.to_string(), cluster.to_string());
        Router::new()
            .route("/", any(handle_rooted))
            .route("/{*rest}", any(handle_rooted))
            .with_state(Arc::new(state))
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

type Rooted = Arc<(Arc<KubeApi>, String, String)>;

/// A request's cluster and the path after its root.
struct Target {
    api: Arc<KubeApi>,
    cloud: String,
    cluster: String,
    rest: String,
}

async fn handle_rooted(
    State(s): State<Rooted>,
    rest: Option<Path<String>>,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = rest.map(|Path(r)| r).unwrap_or_default();
    let (api, cloud, cluster) = (s.0.clone(), s.1.clone(), s.2.clone());
    let target = Target {
        api,
        cloud,
        cluster,
        rest,
    };
    serve(target, method, q, headers, body).await
}

async fn handle_prefixed(
    State(api): State<Arc<KubeApi>>,
    Path(p): Path<BTreeMap<String, String>>,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let part = |k: &str| p.get(k).cloned().unwrap_or_default();
    let target = Target {
        api,
        cloud: part("cloud"),
        cluster: part("cluster"),
        rest: part("rest"),
    };
    serve(target, method, q, headers, body).await
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

async fn serve(
    target: Target,
    method: Method,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Target {
        api,
        cloud,
        cluster,
        rest,
    } = target;
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if !api.has_cluster(&cloud, &cluster) {
        return err(ApiError::no_such_path());
    }
    match segs.as_slice() {
        ["version"] => return reply(200, &discovery::version()),
        ["healthz"] | ["livez"] | ["readyz"] => return (StatusCode::OK, "ok").into_response(),
        _ => {}
    }
    let query = parse_query(q.as_deref());
    let watching = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let attrs = crate::kube::identity::Attrs::of(method.as_str(), &segs, watching);
    let user = match api.admit(&cloud, &cluster, &headers, &attrs) {
        Ok(u) => u,
        Err(e) => return err(e),
    };
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return err(ApiError::too_large(MAX_BODY)),
    };
    let req = Request {
        cloud,
        cluster,
        method,
        query,
        headers,
        body: bytes,
        user,
    };
    let Some(served) = api.with_cluster(&req.cloud, &req.cluster, |c| {
        c.served().collect::<Vec<Kind>>()
    }) else {
        return err(ApiError::no_such_path());
    };
    if req.method == Method::GET && watching {
        return match watch::target(&served, &segs) {
            Some((kind, ns)) => watch::watch(api, req, kind, ns).await,
            None => err(ApiError::method_not_allowed("WATCH")),
        };
    }
    if let Some(answer) = describe(&api, &req, &served, &segs) {
        return answer;
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return err(ApiError::no_such_path()),
    };
    if !served
        .iter()
        .any(|k| k.group == group && k.version == version)
    {
        return err(if group.is_empty() {
            ApiError::no_such_path()
        } else {
            ApiError::no_such_group()
        });
    }
    resource::handle(&api, &req, &served, group, version, rest).await
}

/// Discovery and OpenAPI, the documents about the API; None for any other path.
fn describe(api: &KubeApi, req: &Request, served: &[Kind], segs: &[&str]) -> Option<Response> {
    if req.method != Method::GET {
        return None;
    }
    let accept = req
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let aggregated = discovery::wants_aggregated(accept);
    let schema_of = |k: &Kind| {
        api.with_cluster(&req.cloud, &req.cluster, |c| c.schema_of(*k))
            .flatten()
    };
    let answer = match segs {
        [] => Ok(root_paths(served)),
        ["api"] if aggregated => {
            return Some(reply_as(
                200,
                &discovery::aggregated(served, true),
                discovery::AGGREGATED_CONTENT_TYPE,
            ));
        }
        ["apis"] if aggregated => {
            return Some(reply_as(
                200,
                &discovery::aggregated(served, false),
                discovery::AGGREGATED_CONTENT_TYPE,
            ));
        }
        ["api"] => Ok(discovery::api_versions()),
        ["apis"] => Ok(group_list(served)),
        ["apis", g] => group_doc(served, g).ok_or_else(ApiError::no_such_group),
        ["api", "v1"] => resource_list(served, "", "v1").ok_or_else(ApiError::no_such_path),
        ["apis", g, v] => resource_list(served, g, v).ok_or_else(ApiError::no_such_group),
        ["openapi", "v2"] => {
            let doc = openapi::v2(served, &schema_of, &api.openapi);
            if accept.contains("protobuf") {
                let body = crate::kube::openapi_proto::document(&doc);
                let ct = crate::kube::openapi_proto::CONTENT_TYPE;
                return Some((StatusCode::OK, [(header::CONTENT_TYPE, ct)], body).into_response());
            }
            Ok(doc)
        }
        ["openapi", "v3", rest @ ..] => {
            openapi::v3(served, &rest.join("/"), &schema_of, &api.openapi)
                .ok_or_else(ApiError::no_such_path)
        }
        _ => return None,
    };
    Some(match answer {
        Ok(v) => reply(200, &v),
        Err(e) => err(e),
    })
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
