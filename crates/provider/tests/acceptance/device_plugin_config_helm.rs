//! `fracgpu_device_plugin_config` with delivery "helm", and "cluster_policy" on a ClusterPolicy
//! that a Helm release owns, driven through the real terraform with real helm 3 and helm 4
//! against a control plane (`testkit::apiserver`), on which NVIDIA's gpu-operator chart v25.10.1
//! or v26.7.0 is installed (on its own, and v25.10.1 inside the wrapping chart of
//! `tests/fixtures/charts`). `KUBECONFIG` names a file that does not exist, or another server
//! running the same release, for every terraform run: helm must reach the cluster the resource
//! names and nothing else.

use std::io::Write as _;
use std::path::Path;

use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::Tool;
use base64::Engine as _;
use serde_json::{Value, json};

const CM: &str = "time-slicing-config";

/// The managers that hold a ClusterPolicy field, as (manager, operation).
fn owners(policy: &Value, fields_v1: &str) -> Vec<(String, String)> {
    policy["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["fieldsV1"].pointer(fields_v1).is_some())
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default().to_string(),
                m["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

pub(crate) fn helm_config(
    kubernetes: &str,
    helm: &Path,
    chart: &str,
    release: (&str, &str, &str),
    configs: &str,
    default: &str,
) -> String {
    let (release, ns, values_path) = release;
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "helm"
  default_config = "{default}"
  kubernetes {{
{kubernetes}
  }}
{configs}
  helm {{
    release     = "{release}"
    namespace   = "{ns}"
    chart       = "{chart}"
    values_path = "{values_path}"
    helm_path   = "{helm}"
  }}
}}
"#,
        helm = helm.display(),
    )
}

pub(crate) fn time_sliced(name: &str, replicas: u32) -> String {
    format!(
        "  config {{\n    name = \"{name}\"\n    time_slicing {{\n      replicas          = {replicas}\n      rename_by_default = true\n    }}\n  }}\n"
    )
}

