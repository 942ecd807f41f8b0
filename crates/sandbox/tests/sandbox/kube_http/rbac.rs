//! RBAC as kube-apiserver answers it, driven by kubectl (which sends its typed creates and its
//! reviews as protobuf): a ServiceAccount's token from the TokenRequest API, the 403 wording of
//! each kind of request (named, list, watch, subresource, cluster scope, path), a Role and its
//! binding that allow exactly what they say, `kubectl auth can-i --as` through impersonation and
//! a SelfSubjectAccessReview, `kubectl auth whoami`, and a token that dies with its
//! ServiceAccount. The expected messages are the ones a real v1.34.9 server gives for the same
//! requests (the differential test compares the two where a real one is given).

use super::*;

fn forbidden(srv: &Server, token: &str, path: &str) -> (u16, String, Value) {
    let r = srv.raw(
        "GET",
        &format!("{}{path}", srv.prefix("aks", "sandbox-aks")),
        "",
        b"",
        Some(token),
    );
    let msg = r.body["message"].as_str().unwrap_or_default().to_string();
    (r.code, msg, r.body["details"].clone())
}

#[test]
fn service_account_tokens_roles_and_reviews() {
    let srv = serve();
    let Some(k) = Kubectl::new(&srv, "aks", "sandbox-aks") else {
        return;
    };
    k.ok(&["create", "namespace", "team"]);
    k.ok(&["create", "serviceaccount", "-n", "team", "amy"]);
    let token = k
        .ok(&["create", "token", "-n", "team", "amy", "--duration=2h"])
        .trim()
        .to_string();
    let who = "User \"system:serviceaccount:team:amy\"";

    let cases = [
        (
            "/api/v1/namespaces/team/configmaps/x",
            format!(
                "configmaps \"x\" is forbidden: {who} cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "x", "kind": "configmaps"}),
        ),
        (
            "/apis/apps/v1/namespaces/team/deployments",
            format!(
                "deployments.apps is forbidden: {who} cannot list resource \"deployments\" in API group \"apps\" in the namespace \"team\""
            ),
            json!({"group": "apps", "kind": "deployments"}),
        ),
        (
            "/api/v1/nodes/n1/status",
            format!(
                "nodes \"n1\" is forbidden: {who} cannot get resource \"nodes/status\" in API group \"\" at the cluster scope"
            ),
            json!({"name": "n1", "kind": "nodes"}),
        ),
        (
            "/api/v1/namespaces/team/pods?watch=true",
            format!(
                "pods is forbidden: {who} cannot watch resource \"pods\" in API group \"\" in the namespace \"team\""
            ),
            json!({"kind": "pods"}),
        ),
        (
            "/api/v1/namespaces/team",
            format!(
                "namespaces \"team\" is forbidden: {who} cannot get resource \"namespaces\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "team", "kind": "namespaces"}),
        ),
        (
            "/metrics",
            format!("forbidden: {who} cannot get path \"/metrics\""),
            json!({}),
        ),
    ];
    for (path, message, details) in &cases {
        let (code, msg, det) = forbidden(&srv, &token, path);
        assert_eq!((code, &msg, &det), (403, message, details), "{path}");
    }
    // Discovery is every authenticated user's (system:discovery).
    let (code, _, _) = forbidden(&srv, &token, "/apis/apps/v1");
    assert_eq!(code, 200);

    k.ok(&[
        "create",
        "role",
        "reader",
        "-n",
        "team",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "team",
        "--role=reader",
        "--serviceaccount=team:amy",
    ]);
    let sa = "system:serviceaccount:team:amy";
    for (args, want) in [
        (vec!["get", "configmaps", "-n", "team"], "yes"),
        (vec!["create", "configmaps", "-n", "team"], "no"),
        (vec!["list", "configmaps", "-n", "default"], "no"),
        (vec!["get", "configmaps/anything", "-n", "team"], "yes"),
    ] {
        let mut a = vec!["auth", "can-i"];
        a.extend(&args);
        a.extend(["--as", sa]);
        let (_, out, _) = k.run(&a);
        assert_eq!(out.trim(), want, "kubectl auth can-i {args:?} --as {sa}");
    }
    let (code, _, _) = forbidden(&srv, &token, "/api/v1/namespaces/team/configmaps");
    assert_eq!(code, 200, "the Role allows listing configmaps");

    // The ServiceAccount's own view.
    let base = format!("{}{}", srv.base, srv.prefix("aks", "sandbox-aks"));
    let ca = k.dir().join("ca.pem");
    std::fs::write(&ca, srv.api.ca_pem()).expect("ca");
    let as_sa = |args: &[&str]| {
        let mut a = vec![
            "--kubeconfig",
            "/dev/null",
            "--server",
            &base,
            "--token",
            &token,
        ];
        let ca = ca.display().to_string();
        a.extend(["--certificate-authority", &ca]);
        a.extend(args);
        let out = Command::new(&k.bin)
            .args(&a)
            .output()
            .expect("kubectl runs");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let whoami = as_sa(&["auth", "whoami", "-o", "json"]);
    let me: Value = serde_json::from_str(&whoami).unwrap_or_else(|_| panic!("{whoami}"));
    assert_eq!(me["status"]["userInfo"]["username"], sa);
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:team",
            "system:authenticated"
        ])
    );
    let rules = as_sa(&["auth", "can-i", "--list", "-n", "team"]);
    assert!(
        rules
            .lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list]")),
        "{rules}"
    );
    // A ServiceAccount may not impersonate.
    let denied = srv.raw_with(
        "GET",
        &format!(
            "{}/api/v1/namespaces/team/configmaps",
            srv.prefix("aks", "sandbox-aks")
        ),
        "",
        b"",
        Some(&token),
        &[("Impersonate-User", "someone")],
    );
    assert_eq!(denied.code, 403);
    assert_eq!(
        denied.body["message"],
        format!(
            "users \"someone\" is forbidden: {who} cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );
    assert_eq!(
        denied.body["details"],
        json!({"name": "someone", "kind": "users"})
    );
    // The token dies with its ServiceAccount.
    k.ok(&["delete", "serviceaccount", "-n", "team", "amy"]);
    let (code, msg, _) = forbidden(&srv, &token, "/api/v1/namespaces/team/configmaps");
    assert_eq!((code, msg.as_str()), (401, "Unauthorized"));
}
