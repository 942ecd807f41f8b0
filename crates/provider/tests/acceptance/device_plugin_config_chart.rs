//! What NVIDIA's real gpu-operator chart (v25.10.1, from `shared/fixtures`) needs of a Helm
//! delivery, on a control plane (`testkit::apiserver`) with real helm: names its ClusterPolicy template would not
//! keep strings are refused at plan time; a `values_path` under a subchart the release does not
//! render fails before anything is written, with the `clusterType` hint; helm stops at the
//! resource's timeout and a hook that never finishes is named; and drift is what the operator
//! reads (the ClusterPolicy pointer and the ConfigMap), not only the release's values.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::Tool;
use serde_json::json;

const CM: &str = "time-slicing-config";

fn config(
    kubeconfig: &str,
    helm: &Path,
    chart: &str,
    values_path: &str,
    (release, ns): (&str, &str),
    extra: &str,
) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "helm"
  default_config = "time-sliced-4"
  kubernetes {{
    config_path = "{kubeconfig}"
  }}
  config {{ name = "all" }}
  config {{
    name = "time-sliced-4"
    time_slicing {{ replicas = 4 }}
  }}
  helm {{
    release     = "{release}"
    namespace   = "{ns}"
    chart       = "{chart}"
    values_path = "{values_path}"
    helm_path   = "{helm}"
  }}
{extra}}}
"#,
        helm = helm.display(),
    )
}

/// The chart writes `devicePlugin.config.name` and `.default` into its ClusterPolicy unquoted:
/// on a real API server `default_config = "10"` got through the plan and failed inside helm
/// ("spec.devicePlugin.config.default in body must be of type string"). Now the plan refuses it
/// on the attribute, and the same names are fine where the provider writes the pointer itself.
#[test]
fn names_the_chart_would_not_keep_strings_are_refused_at_plan() {
    let resource = |delivery: &str, name: &str, default: &str| {
        let helm = if delivery == "helm" {
            "  helm {\n    release   = \"gpu-operator\"\n    namespace = \"gpu-operator\"\n    chart     = \"nvidia/gpu-operator\"\n  }\n"
        } else {
            ""
        };
        format!(
            "{REQUIRED_PROVIDERS}\nresource \"fracgpu_device_plugin_config\" \"this\" {{\n  delivery       = \"{delivery}\"\n  name           = \"{name}\"\n  default_config = \"{default}\"\n  kubernetes {{ config_path = \"{MISSING_KUBECONFIG}\" }}\n  config {{ name = \"{default}\" }}\n{helm}}}\n"
        )
    };
    let ws = Workspace::new(&resource("helm", "time-slicing-config", "10"));
    ws.init();
    for (name, default, attr, kind) in [
        ("time-slicing-config", "10", "default_config", "an integer"),
        ("time-slicing-config", "on", "default_config", "a boolean"),
        (
            "time-slicing-config",
            "0x1F",
            "default_config",
            "an integer",
        ),
        ("time-slicing-config", "null", "default_config", "null"),
        ("123", "all", "name", "an integer"),
    ] {
        ws.write("main.tf", &resource("helm", name, default));
        let out = ws.run(&["validate", "-no-color"]);
        assert_ne!(out.code, 0, "{name}/{default}: {}", out.text());
        let text = flat(&out.text());
        assert!(
            text.contains("Name the chart would not keep a string")
                && text.contains(&format!("{attr} is"))
                && text.contains(kind)
                && text.contains("delivery = \"cluster_policy\""),
            "{name}/{default}: {text}"
        );
        ws.write("main.tf", &resource("cluster_policy", name, default));
        let out = ws.run(&["validate", "-no-color"]);
        assert_eq!(
            out.code,
            0,
            "cluster_policy keeps {name}/{default}: {}",
            out.text()
        );
    }
}

