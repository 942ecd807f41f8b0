//! `fracgpu_device_plugin_config` with delivery "helm", and "cluster_policy" on a ClusterPolicy
//! that a Helm release owns, driven through the real terraform with real helm 3 and helm 4
//! (installed by `scripts/test-tools`) against the sandbox's Kubernetes API.
//!
//! The release is a wrapping chart shaped like tfy-gpu-operator (tests/fixtures/charts): the GPU
//! operator chart under an alias, with defaults of its own under `data`. `KUBECONFIG` names a
//! file that does not exist, or another cluster running the same release, for every terraform
//! run: helm must reach the cluster the resource names and nothing else.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::sandbox::{RunningStack, start_stack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::{self, Tool};
use ::sandbox::kube::PoolNodes;
use base64::Engine as _;
use serde_json::{Value, json};

const NS: &str = "gpu-operator";
const RELEASE: &str = "tfy-gpu-operator";
const ALIAS: &str = "azure-aks-gpu-operator";
const MISSING_KUBECONFIG: &str = "/nonexistent/kubeconfig";

fn chart() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/charts/tfy-gpu-operator")
        .display()
        .to_string()
}

/// One cluster of the sandbox as helm and kubectl see it.
struct HelmCluster {
    helm: PathBuf,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
}

fn run(program: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(program)
        .args(args)
        .env("KUBECONFIG", MISSING_KUBECONFIG)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl HelmCluster {
    fn new(st: &RunningStack, helm: &Path, kubectl: &Path, cloud: &str) -> HelmCluster {
        HelmCluster {
            helm: helm.to_path_buf(),
            kubectl: kubectl.to_path_buf(),
            kubeconfig: st.kubeconfig(cloud, &format!("sandbox-{cloud}")),
        }
    }

    fn kc(&self) -> String {
        self.kubeconfig.display().to_string()
    }

    /// helm with this cluster's kubeconfig and the release's namespace; must succeed.
    fn helm(&self, args: &[&str]) -> String {
        let kc = self.kc();
        let mut all = args.to_vec();
        all.extend(["--namespace", NS, "--kubeconfig", &kc]);
        let (ok, out, err) = run(&self.helm, &all);
        assert!(ok, "helm {}: {err}", args.join(" "));
        out
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let kc = self.kc();
        let mut all = vec!["--kubeconfig", &kc];
        all.extend(args);
        run(&self.kubectl, &all)
    }

    /// Installs the operator chart as its own release, the way a platform team does: the
    /// ClusterPolicy the sandbox seeds (as the operator chart would have made it) goes first,
    /// so that the release owns the one it renders.
    fn install(&self, set: &[&str]) {
        let (ok, _, err) =
            self.kubectl(&["delete", "clusterpolicies.nvidia.com", "cluster-policy"]);
        assert!(ok, "{err}");
        let chart = chart();
        let mut args = vec!["install", RELEASE, &chart];
        for s in set {
            args.extend(["--set-json", s]);
        }
        self.helm(&args);
    }

    /// `helm get values -o json`: the release's user values (helm prints null for none).
    fn values(&self) -> Value {
        let out = self.helm(&["get", "values", RELEASE, "-o", "json"]);
        match serde_json::from_str(&out).expect("helm prints JSON values") {
            Value::Null => json!({}),
            v => v,
        }
    }

    /// The deployed revision, from `helm status`.
    fn revision(&self) -> u64 {
        let out = self.helm(&["status", RELEASE, "-o", "json"]);
        let v: Value = serde_json::from_str(&out).expect("helm prints JSON status");
        v["version"].as_u64().expect("version")
    }

    /// The data of a ConfigMap in the operator's namespace, None when there is none.
    fn configmap(&self, name: &str) -> Option<serde_json::Map<String, Value>> {
        let (ok, out, _) = self.kubectl(&["get", "configmap", "-n", NS, name, "-o", "json"]);
        ok.then(|| {
            let v: Value = serde_json::from_str(&out).unwrap();
            v["data"].as_object().cloned().unwrap_or_default()
        })
    }

    fn cluster_policy(&self) -> Value {
        let (ok, out, err) = self.kubectl(&[
            "get",
            "clusterpolicies.nvidia.com",
            "cluster-policy",
            "-o",
            "json",
            "--show-managed-fields",
        ]);
        assert!(ok, "{err}");
        serde_json::from_str(&out).unwrap()
    }
}

fn keys(m: &serde_json::Map<String, Value>) -> Vec<&str> {
    m.keys().map(String::as_str).collect()
}

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

fn helm_config(kubernetes: &str, helm: &Path, configs: &str, default: &str) -> String {
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
    release     = "{RELEASE}"
    namespace   = "{NS}"
    chart       = "{chart}"
    values_path = "{ALIAS}.devicePlugin"
    helm_path   = "{helm}"
  }}
}}
"#,
        chart = chart(),
        helm = helm.display(),
    )
}

