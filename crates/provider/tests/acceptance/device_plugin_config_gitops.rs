//! `fracgpu_device_plugin_config` with delivery "argocd" and "flux": the operator installed by an
//! Argo CD Application or a Flux HelmRelease, as clusters run it. Neither controller runs here:
//! the real CRDs (from `shared/fixtures`) on a control plane (`testkit::apiserver`) hold the objects, and real
//! `helm template` of NVIDIA's chart (on its own, and inside the wrapping chart) with the
//! object's values shows what a sync would render: the ConfigMap and the ClusterPolicy pointer.

use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::Tool;
use serde_json::{Value, json};

const CM: &str = "time-slicing-config";
const OPERATOR_NS: &str = "gpu-operator";

/// A control plane with the Argo CD and Flux CRDs and the fixtures' namespaces.
pub(crate) fn gitops_cluster() -> Option<OperatorCluster> {
    let op = OperatorCluster::start(Tool::Helm4)?;
    op.server.install_crds(
        &op.fixtures,
        &[
            "argoproj.io_applications.yaml",
            "helm.toolkit.fluxcd.io_helmreleases.yaml",
        ],
    );
    let ns = op.fixtures.join("samples/00-namespaces.yaml");
    op.server
        .kubectl_ok(&["apply", "--server-side", "-f", &ns.display().to_string()]);
    Some(op)
}

/// Which object holds the values, and where.
#[derive(Clone, Copy)]
enum Holder {
    Argo,
    Flux,
}

impl Holder {
    fn resource(self) -> &'static str {
        match self {
            Holder::Argo => "applications.argoproj.io",
            Holder::Flux => "helmreleases.helm.toolkit.fluxcd.io",
        }
    }

    fn namespace(self) -> &'static str {
        match self {
            Holder::Argo => "argocd",
            Holder::Flux => "flux-system",
        }
    }

    fn values_pointer(self) -> &'static str {
        match self {
            Holder::Argo => "/spec/source/helm/valuesObject",
            Holder::Flux => "/spec/values",
        }
    }

    fn sample(self) -> &'static str {
        match self {
            Holder::Argo => "samples/application.yaml",
            Holder::Flux => "samples/helmrelease.yaml",
        }
    }

    fn block(self, values_path: &str) -> String {
        match self {
            Holder::Argo => format!(
                "  argocd {{\n    application = \"gpu-operator\"\n    values_path = \"{values_path}\"\n  }}\n"
            ),
            Holder::Flux => format!(
                "  flux {{\n    helm_release = \"gpu-operator\"\n    values_path  = \"{values_path}\"\n  }}\n"
            ),
        }
    }

    fn delivery(self) -> &'static str {
        match self {
            Holder::Argo => "argocd",
            Holder::Flux => "flux",
        }
    }
}

fn object(op: &OperatorCluster, h: Holder) -> Value {
    let out = op.server.kubectl_ok(&[
        "get",
        h.resource(),
        "-n",
        h.namespace(),
        "gpu-operator",
        "-o",
        "json",
    ]);
    serde_json::from_str(&out).unwrap()
}

fn values(op: &OperatorCluster, h: Holder) -> Value {
    object(op, h)
        .pointer(h.values_pointer())
        .cloned()
        .unwrap_or(json!({}))
}

/// What a sync would render from the object's values: `helm template` of the chart, then the
/// ClusterPolicy's `devicePlugin.config` and the keys of the ConfigMap it names.
fn rendered(op: &OperatorCluster, chart: Chart, values: &Value) -> (Value, Vec<String>) {
    let file = op.server.dir().join("sync-values.json");
    std::fs::write(&file, values.to_string()).unwrap();
    let prefix = match chart {
        Chart::Nvidia | Chart::NvidiaV26 => "templates".to_string(),
        Chart::Wrapper => "charts/azure-aks-gpu-operator/templates".to_string(),
    };
    let chart_path = op.chart(chart);
    let file = file.display().to_string();
    let show = |template: &str| -> Option<Value> {
        let t = format!("{prefix}/{template}");
        let (ok, out, err) = op.helm_try(
            OPERATOR_NS,
            &[
                "template",
                "gpu-operator",
                &chart_path,
                "--values",
                &file,
                "--show-only",
                &t,
            ],
        );
        if !ok {
            // A template that renders nothing ("could not find template") is no object.
            assert!(err.contains("could not find template"), "{err}");
            return None;
        }
        Some(serde_saphyr::from_str(&out).expect("helm renders YAML"))
    };
    let policy = show("clusterpolicy.yaml").expect("the chart renders a ClusterPolicy");
    let pointer = policy["spec"]["devicePlugin"]["config"].clone();
    let keys = show("plugin_config.yaml")
        .filter(|cm| cm["metadata"]["name"] == pointer["name"])
        .and_then(|cm| cm["data"].as_object().cloned())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    (pointer, keys)
}

