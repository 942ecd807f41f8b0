//! Watches: a collection's changes streamed as newline-delimited JSON events.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

use super::answer::{Request, err};
use crate::kube::KubeApi;
use crate::kube::kinds::Kind;
use crate::kube::select::{FieldReq, Selector};
use crate::kube::status::ApiError;

/// A watchable collection: `{prefix}/{plural}` or `{prefix}/namespaces/{ns}/{plural}`.
pub(super) fn target(served: &[Kind], segs: &[&str]) -> Option<(Kind, Option<String>)> {
    let (group, version, rest) = match segs {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let by = |plural: &str| {
        served
            .iter()
            .copied()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .filter(|k| k.can("watch"))
    };
    match rest {
        ["namespaces", ns, plural] => by(plural)
            .filter(|k| k.namespaced)
            .map(|k| (k, Some(ns.to_string()))),
        [plural] => by(plural).map(|k| (k, None)),
        _ => None,
    }
}

/// Streams watch events (newline-delimited JSON) until `timeoutSeconds` or the client goes away.
/// Without a resourceVersion (or with "0") the current objects come first as ADDED; from a
/// resourceVersion older than the remembered history, a 410 Expired ERROR event, as the real server does.
pub(super) async fn watch(
    api: Arc<KubeApi>,
    req: Request,
    kind: Kind,
    ns: Option<String>,
) -> Response {
    let (cloud, cluster, query) = (req.cloud, req.cluster, &req.query);
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
    // A streaming list (KEP-3157, client-go's WatchListClient, which helm 4's status watcher
    // uses): the current objects as ADDED events, then a BOOKMARK annotated
    // `k8s.io/initial-events-end`, after which the informer counts as synced
    // (k8s.io/apiserver pkg/storage/cacher/cache_watcher.go). The API server requires
    // `resourceVersionMatch=NotOlderThan` with it, and bookmarks allowed.
    let initial_events = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    if initial_events {
        if query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
            return err(ApiError::invalid(
                "",
                "",
                &[crate::kube::status::FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )],
            ));
        }
        if query.get("allowWatchBookmarks").map(String::as_str) != Some("true") {
            return err(ApiError::invalid(
                "",
                "",
                &[crate::kube::status::FieldError::forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks must be set to true when sendInitialEvents is specified",
                )],
            ));
        }
    }
    let from = if initial_events { None } else { from };
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
            sel.matches(&crate::kube::meta::labels_of(o)) && fields.iter().all(|f| f.matches(o))
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
                if initial_events {
                    let end = json!({"kind": kind.kind, "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": rv.to_string(), "creationTimestamp": null,
                            "annotations": {"k8s.io/initial-events-end": "true"}}});
                    if tx.send(line("BOOKMARK", &end)).await.is_err() {
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