fn time_sliced(name: &str, replicas: u32) -> String {
    format!(
        "  config {{\n    name = \"{name}\"\n    time_slicing {{\n      replicas          = {replicas}\n      rename_by_default = true\n    }}\n  }}\n"
    )
}

/// A time-sliced pool's node on AKS, labelled for a config.
fn labelled_node(st: &RunningStack, config: &str) -> String {
    st.stack.kube.pool_changed(&PoolNodes {
        cloud: "aks",
        cluster: "sandbox-aks".into(),
        pool: "ts".into(),
        node_count: 1,
        zones: vec![],
        labels: [(
            "nvidia.com/device-plugin.config".to_string(),
            config.to_string(),
        )]
        .into(),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus_per_node: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: None,
    });
    st.stack.kube.pool_node_names("aks", "sandbox-aks", "ts")[0].clone()
}

fn shared_gpus(st: &RunningStack, node: &str) -> Option<Value> {
    st.stack
        .kube
        .object("aks", "sandbox-aks", "nodes", "", node)
        .and_then(|n| {
            n.pointer("/status/allocatable/nvidia.com~1gpu.shared")
                .cloned()
        })
}

/// Create; empty plan; rename a config; empty plan; a hand `helm upgrade --reuse-values --set`
/// is drift that apply repairs; destroy gives the release back the values it had before.
/// `other` is the cluster `KUBECONFIG` names during the run (another cluster with the same
/// release, which must never be upgraded), or None for a file that does not exist.
fn helm_lifecycle(helm_tool: Tool, other_cluster_in_kubeconfig: bool) {
    let (Some(helm), Some(kubectl)) = (tools::require(helm_tool), tools::require(Tool::Kubectl))
    else {
        return;
    };
    let st = start_stack(std::time::Duration::ZERO);
    let aks = HelmCluster::new(&st, &helm, &kubectl, "aks");
    let eks = HelmCluster::new(&st, &helm, &kubectl, "eks");
    // The platform team's own device plugin values, which destroy must give back.
    let before =
        json!({"create": true, "name": "platform-config", "default": "all", "data": {"all": ""}});
    aks.install(&[&format!("{ALIAS}.devicePlugin.config={before}")]);
    eks.install(&[]);
    let values_before = aks.values();
    let kubeconfig_env = if other_cluster_in_kubeconfig {
        eks.kc()
    } else {
        MISSING_KUBECONFIG.to_string()
    };
    let node = labelled_node(&st, "time-sliced-8");

    let access = format!("    config_path = \"{}\"", aks.kc());
    let config = |configs: &str, default: &str| helm_config(&access, &helm, configs, default);
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
    // The wrapper's own default config stays, and the user is told so.
    assert!(
        out.text().contains("Chart defines more configs")
            && out.text().contains("\"time-sliced-10\""),
        "{}",
        out.text()
    );
    let cm = aks
        .configmap("time-slicing-config")
        .expect("the chart rendered our ConfigMap");
    assert_eq!(keys(&cm), ["all", "time-sliced-10", "time-sliced-8"]);
    assert!(
        cm["time-sliced-8"]
            .as_str()
            .unwrap()
            .contains("replicas: 8")
    );
    assert_eq!(
        aks.cluster_policy()["spec"]["devicePlugin"]["config"],
        json!({"name": "time-slicing-config", "default": "all"}),
        "the chart points the operator at it"
    );
    assert_eq!(
        shared_gpus(&st, &node),
        Some(json!("8")),
        "the node advertises the shared GPU after the upgrade and the restart"
    );
    assert_eq!(
        eks.revision(),
        1,
        "the other cluster's release is untouched"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Rename: the old config leaves what the chart renders.
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
    let cm = aks.configmap("time-slicing-config").unwrap();
    assert_eq!(keys(&cm), ["all", "time-sliced-10", "time-sliced-4"]);
    assert!(
        cm["time-sliced-4"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Someone changes the device plugin values by hand: drift, which apply repairs.
    let chart = chart();
    aks.helm(&[
        "upgrade",
        RELEASE,
        &chart,
        "--reuse-values",
        "--set",
        &format!("{ALIAS}.devicePlugin.config.default=time-sliced-4"),
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand helm upgrade is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("default_config"), "{}", plan.stdout);
    ws.apply();
    assert_eq!(
        aks.values()[ALIAS]["devicePlugin"]["config"]["default"],
        "all"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Destroy gives the release its earlier values back, and the chart renders them again.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(aks.values(), values_before);
    assert!(aks.configmap("time-slicing-config").is_none());
    assert_eq!(
        keys(&aks.configmap("platform-config").unwrap()),
        ["all", "time-sliced-10"]
    );
    assert_eq!(
        eks.revision(),
        1,
        "the other cluster's release is untouched"
    );
}

#[test]
fn helm4_delivery_lifecycle() {
    helm_lifecycle(Tool::Helm4, false);
}

#[test]
fn helm3_delivery_lifecycle_with_kubeconfig_naming_another_cluster() {
    helm_lifecycle(Tool::Helm3, true);
}

/// Every way of naming the cluster reaches it with helm too, whatever `KUBECONFIG` (here:
/// another cluster with the same release) says; a release without device plugin values of its
/// own gets the chart's defaults back on destroy.
#[test]
fn helm_reaches_the_named_cluster_by_context_token_and_exec() {
    let (Some(helm), Some(kubectl)) = (tools::require(Tool::Helm4), tools::require(Tool::Kubectl))
    else {
        return;
    };
    let st = start_stack(std::time::Duration::ZERO);
    let aks = HelmCluster::new(&st, &helm, &kubectl, "aks");
    let eks = HelmCluster::new(&st, &helm, &kubectl, "eks");
    aks.install(&[]);
    eks.install(&[]);
    let ws = Workspace::new("").env("KUBECONFIG", &eks.kc());
    ws.write("ca.pem", &st.stack.kube.ca_pem());
    let host = format!("{}/k8s/aks/sandbox-aks", st.stack.kube_url());
    let token = st.stack.kube.token("aks", "sandbox-aks").unwrap();

    // One kubeconfig holding both clusters, whose current context is the other one.
    let both = ws.dir.join("both.kubeconfig");
    let aks_kc: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&aks.kubeconfig).unwrap()).unwrap();
    let mut eks_kc: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&eks.kubeconfig).unwrap()).unwrap();
    for list in ["clusters", "contexts", "users"] {
        let extra = aks_kc[list].as_array().unwrap().clone();
        eks_kc[list].as_array_mut().unwrap().extend(extra);
    }
    std::fs::write(&both, eks_kc.to_string()).unwrap();

    let plugin = ws.dir.join("get-token.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$SANDBOX_TOKEN\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();

    let ways = [
        (
            "config_path + config_context",
            format!(
                "    config_path    = \"{}\"\n    config_context = \"aks-sandbox-aks\"",
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
                "    host                   = \"{host}\"\n    cluster_ca_certificate = file(\"ca.pem\")\n    exec {{\n      api_version = \"client.authentication.k8s.io/v1beta1\"\n      command     = \"{}\"\n      env         = {{ SANDBOX_TOKEN = \"{token}\" }}\n    }}",
                plugin.display()
            ),
        ),
    ];
    let mut inited = false;
    for (way, access) in ways {
        let revision = aks.revision();
        ws.write(
            "main.tf",
            &helm_config(
                &access,
                &helm,
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
            aks.revision(),
            revision + 1,
            "{way}: the named cluster's release"
        );
        assert_eq!(
            eks.revision(),
            1,
            "{way}: the other cluster's release is untouched"
        );
        assert_eq!(
            aks.values()[ALIAS]["devicePlugin"]["config"]["default"],
            "time-sliced-4",
            "{way}"
        );
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        assert_eq!(
            aks.values(),
            json!({}),
            "{way}: the chart's defaults are back"
        );
        assert!(aks.configmap("time-slicing-config").is_none(), "{way}");
    }
}

/// A release Secret as Helm stores one (gzip, then base64; the API adds its own layer),
/// encoded here independently of the provider's decoder: for the states helm leaves behind
/// when it is interrupted, which a test cannot make real helm produce on demand.
fn put_pending_revision(st: &RunningStack, revision: u64) {
    let release = json!({
        "name": RELEASE, "namespace": NS, "version": revision,
        "info": {"status": "pending-upgrade"},
        "chart": {"metadata": {"name": RELEASE, "version": "0.1.20"}, "values": {}},
        "config": {},
    });
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes()).unwrap();
    let data = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{RELEASE}.v{revision}"), "namespace": NS,
            "labels": {"name": RELEASE, "owner": "helm", "status": "pending-upgrade", "version": revision.to_string()}},
        "data": {"release": base64::engine::general_purpose::STANDARD.encode(data)},
    });
    let file = st.kubeconfig_dir.path().join("pending.json");
    std::fs::write(&file, secret.to_string()).unwrap();
    let kubectl = tools::require(Tool::Kubectl).unwrap();
    let (ok, _, err) = run(
        &kubectl,
        &[
            "--kubeconfig",
            &st.kubeconfig("aks", "sandbox-aks").display().to_string(),
            "create",
            "-f",
            &file.display().to_string(),
        ],
    );
    assert!(ok, "{err}");
}