/// Create; empty plan; rename a config; empty plan; a hand `helm upgrade --reuse-values --set`
/// is drift that apply repairs; destroy gives the release back the values it had before. What
/// the operator reads (the ClusterPolicy's pointer and the ConfigMap it names) is checked at
/// every step. With `other_cluster_in_kubeconfig`, `KUBECONFIG` names another API server
/// running the same release, which must never be upgraded; else a file that does not exist.
/// `op` is where the operator runs: a control plane, or a cluster of `serve`.
fn helm_lifecycle(
    op: Option<OperatorCluster>,
    helm_tool: Tool,
    chart: Chart,
    other_cluster_in_kubeconfig: bool,
) {
    let Some(op) = op else {
        return;
    };
    let other = other_cluster_in_kubeconfig.then(|| {
        let other = OperatorCluster::start(helm_tool).expect("a second API server");
        other.install(chart, &[]);
        other
    });
    let (_, ns, values_path) = chart.release();
    let dp_values = values_path.to_string();
    // The platform team's own device plugin values, which destroy must give back.
    let before =
        json!({"create": true, "name": "platform-config", "default": "all", "data": {"all": ""}});
    op.install(chart, &[format!("{dp_values}.config={before}")]);
    let values_before = op.values(chart);
    let kubeconfig_env = match &other {
        Some(o) => o.kc(),
        None => MISSING_KUBECONFIG.to_string(),
    };
    // Configs the chart itself defines stay in what it renders.
    let chart_own: &[&str] = match chart {
        Chart::Nvidia | Chart::NvidiaV26 => &[],
        Chart::Wrapper => &["time-sliced-10"],
    };
    let expect_keys = |ours: &[&str]| {
        let mut k: Vec<String> = ours
            .iter()
            .chain(chart_own)
            .map(|s| s.to_string())
            .collect();
        k.sort();
        k
    };

    let access = format!("    config_path = \"{}\"", op.kc());
    let chart_path = op.chart(chart);
    let config = |configs: &str, default: &str| {
        helm_config(
            &access,
            &op.helm,
            &chart_path,
            chart.release(),
            configs,
            default,
        )
    };
    let ws = Workspace::new(&config(
        &format!(
            "  config {{ name = \"all\" }}\n{}",
            time_sliced("time-sliced-8", 8)
        ),
        "all",
    ))
    .env("KUBECONFIG", &kubeconfig_env);
    ws.init();
    let out = ws.apply();
    if chart == Chart::Wrapper {
        // The wrapper's own default config stays, and the user is told so.
        assert!(
            out.text().contains("Chart defines more configs")
                && out.text().contains("\"time-sliced-10\""),
            "{}",
            out.text()
        );
    }
    let (pointer, read) = op.operator_reads(ns);
    assert_eq!(
        pointer,
        json!({"name": CM, "default": "all"}),
        "the chart points the operator at our ConfigMap"
    );
    assert_eq!(read, expect_keys(&["all", "time-sliced-8"]));
    assert!(
        op.configmap(ns, CM).unwrap()["time-sliced-8"]
            .as_str()
            .unwrap()
            .contains("replicas: 8")
    );
    // On a control plane the stand-in completes the chart's pre-upgrade hook; on serve the
    // twin's job controller does, before the stand-in sees it.
    assert!(
        op.hooks.completed() >= 1 || op.server.runs_controllers(),
        "the chart's pre-upgrade hook ran (and was completed)"
    );
    if let Some(o) = &other {
        assert_eq!(
            o.revision(chart),
            1,
            "the other cluster's release is untouched"
        );
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Rename: the old config leaves what the operator reads.
    ws.write(
        "main.tf",
        &config(
            &format!(
                "  config {{ name = \"all\" }}\n{}",
                time_sliced("time-sliced-4", 4)
            ),
            "all",
        ),
    );
    ws.apply();
    let (_, read) = op.operator_reads(ns);
    assert_eq!(read, expect_keys(&["all", "time-sliced-4"]));
    assert!(
        op.configmap(ns, CM).unwrap()["time-sliced-4"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Someone changes the device plugin values by hand: drift, which apply repairs.
    op.upgrade_by_hand(
        chart,
        &[&format!("{dp_values}.config.default=time-sliced-4")],
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand helm upgrade is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("default_config"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(op.operator_reads(ns).0["default"], "all");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Destroy gives the release its earlier values back, and the chart renders them again.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(op.values(chart), values_before);
    assert!(op.configmap(ns, CM).is_none());
    let (pointer, read) = op.operator_reads(ns);
    assert_eq!(
        pointer,
        json!({"name": "platform-config", "default": "all"})
    );
    assert_eq!(read, expect_keys(&["all"]));
    if let Some(o) = &other {
        assert_eq!(
            o.revision(chart),
            1,
            "the other cluster's release is untouched"
        );
    }
}

#[test]
fn helm4_delivery_lifecycle_nvidia_chart() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm4),
        Tool::Helm4,
        Chart::Nvidia,
        false,
    );
}

#[test]
fn helm4_delivery_lifecycle_wrapping_chart() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm4),
        Tool::Helm4,
        Chart::Wrapper,
        false,
    );
}

#[test]
fn helm3_delivery_lifecycle_nvidia_chart_with_kubeconfig_naming_another_cluster() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm3),
        Tool::Helm3,
        Chart::Nvidia,
        true,
    );
}

#[test]
fn helm3_delivery_lifecycle_wrapping_chart() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm3),
        Tool::Helm3,
        Chart::Wrapper,
        false,
    );
}
/// NVIDIA's current release (v26.7.0, whose chart validates the device plugin values it is
/// given) through the same life, by helm 4 and helm 3.
#[test]
fn helm4_delivery_lifecycle_nvidia_chart_v26() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm4),
        Tool::Helm4,
        Chart::NvidiaV26,
        false,
    );
}

#[test]
fn helm3_delivery_lifecycle_nvidia_chart_v26_with_kubeconfig_naming_another_cluster() {
    helm_lifecycle(
        OperatorCluster::start(Tool::Helm3),
        Tool::Helm3,
        Chart::NvidiaV26,
        true,
    );
}

