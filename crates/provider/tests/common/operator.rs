//! NVIDIA's GPU operator on a test's control plane (`testkit::apiserver`: a real kube-apiserver
//! where `KUBEBUILDER_ASSETS` names one, else `fracgpu-sandbox apiserver`), installed by real helm
//! the way a platform team runs it: NVIDIA's packaged chart v25.10.1 or v26.7.0 from
//! `shared/fixtures` on its own, or v25.10.1 inside this project's wrapping chart
//! (`tests/fixtures/charts/gpu-operator-wrapper`) under one alias per kind of cluster. Every helm and kubectl here runs with `KUBECONFIG`
//! pointing at a file that does not exist, so only the kubeconfig a command is given counts.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use testkit::apiserver::{self, ApiServer, HookJobs};

use super::tools::{self, Tool};

pub const MISSING_KUBECONFIG: &str = "/nonexistent/kubeconfig";
/// NVIDIA's current gpu-operator release, beside testkit's v25.10.1.
pub const GPU_OPERATOR_V26_CHART: &str = "charts/gpu-operator-v26.7.0.tgz";

/// Which chart a release is installed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Chart {
    /// NVIDIA's gpu-operator chart v25.10.1 as packaged (values under `devicePlugin`).
    Nvidia,
    /// NVIDIA's gpu-operator chart v26.7.0 as packaged: the same values, its own validations
    /// (`templates/validations.yaml`) and the GPUCluster it may deploy instead.
    NvidiaV26,
    /// The wrapping chart: NVIDIA's chart under `azure-aks-gpu-operator` and three other
    /// aliases, each enabled by `clusterType.<kind>`.
    Wrapper,
}

impl Chart {
    /// The release, its namespace and the `values_path` of the device plugin values, as a
    /// platform would name them.
    pub fn release(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Chart::Nvidia | Chart::NvidiaV26 => ("gpu-operator", "gpu-operator", "devicePlugin"),
            Chart::Wrapper => (
                "tfy-gpu-operator",
                "tfy-gpu-operator",
                "azure-aks-gpu-operator.devicePlugin",
            ),
        }
    }

    /// The `--set-json` values that make the chart render the operator at all.
    pub fn enabling(self) -> Vec<String> {
        match self {
            Chart::Nvidia | Chart::NvidiaV26 => vec![],
            Chart::Wrapper => vec!["clusterType.azureAks=true".to_string()],
        }
    }
}

/// A control plane with the tools to install the operator on it; the hook Job stand-in runs
/// for as long as this lives.
pub struct OperatorCluster {
    pub server: ApiServer,
    pub hooks: HookJobs,
    pub helm: PathBuf,
    pub kubectl: PathBuf,
    pub fixtures: PathBuf,
    /// The wrapping chart with NVIDIA's package in its charts/.
    wrapper: tempfile::TempDir,
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

impl OperatorCluster {
    /// None when a tool or the fixtures are missing outside CI (after saying so).
    pub fn start(helm: Tool) -> Option<OperatorCluster> {
        OperatorCluster::with(helm, ApiServer::start)
    }

    /// On a cluster of `fracgpu-sandbox serve --without-gpu-operator`, whose twin completes
    /// the chart's hook Jobs itself (the stand-in finds none left to complete).
    pub fn on_serve(helm: Tool) -> Option<OperatorCluster> {
        OperatorCluster::with(helm, || Some(ApiServer::start_serve()))
    }

    fn with(helm: Tool, server: impl FnOnce() -> Option<ApiServer>) -> Option<OperatorCluster> {
        let helm = tools::require(helm)?;
        let kubectl = tools::require(Tool::Kubectl)?;
        let fixtures = apiserver::fixtures()?;
        let server = server()?;
        let hooks = server.complete_hook_jobs();
        let wrapper = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/charts/gpu-operator-wrapper");
        for f in ["Chart.yaml", "values.yaml"] {
            std::fs::copy(src.join(f), wrapper.path().join(f)).unwrap();
        }
        std::fs::create_dir(wrapper.path().join("charts")).unwrap();
        let package = fixtures.join(apiserver::GPU_OPERATOR_CHART);
        std::fs::copy(
            &package,
            wrapper
                .path()
                .join("charts")
                .join(package.file_name().unwrap()),
        )
        .unwrap();
        Some(OperatorCluster {
            server,
            hooks,
            helm,
            kubectl,
            fixtures,
            wrapper,
        })
    }