fn config(op: &OperatorCluster, h: Holder, values_path: &str, configs: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "{delivery}"
  default_config = "all"
  kubernetes {{
    config_path = "{kc}"
  }}
  config {{ name = "all" }}
{configs}{block}}}
"#,
        delivery = h.delivery(),
        kc = op.kc(),
        block = h.block(values_path),
    )
}

/// The resource as the state holds it, asserting its ConfigMap is where the object installs the
/// chart: the Application's or HelmRelease's destination.
fn at_destination(ws: &Workspace) -> Value {
    let st = ws.show_json();
    let res = st["values"]["root_module"]["resources"][0]["values"].clone();
    assert_eq!(res["namespace"], OPERATOR_NS, "the object's destination");
    assert_eq!(res["id"], format!("{OPERATOR_NS}/{CM}"));
    res
}

fn time_sliced(name: &str, replicas: u32) -> String {
    format!(
        "  config {{\n    name = \"{name}\"\n    time_slicing {{ replicas = {replicas} }}\n  }}\n"
    )
}

/// Create; only `values_path` changes and a sync would render our configs; empty plan; a
/// rename leaves only the new config in what a sync renders; a hand edit of the values is
/// drift that apply repairs; destroy gives the object back the values it had.
fn lifecycle(h: Holder, chart: Chart) {
    let Some(op) = gitops_cluster() else {
        return;
    };
    let (_, _, values_path) = chart.release();
    // The sample's own values, shaped for the chart: under the alias for the wrapper.
    let sample = op.fixtures.join(h.sample());
    op.server.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &sample.display().to_string(),
    ]);
    if chart == Chart::Wrapper {
        let (parent, key) = h.values_pointer().rsplit_once('/').unwrap();
        let patch = json!([{"op": "replace", "path": format!("{parent}/{key}"), "value": {
            "clusterType": {"azureAks": true},
            "azure-aks-gpu-operator": {"driver": {"enabled": false}},
        }}]);
        op.server.kubectl_ok(&[
            "patch",
            h.resource(),
            "-n",
            h.namespace(),
            "gpu-operator",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
    }
    let before = values(&op, h);
    // Configs the chart itself defines stay in what it renders.
    let expect = |ours: &[&str]| {
        let own: &[&str] = match chart {
            Chart::Nvidia | Chart::NvidiaV26 => &[],
            Chart::Wrapper => &["time-sliced-10"],
        };
        let mut k: Vec<String> = ours.iter().chain(own).map(|s| s.to_string()).collect();
        k.sort();
        k
    };

    let ws = Workspace::new(&config(
        &op,
        h,
        values_path,
        &time_sliced("time-sliced-8", 8),
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.apply();
    assert!(!out.text().contains("Warning"), "{}", out.text());
    let after = values(&op, h);
    // Everything but values_path is as it was.
    let mut others = after.clone();
    let mut others_before = before.clone();
    for v in [&mut others, &mut others_before] {
        let (parent, leaf) = values_path.rsplit_once('.').unwrap_or(("", values_path));
        let at = if parent.is_empty() {
            Some(v)
        } else {
            v.pointer_mut(&format!("/{}", parent.replace('.', "/")))
        };
        if let Some(m) = at.and_then(|x| x.as_object_mut()) {
            m.remove(leaf);
        }
    }
    assert_eq!(others, others_before, "only {values_path} changed");
    let (pointer, keys) = rendered(&op, chart, &after);
    assert_eq!(pointer, json!({"name": CM, "default": "all"}));
    assert_eq!(keys, expect(&["all", "time-sliced-8"]));
    at_destination(&ws);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Rename: only the new config renders.
    ws.write(
        "main.tf",
        &config(&op, h, values_path, &time_sliced("time-sliced-4", 4)),
    );
    ws.apply();
    assert_eq!(
        rendered(&op, chart, &values(&op, h)).1,
        expect(&["all", "time-sliced-4"])
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // A hand edit of the values is drift, and apply repairs it.
    let default_ptr = format!(
        "{}/{}/config/default",
        h.values_pointer(),
        values_path.replace('.', "/")
    );
    let patch = json!([{"op": "replace", "path": default_ptr, "value": "time-sliced-4"}]);
    op.server.kubectl_ok(&[
        "patch",
        h.resource(),
        "-n",
        h.namespace(),
        "gpu-operator",
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand edit is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("default_config"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(rendered(&op, chart, &values(&op, h)).0["default"], "all");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Destroy gives the values back.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(values(&op, h), before);
}

#[test]
fn argocd_delivery_lifecycle_nvidia_chart() {
    lifecycle(Holder::Argo, Chart::Nvidia);
}

#[test]
fn argocd_delivery_lifecycle_wrapping_chart() {
    lifecycle(Holder::Argo, Chart::Wrapper);
}

#[test]
fn flux_delivery_lifecycle_nvidia_chart() {
    lifecycle(Holder::Flux, Chart::Nvidia);
}

#[test]
fn flux_delivery_lifecycle_wrapping_chart() {
    lifecycle(Holder::Flux, Chart::Wrapper);
}

/// NVIDIA's current release renders the values the provider writes as v25.10.1 does.
#[test]
fn argocd_delivery_lifecycle_nvidia_chart_v26() {
    lifecycle(Holder::Argo, Chart::NvidiaV26);
}

#[test]
fn flux_delivery_lifecycle_nvidia_chart_v26() {
    lifecycle(Holder::Flux, Chart::NvidiaV26);
}

/// Import by the delivery's ID (`argocd:<namespace>/<application>/<configmap>`): the read after
/// the import learns the ConfigMap's namespace from the Application's destination, the plan asks
/// only for what the cluster does not keep (the resource's `kubernetes` block and the
/// `values_path` the configuration spells out), in place; after the apply it is empty.
#[test]
fn an_argocd_import_reads_the_destination_and_plans_in_place() {
    let Some(op) = gitops_cluster() else {
        return;
    };
    let sample = op.fixtures.join(Holder::Argo.sample());
    op.server.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &sample.display().to_string(),
    ]);
    let configs = time_sliced("time-sliced-8", 8);
    // An import has only its ID: it reaches the cluster the provider's way (KUBECONFIG here).
    let ws = Workspace::new(&config(&op, Holder::Argo, "devicePlugin", &configs))
        .env("KUBECONFIG", &op.kc());
    ws.init();
    ws.apply();
    let addr = "fracgpu_device_plugin_config.this";
    ws.ok(&["state", "rm", addr]);
    ws.ok(&[
        "import",
        "-no-color",
        addr,
        &format!("argocd:argocd/gpu-operator/{CM}"),
    ]);
    let res = at_destination(&ws);
    assert_eq!(res["delivery"], "argocd");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    plan.assert_sets_in_place(&["values_path", "config_path"]);
    let out = &plan.stdout;
    assert!(
        !out.contains("time-sliced-8"),
        "the configs read back as declared: {out}"
    );
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

/// An Application with several sources (a values repository beside the chart, as Argo CD's
/// multi-source docs show) needs `argocd.chart` to pick the operator's; one that a parent
/// Application tracks gets a warning that the parent's next sync undoes the change.
#[test]
fn argocd_multi_source_and_managed_applications() {
    let Some(op) = gitops_cluster() else {
        return;
    };
    let app = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "gpu-operator", "namespace": "argocd",
            "labels": {"app.kubernetes.io/instance": "platform-root"}},
        "spec": {
            "project": "default",
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "gpu-operator"},
            "sources": [
                {"repoURL": "https://git.example.com/platform/values.git", "targetRevision": "main", "ref": "values"},
                {"repoURL": "https://helm.ngc.nvidia.com/nvidia", "chart": "gpu-operator", "targetRevision": "v25.10.1",
                 "helm": {"valuesObject": {"driver": {"enabled": false}}}},
                {"repoURL": "https://charts.example.com", "chart": "dcgm-exporter", "targetRevision": "4.0.0",
                 "helm": {"values": "serviceMonitor:\n  enabled: true\n"}},
            ],
        },
    });
    op.server
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], &app.to_string());
    let ws = Workspace::new(&config(
        &op,
        Holder::Argo,
        "devicePlugin",
        &time_sliced("time-sliced-4", 4),
    ))
    .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(
        flat(&out.text()).contains("set argocd.chart"),
        "{}",
        out.text()
    );
    let with_chart = config(
        &op,
        Holder::Argo,
        "devicePlugin",
        &time_sliced("time-sliced-4", 4),
    )
    .replace(
        "    application = \"gpu-operator\"\n",
        "    application = \"gpu-operator\"\n    chart       = \"gpu-operator\"\n",
    );
    ws.write("main.tf", &with_chart);
    let out = ws.apply();
    let text = flat(&out.text());
    assert!(
        text.contains("Argo CD Application managed by a parent")
            && text.contains("\"platform-root\""),
        "{text}"
    );
    let written = object(&op, Holder::Argo);
    let sources = &written["spec"]["sources"];
    assert_eq!(
        sources[1]["helm"]["valuesObject"]["devicePlugin"]["config"]["default"],
        "all"
    );
    assert_eq!(
        sources[1]["helm"]["valuesObject"]["driver"]["enabled"],
        false
    );
    assert_eq!(
        sources[0], app["spec"]["sources"][0],
        "the other sources are left alone"
    );
    assert_eq!(sources[2], app["spec"]["sources"][2]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(
        object(&op, Holder::Argo)["spec"]["sources"],
        app["spec"]["sources"]
    );
}
