//! A real fault: kube-apiserver is killed (SIGKILL, as a crash would) in the middle of an apply
//! of `fracgpu_device_plugin_config`, and started again on the same etcd. The apply cut short
//! must end (an error diagnostic or success, within a bound, never a hang); the next apply must
//! converge, the plan after it be empty, and state, the ConfigMap and the Helm release (or the
//! Argo CD Application, the Flux HelmRelease) agree.
//!
//! The middle is made to last, so the kill lands there every time: for `cluster_policy` a
//! validating webhook on ClusterPolicies whose address accepts connections and never answers
//! holds the pointer's patch (our ConfigMap is written by then) until the server is killed; for
//! `helm` the stand-in for the job controller leaves the chart's pre-upgrade hook Job running,
//! so helm waits with its revision 2 pending-upgrade until the server is killed; for `argocd`
//! and `flux` the same webhook holds the replace of the object that keeps the values.

use std::net::TcpListener;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::device_plugin_config_helm::{helm_config, policy_config, time_sliced};
use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::Tool;

const NS: &str = "gpu-operator";
const CM: &str = "time-slicing-config";
/// Longer than any apply here takes with the server up, far shorter than a hang.
const APPLY_BOUND: Duration = Duration::from_secs(180);

/// `terraform apply` started in the background, its output in files of the workspace.
fn start_apply(ws: &Workspace) -> Child {
    let out = std::fs::File::create(ws.dir.join("cut-apply.out")).unwrap();
    let err = std::fs::File::create(ws.dir.join("cut-apply.err")).unwrap();
    ws.command(&["apply", "-no-color", "-auto-approve", "-input=false"])
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("terraform starts")
}