/// On a cluster of `fracgpu-sandbox serve`, where a user tries the provider first: NVIDIA's
/// chart installed there by helm, then the provider's delivery through it.
#[test]
fn helm4_delivery_lifecycle_nvidia_chart_on_serve() {
    helm_lifecycle(
        OperatorCluster::on_serve(Tool::Helm4),
        Tool::Helm4,
        Chart::Nvidia,
        false,
    );
}
#[test]
fn helm3_delivery_lifecycle_nvidia_chart_on_serve() {
    helm_lifecycle(
        OperatorCluster::on_serve(Tool::Helm3),
        Tool::Helm3,
        Chart::Nvidia,
        false,
    );
}

/// Every way of naming the cluster reaches it with helm too, whatever `KUBECONFIG` (here:
/// another API server with the same release) says; a release without device plugin values of
/// its own gets the chart's defaults back on destroy.
#[test]
fn helm_reaches_the_named_cluster_by_context_token_and_exec() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let other = OperatorCluster::start(Tool::Helm4).expect("a second API server");
    let chart = Chart::Nvidia;
    let (_, ns, _) = chart.release();
    op.install(chart, &[]);
    other.install(chart, &[]);
    let ws = Workspace::new("").env("KUBECONFIG", &other.kc());
    ws.write("ca.pem", &op.server.ca_pem());
    let host = op.server.url.clone();
    let token = op.server.admin_token();

    // One kubeconfig holding both servers, whose current context is the other one.
    let both = ws.dir.join("both.kubeconfig");
    let ctx = |name: &str, o: &OperatorCluster| {
        json!({
            "cluster": {"name": name, "cluster": {"server": o.server.url,
                "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(o.server.ca_pem())}},
            "user": {"name": name, "user": {"token": o.server.admin_token()}},
            "context": {"name": name, "context": {"cluster": name, "user": name}},
        })
    };
    let (a, b) = (ctx("target", &op), ctx("other", &other));
    let kc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [b["cluster"], a["cluster"]],
        "users": [b["user"], a["user"]],
        "contexts": [b["context"], a["context"]],
        "current-context": "other",
    });
    std::fs::write(&both, kc.to_string()).unwrap();

    let plugin = ws.dir.join("get-token.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$TEST_TOKEN\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();

    let ways = [
        (
            "config_path + config_context",
            format!(
                "    config_path    = \"{}\"\n    config_context = \"target\"",
                both.display()
            ),
        ),
        (
            "host + token + CA",
            format!(
                "    host                   = \"{host}\"\n    token                  = \"{token}\"\n    cluster_ca_certificate = file(\"ca.pem\")"
            ),
        ),
        (
            "exec",
            format!(
                "    host                   = \"{host}\"\n    cluster_ca_certificate = file(\"ca.pem\")\n    exec {{\n      api_version = \"client.authentication.k8s.io/v1beta1\"\n      command     = \"{}\"\n      env         = {{ TEST_TOKEN = \"{token}\" }}\n    }}",
                plugin.display()
            ),
        ),
    ];
    let chart_path = op.chart(chart);
    let mut inited = false;
    for (way, access) in ways {
        let revision = op.revision(chart);
        ws.write(
            "main.tf",
            &helm_config(
                &access,
                &op.helm,
                &chart_path,
                chart.release(),
                &time_sliced("time-sliced-4", 4),
                "time-sliced-4",
            ),
        );
        if !inited {
            ws.init();
            inited = true;
        }
        ws.apply();
        assert_eq!(
            op.revision(chart),
            revision + 1,
            "{way}: the named cluster's release"
        );
        assert_eq!(
            other.revision(chart),
            1,
            "{way}: the other cluster's release is untouched"
        );
        assert_eq!(
            op.operator_reads(ns).0,
            json!({"name": CM, "default": "time-sliced-4"}),
            "{way}"
        );
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        assert_eq!(
            op.values(chart),
            json!({}),
            "{way}: the chart's defaults are back"
        );
        assert!(op.configmap(ns, CM).is_none(), "{way}");
    }
}