/// With the wrapping chart rendering only `azure-aks-gpu-operator`, a `values_path` under
/// `aws-eks-gpu-operator` would upgrade without error and render nothing: the apply fails
/// before helm runs, names the condition, and leaves the release and the state untouched.
#[test]
fn a_values_path_under_a_disabled_subchart_fails_with_the_cluster_type_hint() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = Chart::Wrapper;
    let (release, ns, _) = chart.release();
    op.install(chart, &[]);
    let ws = Workspace::new(&config(
        &op.kc(),
        &op.helm,
        &op.chart(chart),
        "aws-eks-gpu-operator.devicePlugin",
        (release, ns),
        "",
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    let text = flat(&out.text());
    assert!(
        text.contains("Values path names a disabled subchart")
            && text.contains("clusterType.awsEks")
            && text.contains("\"azure-aks-gpu-operator\"")
            && text.contains("values_path"),
        "{text}"
    );
    assert_eq!(op.revision(chart), 1, "helm did not run");
    assert!(ws.show_json()["values"].is_null(), "nothing in state");
    // With the path the cluster renders, the same configuration applies.
    ws.write(
        "main.tf",
        &config(
            &op.kc(),
            &op.helm,
            &op.chart(chart),
            "azure-aks-gpu-operator.devicePlugin",
            (release, ns),
            "",
        ),
    );
    ws.apply();
    assert_eq!(
        op.operator_reads(ns).1,
        ["all", "time-sliced-10", "time-sliced-4"]
    );
}

/// No kubelet runs the chart's pre-upgrade hook Job: with the stand-in paused, helm waits, but
/// only as long as the resource's `timeouts` allow (helm's own default is 5 minutes), and the
/// diagnostic names the Job. Once hooks complete again, the next apply converges.
fn a_hook_that_never_finishes(helm: Tool) {
    let Some(op) = OperatorCluster::start(helm) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (release, ns, values_path) = chart.release();
    op.install(chart, &[]);
    let tf = |timeouts: &str| {
        config(
            &op.kc(),
            &op.helm,
            &op.chart(chart),
            values_path,
            (release, ns),
            timeouts,
        )
    };
    let ws = Workspace::new(&tf("  timeouts {\n    create = \"25s\"\n  }\n"))
        .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    op.hooks.pause(true);
    let started = Instant::now();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    let took = started.elapsed();
    op.hooks.pause(false);
    assert_ne!(out.code, 0);
    let text = flat(&out.text());
    assert!(
        text.contains("Helm hook did not finish")
            && text.contains(&format!("Job {ns}/gpu-operator-upgrade-crd"))
            && text.contains("timeouts"),
        "{text}"
    );
    assert!(
        took < Duration::from_secs(120),
        "bounded by the resource's timeouts, not helm's 5 minutes: {took:?}"
    );
    assert_eq!(
        op.status(chart),
        (2, "failed".to_string()),
        "helm gave up on the upgrade"
    );
    assert_eq!(
        op.operator_reads(ns).0,
        serde_json::Value::Null,
        "nothing of ours reached the operator"
    );
    assert!(ws.show_json()["values"].is_null(), "nothing in state");
    ws.write("main.tf", &tf(""));
    ws.apply();
    assert_eq!(
        op.operator_reads(ns),
        (
            json!({"name": CM, "default": "time-sliced-4"}),
            vec!["all".to_string(), "time-sliced-4".to_string()]
        )
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

#[test]
fn a_hook_that_never_finishes_is_named_helm4() {
    a_hook_that_never_finishes(Tool::Helm4);
}

#[test]
fn a_hook_that_never_finishes_is_named_helm3() {
    a_hook_that_never_finishes(Tool::Helm3);
}

/// Drift is what the operator reads: a hand edit of the ConfigMap helm rendered, or of the
/// ClusterPolicy's pointer, shows in `plan -detailed-exitcode` although the release's values
/// did not change, and apply puts it back.
fn hand_edits_of_what_the_operator_reads(helm: Tool) {
    let Some(op) = OperatorCluster::start(helm) else {
        return;
    };
    let chart = Chart::Nvidia;
    let (release, ns, values_path) = chart.release();
    op.install(chart, &[]);
    let ws = Workspace::new(&config(
        &op.kc(),
        &op.helm,
        &op.chart(chart),
        values_path,
        (release, ns),
        "",
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    ws.apply();
    let values = op.values(chart);

    let edited = op.configmap(ns, CM).unwrap()["time-sliced-4"]
        .as_str()
        .unwrap()
        .replace("replicas: 4", "replicas: 7");
    let patch = json!({"data": {"time-sliced-4": edited}}).to_string();
    op.server.kubectl_ok(&[
        "patch",
        "configmap",
        "-n",
        ns,
        CM,
        "--type=merge",
        "-p",
        &patch,
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        2,
        "a hand-edited ConfigMap is drift:\n{}",
        plan.text()
    );
    assert_eq!(
        op.values(chart),
        values,
        "the release's values did not change"
    );
    ws.apply();
    assert!(
        op.configmap(ns, CM).unwrap()["time-sliced-4"]
            .as_str()
            .unwrap()
            .contains("replicas: 4"),
        "apply repaired the ConfigMap"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    let patch = json!({"spec": {"devicePlugin": {"config": {"default": "all"}}}}).to_string();
    op.server.kubectl_ok(&[
        "patch",
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        "--type=merge",
        "-p",
        &patch,
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand-edited pointer is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("default_config"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(op.operator_reads(ns).0["default"], "time-sliced-4");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

#[test]
fn hand_edits_of_what_the_operator_reads_are_drift_helm4() {
    hand_edits_of_what_the_operator_reads(Tool::Helm4);
}

#[test]
fn hand_edits_of_what_the_operator_reads_are_drift_helm3() {
    hand_edits_of_what_the_operator_reads(Tool::Helm3);
}
