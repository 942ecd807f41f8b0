//! A table of bad requests, each answered with the Status object the real API server sends.

use super::*;

struct Bad {
    what: &'static str,
    method: &'static str,
    path: String,
    ctype: &'static str,
    body: String,
    token: Option<&'static str>,
    code: u16,
    reason: &'static str,
    message: &'static str,
}

/// One table row, read left to right: what it is, the request (method, path, content type,
/// body) and the answer (code, reason, message).
fn bad(
    what: &'static str,
    request: (&'static str, &str, &'static str, Value),
    answer: (u16, &'static str, &'static str),
) -> Bad {
    let (method, path, ctype, body) = request;
    let (code, reason, message) = answer;
    let body = match body {
        Value::Null => String::new(),
        Value::String(s) => s,
        v => v.to_string(),
    };
    Bad {
        what,
        method,
        path: path.to_string(),
        ctype,
        body,
        token: None,
        code,
        reason,
        message,
    }
}

#[test]
fn bad_requests_answer_with_status_objects() {
    let srv = serve();
    let j = "application/json";
    let merge = "application/merge-patch+json";
    let apply = "application/apply-patch+yaml";
    let cms = "/api/v1/namespaces/gpu-operator/configmaps";
    let cp = "/apis/nvidia.com/v1/clusterpolicies/cluster-policy";
    let created = srv.call(
        "POST",
        cms,
        Some(json!({"metadata": {"name": "exists"}, "data": {"a": "1"}})),
    );
    assert_eq!(created.code, 201);
    let stale_rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    srv.patch(&format!("{cms}/exists"), merge, r#"{"data":{"a":"2"}}"#);
    srv.call(
        "POST",
        cms,
        Some(json!({"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": true})),
    );
    srv.patch(
        &format!("{cms}/exists?fieldManager=tf"),
        apply,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"exists"},"data":{"b":"1"}}"#,
    );
    srv.patch(&format!("{cms}/exists"), merge, r#"{"data":{"b":"hand"}}"#);

    let mut table = vec![
        Bad {
            token: Some(""),
            ..bad(
                "no token",
                ("GET", "/api/v1/nodes", "", Value::Null),
                (401, "Unauthorized", "Unauthorized"),
            )
        },
        Bad {
            token: Some("wrong"),
            ..bad(
                "wrong token",
                ("GET", "/api/v1/nodes", "", Value::Null),
                (401, "Unauthorized", "Unauthorized"),
            )
        },
        bad(
            "missing object",
            ("GET", &format!("{cms}/nope"), "", Value::Null),
            (404, "NotFound", "configmaps \"nope\" not found"),
        ),
        bad(
            "unknown resource",
            ("GET", "/api/v1/widgets", "", Value::Null),
            (404, "NotFound", "could not find the requested resource"),
        ),
        bad(
            "unknown resource of a served group",
            ("GET", "/apis/batch/v1/widgets", "", Value::Null),
            (404, "NotFound", "could not find the requested resource"),
        ),
        bad(
            "duplicate",
            ("POST", cms, j, json!({"metadata": {"name": "exists"}})),
            (409, "AlreadyExists", "configmaps \"exists\" already exists"),
        ),
        bad(
            "bad name",
            ("POST", cms, j, json!({"metadata": {"name": "Bad_Name"}})),
            (
                422,
                "Invalid",
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
            ),
        ),
        bad(
            "missing name",
            ("POST", cms, j, json!({"metadata": {}})),
            (422, "Invalid", "metadata.name: Required value"),
        ),
        bad(
            "bad key",
            (
                "POST",
                cms,
                j,
                json!({"metadata": {"name": "k"}, "data": {"a/b": "x"}}),
            ),
            (
                422,
                "Invalid",
                "data[a/b]: Invalid value: \"a/b\": a valid config key",
            ),
        ),
        bad(
            "long key",
            (
                "POST",
                cms,
                j,
                json!({"metadata": {"name": "k"}, "data": {"k".repeat(254): "x"}}),
            ),
            (422, "Invalid", "must be no more than 253 characters"),
        ),
        bad(
            "bad label",
            (
                "POST",
                cms,
                j,
                json!({"metadata": {"name": "k", "labels": {"nvidia.com/device-plugin.config": "-x"}}}),
            ),
            (
                422,
                "Invalid",
                "metadata.labels[nvidia.com/device-plugin.config]",
            ),
        ),
        bad(
            "bad namespace name",
            (
                "POST",
                "/api/v1/namespaces",
                j,
                json!({"metadata": {"name": "a.b"}}),
            ),
            (422, "Invalid", "RFC 1123 label"),
        ),
        bad(
            "missing namespace",
            (
                "POST",
                "/api/v1/namespaces/ghost/configmaps",
                j,
                json!({"metadata": {"name": "k"}}),
            ),
            (404, "NotFound", "namespaces \"ghost\" not found"),
        ),
        bad(
            "malformed JSON",
            ("POST", cms, j, Value::String("{\"metadata\": ".into())),
            (400, "BadRequest", "cannot be handled as a ConfigMap"),
        ),
        bad(
            "wrong kind",
            (
                "POST",
                cms,
                j,
                json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "k"}}),
            ),
            (400, "BadRequest", "but a ConfigMap was expected"),
        ),
        bad(
            "namespace mismatch",
            (
                "POST",
                cms,
                j,
                json!({"metadata": {"name": "k", "namespace": "default"}}),
            ),
            (400, "BadRequest", "does not match the namespace"),
        ),
        bad(
            "name mismatch",
            (
                "PUT",
                &format!("{cms}/exists"),
                j,
                json!({"metadata": {"name": "other"}}),
            ),
            (400, "BadRequest", "does not match the name on the URL"),
        ),
        bad(
            "stale resourceVersion",
            (
                "PUT",
                &format!("{cms}/exists"),
                j,
                json!({"metadata": {"name": "exists", "resourceVersion": stale_rv}}),
            ),
            (409, "Conflict", "the object has been modified"),
        ),
        bad(
            "stale resourceVersion in a patch",
            (
                "PATCH",
                &format!("{cms}/exists"),
                merge,
                json!({"metadata": {"resourceVersion": stale_rv}}),
            ),
            (
                409,
                "Conflict",
                "Operation cannot be fulfilled on configmaps \"exists\"",
            ),
        ),
        bad(
            "put of a missing object",
            (
                "PUT",
                &format!("{cms}/nope"),
                j,
                json!({"metadata": {"name": "nope"}}),
            ),
            (404, "NotFound", "not found"),
        ),
        bad(
            "custom resource PUT without resourceVersion",
            (
                "PUT",
                cp,
                j,
                json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "spec": {}}),
            ),
            (422, "Invalid", "must be specified for an update"),
        ),
        bad(
            "bad MIG strategy",
            (
                "PATCH",
                cp,
                merge,
                json!({"spec": {"mig": {"strategy": "half"}}}),
            ),
            (
                422,
                "Invalid",
                "spec.mig.strategy: Unsupported value: \"half\"",
            ),
        ),
        bad(
            "unsupported patch type",
            ("PATCH", &format!("{cms}/exists"), "text/plain", json!({})),
            (415, "UnsupportedMediaType", "unknown format"),
        ),
        bad(
            "json patch test fails",
            (
                "PATCH",
                &format!("{cms}/exists"),
                "application/json-patch+json",
                json!([{"op": "test", "path": "/data/a", "value": "9"}]),
            ),
            (422, "Invalid", "testing value /data/a failed"),
        ),
        bad(
            "json patch not a list",
            (
                "PATCH",
                &format!("{cms}/exists"),
                "application/json-patch+json",
                json!({"op": "add"}),
            ),
            (400, "BadRequest", "must be a list"),
        ),
        bad(
            "apply without fieldManager",
            (
                "PATCH",
                &format!("{cms}/exists"),
                apply,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "exists"}}),
            ),
            (422, "Invalid", "fieldManager: Required value"),
        ),
        bad(
            "apply without kind",
            (
                "PATCH",
                &format!("{cms}/exists?fieldManager=tf"),
                apply,
                json!({"metadata": {"name": "exists"}}),
            ),
            (400, "BadRequest", "apiVersion must be set"),
        ),
        bad(
            "apply conflict",
            (
                "PATCH",
                &format!("{cms}/exists?fieldManager=tf"),
                apply,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "exists"}, "data": {"b": "2"}}),
            ),
            (
                409,
                "Conflict",
                "Apply failed with 1 conflict: conflict with \"sandbox-test\" using v1: .data.b",
            ),
        ),
        bad(
            "immutable ConfigMap",
            (
                "PATCH",
                &format!("{cms}/frozen"),
                merge,
                json!({"data": {"a": "2"}}),
            ),
            (422, "Invalid", "field is immutable when `immutable` is set"),
        ),
        bad(
            "secret with bad base64",
            (
                "POST",
                "/api/v1/namespaces/default/secrets",
                j,
                json!({"metadata": {"name": "s"}, "data": {"k": "!!"}}),
            ),
            (400, "BadRequest", "illegal base64 data"),
        ),
        bad(
            "daemonset selector mismatch",
            (
                "POST",
                "/apis/apps/v1/namespaces/default/daemonsets",
                j,
                json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "c"}}}}}),
            ),
            (
                422,
                "Invalid",
                "`selector` does not match template `labels`",
            ),
        ),
        bad(
            "bad label selector",
            (
                "GET",
                &format!("{cms}?labelSelector=%3D%3Dx"),
                "",
                Value::Null,
            ),
            (400, "BadRequest", "unable to parse requirement"),
        ),
        bad(
            "unsupported field selector",
            (
                "GET",
                &format!("{cms}?fieldSelector=spec.x%3D1"),
                "",
                Value::Null,
            ),
            (400, "BadRequest", "field label not supported: spec.x"),
        ),
        bad(
            "watch from a bad resourceVersion",
            (
                "GET",
                &format!("{cms}?watch=true&resourceVersion=abc"),
                "",
                Value::Null,
            ),
            (400, "BadRequest", "invalid resource version: abc"),
        ),
        bad(
            "delete a protected namespace",
            ("DELETE", "/api/v1/namespaces/kube-system", "", Value::Null),
            (403, "Forbidden", "this namespace may not be deleted"),
        ),
        bad(
            "apply body that is neither JSON nor YAML",
            (
                "PATCH",
                &format!("{cms}/exists?fieldManager=tf"),
                apply,
                Value::String("kind: [unclosed".into()),
            ),
            (400, "BadRequest", "cannot be handled as a ConfigMap"),
        ),
        bad(
            "spec that is not an object",
            (
                "PUT",
                "/api/v1/nodes/any",
                j,
                json!({"metadata": {"name": "any"}, "spec": "x"}),
            ),
            (400, "BadRequest", "spec must be an object"),
        ),
        bad(
            "create a pod without containers",
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                j,
                json!({"metadata": {"name": "p"}}),
            ),
            (422, "Invalid", "spec.containers: Required value"),
        ),
        bad(
            "delete the collection of namespaces",
            ("DELETE", "/api/v1/namespaces", "", Value::Null),
            (405, "MethodNotAllowed", "does not allow this method"),
        ),
        bad(
            "body too large",
            (
                "POST",
                cms,
                j,
                Value::String(format!(
                    "{{\"data\":{{\"k\":\"{}\"}}}}",
                    "x".repeat(3 * 1024 * 1024 + 10)
                )),
            ),
            (413, "RequestEntityTooLarge", "larger than"),
        ),
        bad(
            "data over 1 MiB",
            (
                "POST",
                cms,
                j,
                json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(1024 * 1024 + 1)}}),
            ),
            (422, "Invalid", "Too long: must have at most 1048576 bytes"),
        ),
    ];
    // Another cluster's token does not open this one.
    let eks = srv.token("eks", "sandbox-eks");
    let eks: &'static str = Box::leak(eks.into_boxed_str());
    table.push(Bad {
        token: Some(eks),
        ..bad(
            "another cluster's token",
            ("GET", "/api/v1/nodes", "", Value::Null),
            (401, "Unauthorized", "Unauthorized"),
        )
    });

    let aks = srv.prefix("aks", "sandbox-aks");
    let mut failures = Vec::new();
    for b in &table {
        let r = srv.raw(
            b.method,
            &format!("{aks}{}", b.path),
            b.ctype,
            b.body.as_bytes(),
            b.token,
        );
        let msg = r.body["message"].as_str().unwrap_or_default();
        let ok = r.code == b.code
            && r.body["kind"] == "Status"
            && r.body["apiVersion"] == "v1"
            && r.body["status"] == "Failure"
            && r.body["reason"] == b.reason
            && r.body["code"] == b.code
            && msg.contains(b.message);
        if !ok {
            failures.push(format!("{}: got {} {}", b.what, r.code, r.body));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad requests answered wrongly:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
    assert!(table.len() >= 12);

    // Deleting the ClusterPolicy CRD takes the resource out of discovery and the API.
    let d = srv.call(
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterpolicies.nvidia.com",
        None,
    );
    assert_eq!(d.code, 200, "{}", d.body);
    // A group that is not served answers as Go's mux does (plain text, the differential test
    // compares it with kube-apiserver).
    let r = srv.call("GET", cp, None);
    assert_eq!(
        (r.code, r.body.as_str()),
        (404, Some("404 page not found\n"))
    );
    assert_eq!(srv.call("GET", "/apis/nvidia.com/v1", None).code, 404);
    let names: Vec<Value> = srv.call("GET", "/apis", None).body["groups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(names.iter().all(|g| g["name"] != "nvidia.com"));
    // An unknown cluster is not there at all.
    let r = srv.raw("GET", "/k8s/aks/ghost/api/v1/nodes", "", b"", None);
    assert_eq!(r.code, 404);
}