/// A release Secret as Helm stores one (gzip, then base64; the API adds its own layer),
/// encoded here independently of the provider's decoder: for the states helm leaves behind
/// when it is interrupted, which a test cannot make real helm produce on demand.
fn put_pending_revision(op: &OperatorCluster, chart: Chart, revision: u64) {
    let (release, ns, _) = chart.release();
    let doc = json!({
        "name": release, "namespace": ns, "version": revision,
        "info": {"status": "pending-upgrade"},
        "chart": {"metadata": {"name": "gpu-operator", "version": "v25.10.1"}, "values": {}},
        "config": {},
    });
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(doc.to_string().as_bytes()).unwrap();
    let data = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{release}.v{revision}"), "namespace": ns,
            "labels": {"name": release, "owner": "helm", "status": "pending-upgrade", "version": revision.to_string()}},
        "data": {"release": base64::engine::general_purpose::STANDARD.encode(data)},
    });
    op.server
        .kubectl_stdin(&["create", "-f", "-"], &secret.to_string());
}

/// What stops a Helm delivery is said plainly: helm missing, an operation in progress.
#[test]
fn helm_delivery_errors_name_the_cause() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (_, ns, _) = chart.release();
    op.install(chart, &[]);
    let access = format!("    config_path = \"{}\"", op.kc());
    let configs = time_sliced("time-sliced-4", 4);
    let chart_path = op.chart(chart);

    let ws = Workspace::new(&helm_config(
        &access,
        Path::new("/nonexistent/helm"),
        &chart_path,
        chart.release(),
        &configs,
        "time-sliced-4",
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(
        out.text().contains("helm.helm_path") && out.text().contains("Helm 3 or 4"),
        "{}",
        out.text()
    );
    assert_eq!(op.revision(chart), 1);

    put_pending_revision(&op, chart, 2);
    ws.write(
        "main.tf",
        &helm_config(
            &access,
            &op.helm,
            &chart_path,
            chart.release(),
            &configs,
            "time-sliced-4",
        ),
    );
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(out.text().contains("pending-upgrade"), "{}", out.text());
    assert!(op.configmap(ns, CM).is_none());
}

pub(crate) fn policy_config(kubeconfig: &str, ns: &str, mig_strategy: Option<&str>) -> String {
    let mig = mig_strategy
        .map(|m| format!("  mig_strategy   = \"{m}\"\n"))
        .unwrap_or_default();
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  namespace      = "{ns}"
  default_config = "all"
{mig}  kubernetes {{
    config_path = "{kubeconfig}"
  }}
  config {{ name = "all" }}
{ts}}}
"#,
        ts = time_sliced("time-sliced-4", 4)
    )
}