/// Waits for the apply within [`APPLY_BOUND`]: (exit code, what it printed).
fn finish_apply(ws: &Workspace, mut child: Child) -> (i32, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > APPLY_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the apply cut short by the API server's crash hung for {APPLY_BOUND:?}:\n{}",
                std::fs::read_to_string(ws.dir.join("cut-apply.out")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = ["cut-apply.out", "cut-apply.err"]
        .map(|f| std::fs::read_to_string(ws.dir.join(f)).unwrap_or_default())
        .join("\n");
    (status.code().unwrap_or(-1), text)
}

/// Polls `seen` (as the admin) until it holds, while the apply runs.
fn wait_for(
    op: &OperatorCluster,
    ws: &Workspace,
    what: &str,
    apply: &mut Child,
    seen: impl Fn(&OperatorCluster) -> bool,
) {
    let start = Instant::now();
    while !seen(op) {
        if let Some(status) = apply.try_wait().unwrap() {
            let out = ["cut-apply.out", "cut-apply.err"]
                .map(|f| std::fs::read_to_string(ws.dir.join(f)).unwrap_or_default())
                .join("\n");
            panic!("the apply ended ({status}) before {what}:\n{out}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A loopback address that accepts TCP connections and never answers on them; the receiver
/// hears of each connection as it is accepted.
fn black_hole() -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

/// A copy of the admin's kubeconfig in the workspace, for terraform and helm: the harness
/// writes its own file anew on every kubectl call, and the test calls kubectl while they run.
fn own_kubeconfig(op: &OperatorCluster, ws: &Workspace) -> String {
    let path = ws.dir.join("admin.kubeconfig");
    std::fs::copy(op.kubeconfig(), &path).unwrap();
    path.display().to_string()
}

/// The `data` of the resource in terraform's state.
fn state_data(ws: &Workspace) -> serde_json::Map<String, Value> {
    let show = ws.show_json();
    let res = &show["values"]["root_module"]["resources"][0];
    assert_eq!(res["type"], "fracgpu_device_plugin_config", "{show}");
    res["values"]["data"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The server dies after the ConfigMap is written and while the pointer's patch is held (a
/// webhook that never answers). The create used to look for its ConfigMap while the server was
/// still down, find nothing to say, and leave no state, so the ConfigMap was orphaned and every
/// later apply stopped at "ConfigMap already exists"; it now keeps in state what it wrote.
#[test]
fn cluster_policy_apply_survives_an_apiserver_crash() {
    let Some(mut op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    op.install(Chart::Nvidia, &[]);
    let ws = Workspace::new("").env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.write(
        "main.tf",
        &policy_config(&own_kubeconfig(&op, &ws), NS, None),
    );
    ws.init();

    // Every write of the ClusterPolicy now waits for a webhook that never answers.
    let (port, called) = black_hole();
    let hook = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hold-cluster-policy"},
        "webhooks": [{
            "name": "hold.cluster-policy.test", "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 30, "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(op.server.ca_pem())},
            "rules": [{"apiGroups": ["nvidia.com"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["clusterpolicies"]}],
        }],
    });
    op.server
        .kubectl_stdin(&["create", "-f", "-"], &hook.to_string());

    let apply = start_apply(&ws);
    called
        .recv_timeout(Duration::from_secs(120))
        .expect("the apply patches the ClusterPolicy");
    assert!(
        op.configmap(NS, CM).is_some(),
        "the ConfigMap is written before the pointer"
    );
    op.server.kill_apiserver();
    std::thread::sleep(Duration::from_secs(2));
    op.server.start_apiserver();
    op.server.kubectl_ok(&[
        "delete",
        "validatingwebhookconfiguration",
        "hold-cluster-policy",
    ]);
    let (code, text) = finish_apply(&ws, apply);
    eprintln!("the apply cut short ended with {code}:\n{text}");
    assert!(code == 0 || text.contains("Error:"), "{text}");

    // The next apply converges and the plan after it is empty.
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    let (pointer, keys) = op.operator_reads(NS);
    assert_eq!(pointer, json!({"name": CM, "default": "all"}));
    assert_eq!(keys, ["all", "time-sliced-4"]);
    assert_eq!(Some(state_data(&ws)), op.configmap(NS, CM));
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(op.configmap(NS, CM).is_none());
}

fn helm_apply_survives_an_apiserver_crash(helm: Tool) {
    let Some(mut op) = OperatorCluster::start(helm) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (release, _, _) = chart.release();
    op.install(chart, &[]);
    let ws = Workspace::new("").env("KUBECONFIG", MISSING_KUBECONFIG);
    let access = format!("    config_path = \"{}\"", own_kubeconfig(&op, &ws));
    ws.write(
        "main.tf",
        &helm_config(
            &access,
            &op.helm,
            &op.chart(chart),
            chart.release(),
            &time_sliced("time-sliced-4", 4),
            "time-sliced-4",
        ),
    );
    ws.init();

    // The pre-upgrade hook Job stays running: helm waits for it in the middle of the upgrade.
    op.hooks.pause(true);
    let mut apply = start_apply(&ws);
    let pending = format!("secret/sh.helm.release.v1.{release}.v2");
    wait_for(&op, &ws, "helm's hook Job", &mut apply, |op| {
        op.server
            .kubectl(&["get", "-n", NS, "job/gpu-operator-upgrade-crd"])
            .status
            .success()
    });
    assert!(
        op.server
            .kubectl(&["get", "-n", NS, &pending])
            .status
            .success(),
        "helm has written its pending revision"
    );
    op.server.kill_apiserver();
    std::thread::sleep(Duration::from_secs(2));
    op.server.start_apiserver();
    op.hooks.pause(false);
    let (code, text) = finish_apply(&ws, apply);
    eprintln!("the apply cut short ended with {code}:\n{text}");
    assert!(code == 0 || text.contains("Error:"), "{text}");
    let (_, history, _) = op.helm_try(NS, &["history", release, "-o", "json"]);
    eprintln!("the release's history after the crash: {history}");

    // The next apply converges and the plan after it is empty.
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(
        out.code,
        0,
        "the apply after the crash does not converge:\n{}",
        out.text()
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    let (pointer, keys) = op.operator_reads(NS);
    assert_eq!(pointer, json!({"name": CM, "default": "time-sliced-4"}));
    assert_eq!(keys, ["time-sliced-4"]);
    assert_eq!(Some(state_data(&ws)), op.configmap(NS, CM));
    let status: Value =
        serde_json::from_str(&op.helm(NS, &["status", release, "-o", "json"])).unwrap();
    assert_eq!(status["info"]["status"], "deployed", "{status}");
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(op.values(chart), json!({}));
}

#[test]
fn helm4_apply_survives_an_apiserver_crash() {
    helm_apply_survives_an_apiserver_crash(Tool::Helm4);
}

#[test]
fn helm3_apply_survives_an_apiserver_crash() {
    helm_apply_survives_an_apiserver_crash(Tool::Helm3);
}

/// The GitOps deliveries write one object: the server dies while the replace of the Argo CD
/// Application (or Flux HelmRelease) is held by a webhook that never answers, so nothing was
/// written. The apply ends in a diagnostic; the next one converges, and destroy gives the
/// object its values back.
fn gitops_apply_survives_an_apiserver_crash(
    delivery: &str,
    group: &str,
    resource: &str,
    ns: &str,
    block: &str,
) {
    let Some(mut op) = super::device_plugin_config_gitops::gitops_cluster() else {
        return;
    };
    let sample = if delivery == "argocd" {
        "application.yaml"
    } else {
        "helmrelease.yaml"
    };
    let sample = op.fixtures.join("samples").join(sample);
    op.server.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &sample.display().to_string(),
    ]);
    let kubectl_resource = format!("{resource}.{group}");
    let values = |op: &OperatorCluster| -> Value {
        let obj: Value = serde_json::from_str(&op.server.kubectl_ok(&[
            "get",
            &kubectl_resource,
            "-n",
            ns,
            "gpu-operator",
            "-o",
            "json",
        ]))
        .unwrap();
        let pointer = if delivery == "argocd" {
            "/spec/source/helm/valuesObject"
        } else {
            "/spec/values"
        };
        obj.pointer(pointer).cloned().unwrap_or(Value::Null)
    };
    let before = values(&op);
    let ws = Workspace::new("").env("KUBECONFIG", MISSING_KUBECONFIG);
    let kc = own_kubeconfig(&op, &ws);
    ws.write(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}\nresource \"fracgpu_device_plugin_config\" \"this\" {{\n  delivery       = \"{delivery}\"\n  default_config = \"all\"\n  kubernetes {{ config_path = \"{kc}\" }}\n  config {{ name = \"all\" }}\n{}{block}}}\n",
            time_sliced("time-sliced-4", 4)
        ),
    );
    ws.init();

    let (port, called) = black_hole();
    let hook = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hold-values"},
        "webhooks": [{
            "name": "hold.values.test", "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 30, "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(op.server.ca_pem())},
            "rules": [{"apiGroups": [group], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": [resource]}],
        }],
    });
    op.server
        .kubectl_stdin(&["create", "-f", "-"], &hook.to_string());
    let apply = start_apply(&ws);
    called
        .recv_timeout(Duration::from_secs(120))
        .expect("the apply writes the values");
    op.server.kill_apiserver();
    std::thread::sleep(Duration::from_secs(2));
    op.server.start_apiserver();
    op.server
        .kubectl_ok(&["delete", "validatingwebhookconfiguration", "hold-values"]);
    let (code, text) = finish_apply(&ws, apply);
    eprintln!("{delivery}: the apply cut short ended with {code}:\n{text}");
    assert!(code == 0 || text.contains("Error:"), "{text}");
    assert_eq!(values(&op), before, "{delivery}: nothing was written");

    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{delivery}: {}", plan.text());
    let after = values(&op);
    assert_eq!(after["devicePlugin"]["config"]["default"], "all", "{after}");
    assert_eq!(
        after["devicePlugin"]["config"]["data"]
            .as_object()
            .map(|d| d.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["all".to_string(), "time-sliced-4".to_string()])
    );
    assert_eq!(
        Some(state_data(&ws)),
        after["devicePlugin"]["config"]["data"].as_object().cloned(),
        "{delivery}: state and the object agree"
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(
        values(&op),
        before,
        "{delivery}: destroy gave the values back"
    );
}

#[test]
fn argocd_apply_survives_an_apiserver_crash() {
    gitops_apply_survives_an_apiserver_crash(
        "argocd",
        "argoproj.io",
        "applications",
        "argocd",
        "  argocd {\n    application = \"gpu-operator\"\n  }\n",
    );
}

#[test]
fn flux_apply_survives_an_apiserver_crash() {
    gitops_apply_survives_an_apiserver_crash(
        "flux",
        "helm.toolkit.fluxcd.io",
        "helmreleases",
        "flux-system",
        "  flux {\n    helm_release = \"gpu-operator\"\n  }\n",
    );
}
