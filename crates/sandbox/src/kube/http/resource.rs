//! A resource's requests: `.../{plural}[/{name}[/{subresource}]]`, namespaced or not, read and
//! written through the cluster's store, with the `Warning` headers a write leaves.

use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::answer::{Request, err, reply};
use crate::kube::KubeApi;
use crate::kube::identity::Attrs;
use crate::kube::kinds::{self, Kind};
use crate::kube::patch::PatchType;
use crate::kube::select::{FieldReq, Selector};
use crate::kube::status::{ApiError, FieldError};
use crate::kube::store::{Cluster, Validation, WriteCtx};
use crate::kube::table;

/// Where a request points: the kind, its namespace, the object's name and the subresource.
struct Target<'a> {
    kind: Kind,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn target<'a>(
    served: &[Kind],
    group: &str,
    version: &str,
    rest: &[&'a str],
) -> Result<Target<'a>, ApiError> {
    let find = |plural: &str| {
        served
            .iter()
            .copied()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
    };
    let (ns, plural, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|k| k.namespaced) => {
            (Some(*ns), *plural, tail)
        }
        [plural, tail @ ..] => (None, *plural, tail),
        [] => return Err(ApiError::no_such_path()),
    };
    let kind = find(plural).ok_or_else(ApiError::no_such_path)?;
    if tail.len() > 2 || (kind.namespaced && ns.is_none() && !tail.is_empty()) {
        return Err(ApiError::no_such_path());
    }
    let sub = tail.get(1).copied();
    if sub.is_some_and(|s| !kind.has_sub(s)) {
        return Err(ApiError::no_such_path());
    }
    Ok(Target {
        kind,
        ns,
        name: tail.first().copied(),
        sub,
    })
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

pub(super) fn json_body(kind: Kind, bytes: &[u8]) -> Result<Value, ApiError> {
    let refused = |e: String| {
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            kind.kind, kind.version, kind.kind
        ))
    };
    if bytes.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if bytes.starts_with(b"k8s\0") {
        if !crate::kube::proto::decodes(kind.group, kind.kind) {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types \
                        include: application/json, application/yaml (the sandbox reads protobuf \
                        bodies of a few kinds only, not {})",
                    kind.kind
                ),
            ));
        }
        return crate::kube::proto::decode(bytes).map_err(refused);
    }
    serde_json::from_slice(bytes)
        .or_else(|_| {
            std::str::from_utf8(bytes)
                .map_err(|e| e.to_string())
                .and_then(|s| serde_saphyr::from_str::<Value>(s).map_err(|e| e.to_string()))
        })
        .map_err(refused)
}