/// `cluster_policy` delivery on a ClusterPolicy that a Helm 4 release owns through server-side
/// apply: the pointer (which the chart does not render by default) is ours and survives the
/// operator's next `helm upgrade`; the MIG strategy (which the chart renders) is refused, since
/// taking it would make that upgrade fail; destroy leaves the chart's strategy as it was.
#[test]
fn cluster_policy_delivery_beside_a_helm4_release() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (_, ns, _) = chart.release();
    op.install(chart, &[]);
    assert_eq!(
        owners(&op.cluster_policy(), "/f:spec/f:mig/f:strategy"),
        [("helm".to_string(), "Apply".to_string())],
        "helm 4 installs with server-side apply"
    );
    let upgrade = || op.upgrade_by_hand(chart, &["migManager.enabled=false"]);

    let ws = Workspace::new(&policy_config(&op.kc(), ns, Some("mixed")))
        .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(
        out.text()
            .contains("ClusterPolicy field managed by server-side apply")
            && out.text().contains("mig_strategy")
            && out.text().contains("\"helm\""),
        "{}",
        out.text()
    );
    assert!(op.configmap(ns, CM).is_none(), "nothing written");
    upgrade();

    ws.write("main.tf", &policy_config(&op.kc(), ns, None));
    ws.apply();
    upgrade();
    let policy = op.cluster_policy();
    assert_eq!(
        policy["spec"]["devicePlugin"]["config"],
        json!({"name": CM, "default": "all"}),
        "our pointer survives the operator's upgrade"
    );
    assert_eq!(
        policy["spec"]["migManager"]["enabled"], false,
        "the upgrade happened"
    );
    assert_eq!(op.operator_reads(ns).1, ["all", "time-sliced-4"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let policy = op.cluster_policy();
    assert_eq!(policy["spec"]["mig"]["strategy"], "single");
    assert!(
        policy["spec"]["devicePlugin"].get("config").is_none(),
        "{policy}"
    );
    upgrade();
}

/// The same beside a Helm 3 release, whose manager patches and never conflicts: the strategy is
/// taken, survives the operator's next `helm upgrade`, and destroy gives it back to helm.
#[test]
fn cluster_policy_delivery_beside_a_helm3_release() {
    let Some(op) = OperatorCluster::start(Tool::Helm3) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (_, ns, _) = chart.release();
    op.install(chart, &[]);
    let strategy = "/f:spec/f:mig/f:strategy";
    assert_eq!(
        owners(&op.cluster_policy(), strategy),
        [("helm".to_string(), "Update".to_string())],
        "helm 3 installs with an update"
    );
    let ws = Workspace::new(&policy_config(&op.kc(), ns, Some("mixed")))
        .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    ws.apply();
    assert_eq!(op.cluster_policy()["spec"]["mig"]["strategy"], "mixed");
    op.upgrade_by_hand(chart, &["migManager.enabled=false"]);
    let policy = op.cluster_policy();
    assert_eq!(
        policy["spec"]["migManager"]["enabled"], false,
        "the upgrade happened"
    );
    assert_eq!(
        policy["spec"]["mig"]["strategy"], "mixed",
        "and left our strategy"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let policy = op.cluster_policy();
    assert_eq!(policy["spec"]["mig"]["strategy"], "single", "{policy}");
    assert_eq!(
        owners(&policy, strategy),
        [("helm".to_string(), "Update".to_string())],
        "helm holds it again"
    );
    assert!(
        policy["spec"]["devicePlugin"].get("config").is_none(),
        "{policy}"
    );
}

/// NVIDIA's v26.7 chart deploying the DRA-based stack (a GPUCluster, no ClusterPolicy): the
/// `helm` and `cluster_policy` deliveries stop before writing, with a diagnostic that names the
/// GPUCluster; the release keeps its revision and no ConfigMap is made.
#[test]
fn a_cluster_running_the_dra_stack_gets_the_diagnostic_and_nothing_is_written() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = Chart::NvidiaV26;
    op.install(
        chart,
        &[
            "clusterPolicy.deployCR=false".to_string(),
            "gpuCluster.deployCR=true".to_string(),
            "driver.nvidiaDriverCRD.enabled=true".to_string(),
        ],
    );
    let gpu_clusters = op
        .server
        .kubectl_ok(&["get", "gpuclusters.nvidia.com", "-o", "name"]);
    assert!(
        !gpu_clusters.trim().is_empty(),
        "the chart deployed a GPUCluster"
    );
    let (_, ns, _) = chart.release();
    let access = format!("    config_path = \"{}\"", op.kc());
    let configs = format!(
        "  config {{ name = \"all\" }}\n{}",
        time_sliced("time-sliced-4", 4)
    );
    let chart_path = op.chart(chart);
    for config in [
        helm_config(
            &access,
            &op.helm,
            &chart_path,
            chart.release(),
            &configs,
            "all",
        ),
        policy_config(&op.kc(), ns, None),
    ] {
        let ws = Workspace::new(&config).env("KUBECONFIG", MISSING_KUBECONFIG);
        ws.init();
        let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
        assert_ne!(out.code, 0);
        let text = out.text();
        assert!(
            text.contains("GPU operator runs the DRA-based stack")
                && text.contains(
                    gpu_clusters
                        .trim()
                        .trim_start_matches("gpucluster.nvidia.com/")
                ),
            "{text}"
        );
        assert_eq!(op.revision(chart), 1, "the release is untouched");
        assert!(op.configmap(ns, CM).is_none());
        assert!(op.configmap(ns, "time-slicing-config").is_none());
    }
}