    /// What `helm install` and `helm upgrade` are given for the chart.
    pub fn chart(&self, chart: Chart) -> String {
        match chart {
            Chart::Nvidia => self.fixtures.join(apiserver::GPU_OPERATOR_CHART),
            Chart::NvidiaV26 => self.fixtures.join(GPU_OPERATOR_V26_CHART),
            Chart::Wrapper => self.wrapper.path().to_path_buf(),
        }
        .display()
        .to_string()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.server.kubeconfig()
    }

    pub fn kc(&self) -> String {
        self.kubeconfig().display().to_string()
    }

    /// helm against this server in namespace `ns`: (success, stdout, stderr).
    pub fn helm_try(&self, ns: &str, args: &[&str]) -> (bool, String, String) {
        let kc = self.kc();
        let mut all = args.to_vec();
        all.extend(["--namespace", ns, "--kubeconfig", &kc]);
        run(&self.helm, &all)
    }

    /// helm that must succeed; its stdout.
    pub fn helm(&self, ns: &str, args: &[&str]) -> String {
        let (ok, out, err) = self.helm_try(ns, args);
        assert!(ok, "helm {}: {err}", args.join(" "));
        out
    }

    /// `helm install` of the chart as its usual release, with the values that enable it and
    /// `set_json` (`path=json` pairs), creating the namespace.
    pub fn install(&self, chart: Chart, set_json: &[String]) {
        let (release, ns, _) = chart.release();
        let path = self.chart(chart);
        let mut args = vec!["install", release, &path, "--create-namespace"];
        let sets: Vec<String> = chart
            .enabling()
            .into_iter()
            .chain(set_json.iter().cloned())
            .collect();
        for s in &sets {
            args.extend(["--set-json", s]);
        }
        self.helm(ns, &args);
    }

    /// `helm upgrade --reuse-values` of the chart's release with `--set` pairs, as someone
    /// changing it by hand does.
    pub fn upgrade_by_hand(&self, chart: Chart, set: &[&str]) {
        let (release, ns, _) = chart.release();
        let path = self.chart(chart);
        let mut args = vec!["upgrade", release, &path, "--reuse-values"];
        for s in set {
            args.extend(["--set", s]);
        }
        self.helm(ns, &args);
    }

    /// `helm get values -o json`: the release's user values (helm prints null for none).
    pub fn values(&self, chart: Chart) -> Value {
        let (release, ns, _) = chart.release();
        let out = self.helm(ns, &["get", "values", release, "-o", "json"]);
        match serde_json::from_str(&out).expect("helm prints JSON values") {
            Value::Null => json!({}),
            v => v,
        }
    }

    /// The release's latest revision, from `helm status`.
    pub fn revision(&self, chart: Chart) -> u64 {
        self.status(chart).0
    }

    /// The latest revision and its status (`deployed`, `failed`, ...).
    pub fn status(&self, chart: Chart) -> (u64, String) {
        let (release, ns, _) = chart.release();
        let out = self.helm(ns, &["status", release, "-o", "json"]);
        let v: Value = serde_json::from_str(&out).expect("helm prints JSON status");
        (
            v["version"].as_u64().expect("version"),
            v["info"]["status"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// The data of a ConfigMap, None when there is none.
    pub fn configmap(&self, ns: &str, name: &str) -> Option<serde_json::Map<String, Value>> {
        let out = self
            .server
            .kubectl(&["get", "configmap", "-n", ns, name, "-o", "json"]);
        out.status.success().then(|| {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            v["data"].as_object().cloned().unwrap_or_default()
        })
    }

    /// The ClusterPolicy `cluster-policy` with its managed fields.
    pub fn cluster_policy(&self) -> Value {
        let out = self.server.kubectl_ok(&[
            "get",
            "clusterpolicies.nvidia.com",
            "cluster-policy",
            "-o",
            "json",
            "--show-managed-fields",
        ]);
        serde_json::from_str(&out).unwrap()
    }

    /// What the operator reads: the ClusterPolicy's `devicePlugin.config` pointer, and the keys
    /// of the ConfigMap it names in `ns` (the operator's namespace).
    pub fn operator_reads(&self, ns: &str) -> (Value, Vec<String>) {
        let pointer = self.cluster_policy()["spec"]["devicePlugin"]["config"].clone();
        let keys = pointer["name"]
            .as_str()
            .and_then(|name| self.configmap(ns, name))
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        (pointer, keys)
    }
}