/// What stops a Helm delivery is said plainly: helm missing, an operation in progress.
#[test]
fn helm_delivery_errors_name_the_cause() {
    let (Some(helm), Some(kubectl)) = (tools::require(Tool::Helm4), tools::require(Tool::Kubectl))
    else {
        return;
    };
    let st = start_stack(std::time::Duration::ZERO);
    let aks = HelmCluster::new(&st, &helm, &kubectl, "aks");
    aks.install(&[]);
    let access = format!("    config_path = \"{}\"", aks.kc());
    let configs = time_sliced("time-sliced-4", 4);

    let ws = Workspace::new(&helm_config(
        &access,
        Path::new("/nonexistent/helm"),
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
    assert_eq!(aks.revision(), 1);

    put_pending_revision(&st, 2);
    ws.write(
        "main.tf",
        &helm_config(&access, &helm, &configs, "time-sliced-4"),
    );
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(out.text().contains("pending-upgrade"), "{}", out.text());
    assert!(aks.configmap("time-slicing-config").is_none());
}

fn policy_config(kubeconfig: &str, mig_strategy: Option<&str>) -> String {
    let mig = mig_strategy
        .map(|m| format!("  mig_strategy   = \"{m}\"\n"))
        .unwrap_or_default();
    format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
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
/// apply: the pointer (which the chart does not render) is ours and survives the operator's
/// next `helm upgrade`; the MIG strategy (which the chart renders) is refused, since taking it
/// would make that upgrade fail; destroy leaves the chart's strategy as it was.
#[test]
fn cluster_policy_delivery_beside_a_helm4_release() {
    let (Some(helm), Some(kubectl)) = (tools::require(Tool::Helm4), tools::require(Tool::Kubectl))
    else {
        return;
    };
    let st = start_stack(std::time::Duration::ZERO);
    let aks = HelmCluster::new(&st, &helm, &kubectl, "aks");
    aks.install(&[]);
    assert_eq!(
        owners(&aks.cluster_policy(), "/f:spec/f:mig/f:strategy"),
        [("helm".to_string(), "Apply".to_string())],
        "helm 4 installs with server-side apply"
    );
    let chart = chart();
    let upgrade = || {
        aks.helm(&[
            "upgrade",
            RELEASE,
            &chart,
            "--reuse-values",
            "--set",
            &format!("{ALIAS}.migManager.enabled=false"),
        ])
    };

    let ws = Workspace::new(&policy_config(&aks.kc(), Some("mixed")))
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
    assert!(
        aks.configmap("time-slicing-config").is_none(),
        "nothing written"
    );
    upgrade();

    ws.write("main.tf", &policy_config(&aks.kc(), None));
    ws.apply();
    upgrade();
    let policy = aks.cluster_policy();
    assert_eq!(
        policy["spec"]["devicePlugin"]["config"],
        json!({"name": "time-slicing-config", "default": "all"}),
        "our pointer survives the operator's upgrade"
    );
    assert_eq!(
        policy["spec"]["migManager"]["enabled"], false,
        "the upgrade happened"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let policy = aks.cluster_policy();
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
    let (Some(helm), Some(kubectl)) = (tools::require(Tool::Helm3), tools::require(Tool::Kubectl))
    else {
        return;
    };
    let st = start_stack(std::time::Duration::ZERO);
    let aks = HelmCluster::new(&st, &helm, &kubectl, "aks");
    aks.install(&[]);
    let strategy = "/f:spec/f:mig/f:strategy";
    assert_eq!(
        owners(&aks.cluster_policy(), strategy),
        [("helm".to_string(), "Update".to_string())],
        "helm 3 installs with an update"
    );
    let ws = Workspace::new(&policy_config(&aks.kc(), Some("mixed")))
        .env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    ws.apply();
    assert_eq!(aks.cluster_policy()["spec"]["mig"]["strategy"], "mixed");
    let chart = chart();
    aks.helm(&[
        "upgrade",
        RELEASE,
        &chart,
        "--reuse-values",
        "--set",
        &format!("{ALIAS}.migManager.enabled=false"),
    ]);
    let policy = aks.cluster_policy();
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
    let policy = aks.cluster_policy();
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
