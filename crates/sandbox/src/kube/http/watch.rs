//! Watches: a collection's changes streamed as newline-delimited JSON events.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
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
    let asked = match Asked::parse(kind, &req.query) {
        Ok(a) => a,
        Err(e) => return err(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    let changes = api.subscribe();
    let w = Watch {
        api,
        cloud: req.cloud,
        cluster: req.cluster,
        kind,
        ns,
        asked,
        tx,
    };
    tokio::spawn(w.run(changes));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
        .into_response()
}

/// What a watch asks for, from its query.
struct Asked {
    sel: Selector,
    fields: Vec<FieldReq>,
    /// The resourceVersion to resume after; None: from the current objects.
    from: Option<u64>,
    /// A streaming list: the current objects, then a bookmark that says they are all there.
    initial_events: bool,
    timeout: u64,
}

impl Asked {
    fn parse(kind: Kind, query: &BTreeMap<String, String>) -> Result<Asked, ApiError> {
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
        let from: Option<u64> = match query.get("resourceVersion").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(v) => match v.parse() {
                Ok(n) => Some(n),
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
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
                return Err(ApiError::invalid(
                    "",
                    "",
                    &[crate::kube::status::FieldError::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )],
                ));
            }
            if query.get("allowWatchBookmarks").map(String::as_str) != Some("true") {
                return Err(ApiError::invalid(
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
        Ok(Asked {
            sel,
            fields,
            from,
            initial_events,
            timeout,
        })
    }
}

/// One running watch: what it watches, and where its events go.
struct Watch {
    api: Arc<KubeApi>,
    cloud: String,
    cluster: String,
    kind: Kind,
    ns: Option<String>,
    asked: Asked,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::convert::Infallible>>,
}

impl Watch {
    /// Sends events until the deadline, the client going away or the cluster going away; woken
    /// by `changes`.
    async fn run(self, mut changes: tokio::sync::watch::Receiver<u64>) {
        let deadline =
            tokio::time::Instant::now() + std::time::Duration::from_secs(self.asked.timeout);
        let matches = |o: &Value| {
            self.asked.sel.matches(&crate::kube::meta::labels_of(o))
                && self.asked.fields.iter().all(|f| f.matches(o))
        };
        let mut last = match self.asked.from {
            Some(rv) => rv,
            None => match self.send_current().await {
                Some(rv) => rv,
                None => return,
            },
        };
        loop {
            let Some(batch) = self.api.with_cluster(&self.cloud, &self.cluster, |c| {
                c.events_since(last, self.kind, self.ns.as_deref())
                    .map(|e| (e, c.rv))
            }) else {
                return;
            };
            let Some((events, rv)) = batch else {
                let gone =
                    ApiError::new(410, "Expired", format!("too old resource version: {last}"))
                        .to_json();
                let _ = self.send("ERROR", &gone).await;
                return;
            };
            for e in events.iter().filter(|e| matches(&e.object)) {
                if !self.send(e.event_type, &e.object).await {
                    return;
                }
            }
            last = rv;
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = self.tx.closed() => return,
            }
        }
    }

    /// The current objects as ADDED (then, for a streaming list, the bookmark that ends them):
    /// the resourceVersion to follow from, or None when the client or the cluster went away.
    async fn send_current(&self) -> Option<u64> {
        let (items, rv) = self.api.with_cluster(&self.cloud, &self.cluster, |c| {
            (
                c.list(
                    self.kind,
                    self.ns.as_deref(),
                    &self.asked.sel,
                    &self.asked.fields,
                ),
                c.rv,
            )
        })?;
        for o in items["items"].as_array().cloned().unwrap_or_default() {
            if !self.send("ADDED", &o).await {
                return None;
            }
        }
        if self.asked.initial_events {
            let kind = self.kind;
            let end = json!({"kind": kind.kind, "apiVersion": kind.api_version(),
                "metadata": {"resourceVersion": rv.to_string(), "creationTimestamp": null,
                    "annotations": {"k8s.io/initial-events-end": "true"}}});
            if !self.send("BOOKMARK", &end).await {
                return None;
            }
        }
        Some(rv)
    }

    /// Sends one event; false once the client has gone.
    async fn send(&self, event_type: &str, object: &Value) -> bool {
        let line = format!("{}\n", json!({"type": event_type, "object": object}));
        self.tx.send(Ok(Bytes::from(line))).await.is_ok()
    }
}