/// Answers one resource request, with the Warning headers its write left (each as the API
/// server's warning recorder writes it: code 299, agent "-", quoted text).
pub(super) async fn handle(
    api: &KubeApi,
    req: &Request,
    served: &[Kind],
    group: &str,
    version: &str,
    rest: &[&str],
) -> Response {
    let mut warnings = Vec::new();
    let result = match target(served, group, version, rest) {
        Err(e) => Err(e),
        Ok(t) => match admit(api, req, &t).await {
            Ok(()) => dispatch(api, req, &t, &mut warnings, false),
            Err(e) => Err(e),
        },
    };
    let mut resp = match result {
        Ok((code, v)) => reply(code, &v),
        Err(e) => err(e),
    };
    for w in warnings {
        if let Ok(v) = axum::http::HeaderValue::from_str(&format!("299 - {w:?}")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

type Answer = Result<(u16, Value), ApiError>;

/// What `POST .../serviceaccounts/{name}/token` takes, for decoding its body.
const TOKEN_REQUEST: Kind = Kind {
    group: "authentication.k8s.io",
    version: "v1",
    plural: "tokenrequests",
    singular: "tokenrequest",
    kind: "TokenRequest",
    namespaced: true,
    short_names: &[],
    categories: &[],
    subresources: &[],
    verbs: kinds::CREATE_ONLY,
    generation: false,
    custom: false,
    unconditional_update: true,
};

/// The validating webhooks' say on a write, asked with the object the write would store (found
/// by a dry run of it) and the one it replaces; a write no webhook's rules match goes on at once.
async fn admit(api: &KubeApi, req: &Request, t: &Target<'_>) -> Result<(), ApiError> {
    let op = match (&req.method, t.name) {
        (&Method::POST, None) => "CREATE",
        (&Method::PUT | &Method::PATCH, Some(_)) => "UPDATE",
        (&Method::DELETE, Some(_)) => "DELETE",
        _ => return Ok(()),
    };
    if t.kind.virtual_kind() || matches!(t.sub, Some("eviction" | "token" | "scale")) {
        return Ok(());
    }
    let (kind, ns, sub) = (t.kind, t.ns.unwrap_or_default(), t.sub.unwrap_or_default());
    let with = |f: &mut dyn FnMut(&Cluster) -> Option<Value>| {
        api.with_cluster(&req.cloud, &req.cluster, |c| f(c))
            .flatten()
    };
    if api
        .with_cluster(&req.cloud, &req.cluster, |c| {
            c.webhooks(kind, op, sub).is_empty()
        })
        .unwrap_or(true)
    {
        return Ok(());
    }
    let old = t.name.and_then(|n| with(&mut |c| c.get(kind, ns, n).ok()));
    // An apply that creates the object is a CREATE.
    let op = if op == "UPDATE" && old.is_none() {
        "CREATE"
    } else {
        op
    };
    let object = match op {
        "DELETE" => None,
        _ => Some(dispatch(api, req, t, &mut Vec::new(), true)?.1),
    };
    let Some(seen) = object.as_ref().or(old.as_ref()) else {
        return Ok(());
    };
    let name = crate::kube::meta::meta_str(seen, "name")
        .unwrap_or_default()
        .to_string();
    let hooks = api
        .with_cluster(&req.cloud, &req.cluster, |c| {
            c.webhooks(kind, op, sub)
                .into_iter()
                .filter(|h| c.selected(h, kind, ns, seen))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let review = crate::kube::admission::Review {
        kind,
        sub,
        op,
        namespace: ns,
        name: &name,
        object,
        old: if op == "CREATE" { None } else { old },
        user: req.user.info(),
        dry_run: req.query.get("dryRun").is_some_and(|d| d == "All"),
    };
    crate::kube::admission::admit(&hooks, &review).await
}

fn dispatch(
    api: &KubeApi,
    req: &Request,
    t: &Target,
    warnings: &mut Vec<String>,
    dry: bool,
) -> Answer {
    let kind = t.kind;
    if !kind.can(verb_of(&req.method, t.name.is_some())) && t.sub.is_none() {
        return Err(ApiError::method_not_allowed(req.method.as_str()));
    }
    let ns = t.ns.unwrap_or_default();
    let manager = field_manager(&req.query, &req.headers);
    let ctx = WriteCtx {
        manager: &manager,
        apply: None,
        validation: match req.query.get("fieldValidation").map(String::as_str) {
            Some("Ignore") => Validation::Ignore,
            Some("Strict") => Validation::Strict,
            _ => Validation::Warn,
        },
        patch: req.method == Method::PATCH,
        subresource: t.sub,
    };
    let dry_run = dry || req.query.get("dryRun").is_some_and(|d| d == "All");
    let mut run =
        |f: &mut dyn FnMut(&mut Cluster) -> Result<Value, ApiError>| -> Result<Value, ApiError> {
            api.with_cluster_mut(&req.cloud, &req.cluster, dry_run, &mut |c| {
                c.warnings.clear();
                let out = f(c);
                warnings.append(&mut c.warnings);
                out
            })
            .unwrap_or_else(|| Err(ApiError::no_such_path()))
        };
    let body = &req.body[..];
    match (t.sub, &req.method, t.name) {
        (None, &Method::POST, None) if kind.virtual_kind() => {
            let b = json_body(kind, body)?;
            let v = api
                .with_cluster(&req.cloud, &req.cluster, |c| {
                    crate::kube::auth::review(c, &req.user, kind, ns, &b)
                })
                .ok_or_else(ApiError::no_such_path)??;
            Ok((201, v))
        }
        (Some("token"), &Method::POST, Some(n)) => {
            let b = json_body(TOKEN_REQUEST, body)?;
            Ok((201, run(&mut |c| c.token_request(ns, n, &b))?))
        }
        (Some("eviction"), &Method::POST, Some(n)) => {
            check_eviction(n, body)?;
            run(&mut |c| c.delete(kinds::PODS, ns, n, None))?;
            Ok((
                201,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Success", "code": 201}),
            ))
        }
        (Some("scale"), _, Some(n)) => scale(api, req, &mut run, kind, ns, n, &ctx),
        (Some("status") | None, &Method::GET, Some(n)) => {
            get(api, req, kind, ns, n, t.sub.is_none())
        }
        (Some("status") | None, &Method::PUT, Some(n)) => {
            let b = json_body(kind, body)?;
            Ok((200, run(&mut |c| c.replace(kind, ns, n, b.clone(), &ctx))?))
        }
        (Some("status") | None, &Method::PATCH, Some(n)) => patch(req, &mut run, kind, ns, n, &ctx),
        (None, &Method::GET, None) => list(api, req, kind, t.ns),
        (None, &Method::POST, None) => {
            let b = json_body(kind, body)?;
            Ok((201, run(&mut |c| c.create(kind, ns, b.clone(), &ctx))?))
        }
        (None, &Method::DELETE, Some(n)) => {
            let pre: Option<String> = serde_json::from_slice::<Value>(body).ok().and_then(|o| {
                o.pointer("/preconditions/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            Ok((200, run(&mut |c| c.delete(kind, ns, n, pre.as_deref()))?))
        }
        (None, &Method::DELETE, None) => {
            let sel = selector(req)?;
            let fields = field_selector(req, kind)?;
            Ok((
                200,
                run(&mut |c| c.delete_collection(kind, t.ns, &sel, &fields))?,
            ))
        }
        (_, m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

fn verb_of(method: &Method, named: bool) -> &'static str {
    crate::kube::identity::verb_of(method.as_str(), named, false)
}

fn selector(req: &Request) -> Result<Selector, ApiError> {
    Selector::parse(
        req.query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
}

fn field_selector(req: &Request, kind: Kind) -> Result<Vec<FieldReq>, ApiError> {
    FieldReq::parse(
        kind,
        req.query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
}

fn accept(req: &Request) -> &str {
    req.headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn list(api: &KubeApi, req: &Request, kind: Kind, ns: Option<&str>) -> Answer {
    let sel = selector(req)?;
    let fields = field_selector(req, kind)?;
    let mut v = api
        .with_cluster(&req.cloud, &req.cluster, |c| {
            c.list(kind, ns, &sel, &fields)
        })
        .ok_or_else(ApiError::no_such_path)?;
    if !kind.custom {
        // A typed list encodes its items without kind and apiVersion; a custom resource's list
        // is unstructured and keeps them.
        for i in v["items"].as_array_mut().into_iter().flatten() {
            if let Some(m) = i.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
        }
    }
    if table::wants_table(accept(req)) {
        let items = v["items"].as_array().cloned().unwrap_or_default();
        let rv = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        return Ok((200, table::table(kind, &items, &rv)));
    }
    Ok((200, v))
}

fn get(api: &KubeApi, req: &Request, kind: Kind, ns: &str, name: &str, as_table: bool) -> Answer {
    let v = api
        .with_cluster(&req.cloud, &req.cluster, |c| c.get(kind, ns, name))
        .ok_or_else(ApiError::no_such_path)??;
    if as_table && table::wants_table(accept(req)) {
        let rv = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        return Ok((200, table::table(kind, &[v], &rv)));
    }
    Ok((200, v))
}

type Run<'a> = dyn FnMut(&mut dyn FnMut(&mut Cluster) -> Result<Value, ApiError>) -> Result<Value, ApiError>
    + 'a;

fn patch(req: &Request, run: &mut Run, kind: Kind, ns: &str, name: &str, ctx: &WriteCtx) -> Answer {
    let ct = req
        .headers
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
            let Some(m) = req.query.get("fieldManager").filter(|m| !m.is_empty()) else {
                return Err(ApiError::invalid(
                    "PatchOptions.meta.k8s.io",
                    "",
                    &[FieldError::required(
                        "fieldManager",
                        "is required for apply patch",
                    )],
                ));
            };
            if ctx.subresource.is_some() {
                // Not modelled: a server-side apply to a subresource (its managedFields entry
                // would name the subresource). Clients here merge-patch their status.
                return Err(ApiError::unsupported_media_type(&ct));
            }
            let force = req.query.get("force").is_some_and(|f| f == "true");
            let b = json_body(kind, &req.body)?;
            let mut created = false;
            let v = run(&mut |c| {
                created = c.get(kind, ns, name).is_err();
                // An apply that creates the object needs `create` too, besides the `patch` the
                // request was authorized for (k8s.io/apiserver pkg/endpoints/handlers/patch.go
                // authorizes the create of an upsert).
                let create = Attrs {
                    verb: "create".into(),
                    group: kind.group.into(),
                    resource: kind.plural.into(),
                    namespace: ns.into(),
                    name: name.into(),
                    ..Attrs::default()
                };
                if created && !c.allowed(&req.user, &create) {
                    return Err(create.forbidden(&req.user.name));
                }
                c.apply(kind, ns, name, b.clone(), m, force)
            })?;
            return Ok((if created { 201 } else { 200 }, v));
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    let b: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    Ok((200, run(&mut |c| c.patch(kind, ns, name, ptype, &b, ctx))?))
}

/// The scale subresource (autoscaling/v1 Scale): `spec.replicas` of the object, read and
/// written (k8s.io/kubernetes pkg/registry/apps/deployment/storage/storage.go ScaleREST; a CRD's
/// from its `specReplicasPath`, `statusReplicasPath` and `labelSelectorPath`).
fn scale(
    api: &KubeApi,
    req: &Request,
    run: &mut Run,
    kind: Kind,
    ns: &str,
    name: &str,
    ctx: &WriteCtx,
) -> Answer {
    let paths = api
        .with_cluster(&req.cloud, &req.cluster, |c| c.scale_paths(kind))
        .ok_or_else(ApiError::no_such_path)?;
    let of = |obj: &Value| {
        let at = |p: &str| obj.pointer(&crate::kube::store::json_pointer(p)).cloned();
        let meta = &obj["metadata"];
        let mut s = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": at(&paths.0).unwrap_or(json!(0))},
            "status": {"replicas": at(&paths.1).unwrap_or(json!(0))}});
        if let Some(sel) = at(&paths.2) {
            s["status"]["selector"] = sel;
        }
        if !kind.namespaced {
            s["metadata"].as_object_mut().map(|m| m.remove("namespace"));
        }
        s
    };
    if req.method == Method::GET {
        let obj = api
            .with_cluster(&req.cloud, &req.cluster, |c| c.get(kind, ns, name))
            .ok_or_else(ApiError::no_such_path)??;
        return Ok((200, of(&obj)));
    }
    let replicas = match req.method {
        Method::PUT => json_body(kind, &req.body)?
            .pointer("/spec/replicas")
            .cloned(),
        Method::PATCH => serde_json::from_slice::<Value>(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
            .pointer("/spec/replicas")
            .cloned(),
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    };
    let Some(replicas) = replicas.filter(Value::is_i64) else {
        return Err(ApiError::bad_request(
            "a Scale must set spec.replicas to an integer",
        ));
    };
    let spec_path = paths.0.clone();
    let obj = run(&mut |c| {
        let mut patch = json!({});
        crate::kube::patch::set_dotted(&mut patch, &spec_path, replicas.clone());
        let plain = WriteCtx {
            subresource: None,
            ..ctx.clone()
        };
        c.patch(kind, ns, name, PatchType::Merge, &patch, &plain)
    })?;
    Ok((200, of(&obj)))
}

/// The body of `POST .../pods/{name}/eviction`, as kube-apiserver's eviction subresource takes
/// it (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go): an Eviction (policy/v1)
/// naming the pod of the URL. The pod is then deleted and the answer is a Status of success
/// (201). No PodDisruptionBudget is consulted here, so no eviction is refused with 429, and the
/// delete is immediate, as every delete here is (no kubelet ends the pod's containers).
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
