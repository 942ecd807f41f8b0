//! NVIDIA's real charts on the sandbox's Kubernetes API, driven by real helm 3 and 4: the GPU
//! operator v25.10.1 and v26.7.0 and the standalone device plugin v0.20.0
//! (`shared/fixtures/charts`) install on the clusters of `fracgpu-sandbox serve
//! --without-gpu-operator`, and on `fracgpu-sandbox apiserver` each goes through install (with
//! its CRDs, or with them applied beforehand and `--skip-crds`), upgrade, rollback and uninstall,
//! every object `helm template` renders being there after the install and gone after the
//! uninstall.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use testkit::apiserver::{self, ApiServer};
use testkit::tools::{self, Tool};

const BIN: &str = env!("CARGO_BIN_EXE_fracgpu-sandbox");

const OPERATOR_25: &str = "charts/gpu-operator-v25.10.1.tgz";
const OPERATOR_26: &str = "charts/gpu-operator-v26.7.0.tgz";
const DEVICE_PLUGIN: &str = "charts/nvidia-device-plugin-0.20.0.tgz";

/// A release's name and namespace, and a value (`path=value`) its upgrade sets.
struct Release {
    name: &'static str,
    ns: &'static str,
    set: &'static str,
}

const OPERATOR: Release = Release {
    name: "gpu-operator",
    ns: "gpu-operator",
    set: "daemonsets.priorityClassName=custom-priority",
};

const PLUGIN: Release = Release {
    name: "nvdp",
    ns: "nvidia-device-plugin",
    set: "config.default=x",
};

/// The tools and the cluster a chart's life runs with.
struct On<'a> {
    helm: &'a Path,
    kubectl: &'a Path,
    kubeconfig: &'a Path,
}

/// helm with a kubeconfig, `KUBECONFIG` pointing nowhere: (success, stdout, stderr).
fn helm(bin: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("fracgpu-helm-cache"),
        )
        .output()
        .expect("helm runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn helm_ok(bin: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, out, err) = helm(bin, kubeconfig, args);
    assert!(ok, "helm {}: {err}\n{out}", args.join(" "));
    out
}

/// What `helm template` renders for a release: (apiVersion, kind, namespace, name) of each
/// object, hooks left out (they come and go with each operation).
fn rendered(
    bin: &Path,
    kubeconfig: &Path,
    release: &str,
    chart: &str,
    ns: &str,
    sets: &[&str],
) -> Vec<(String, String, String, String)> {
    let mut args = vec!["template", release, chart, "--namespace", ns];
    for s in sets {
        args.extend(["--set", s]);
    }
    let text = helm_ok(bin, kubeconfig, &args);
    let mut out = Vec::new();
    for doc in text.split("\n---") {
        let Ok(v) = serde_saphyr::from_str::<Value>(doc) else {
            continue;
        };
        if v.is_null() || v["metadata"]["annotations"].get("helm.sh/hook").is_some() {
            continue;
        }
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        out.push((
            s("/apiVersion"),
            s("/kind"),
            s("/metadata/namespace"),
            s("/metadata/name"),
        ));
    }
    assert!(!out.is_empty(), "helm template {chart} rendered nothing");
    out
}

/// Whether kubectl finds the object (namespaced objects without a namespace in the chart live
/// in the release's).
fn exists(
    kubectl: &Path,
    kubeconfig: &Path,
    ns: &str,
    obj: &(String, String, String, String),
) -> bool {
    let (api_version, kind, obj_ns, name) = obj;
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
    let resource = if group.is_empty() {
        kind.clone()
    } else {
        format!("{kind}.{group}")
    };
    let ns = if obj_ns.is_empty() { ns } else { obj_ns };
    Command::new(kubectl)
        .args(["get", &resource, name, "-n", ns, "--kubeconfig"])
        .arg(kubeconfig)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `fracgpu-sandbox serve --without-gpu-operator` with one more EKS cluster, and the
/// kubeconfigs it writes: (process, cluster name -> kubeconfig).
fn serve_bare(dir: &Path) -> (std::process::Child, Vec<(String, PathBuf)>) {
    let clusters = dir.join("clusters.json");
    std::fs::write(
        &clusters,
        json!([{"cloud": "eks", "region": "us-east-1", "name": "second"}]).to_string(),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--port",
            "0",
            "--op-seconds",
            "0",
            "--without-gpu-operator",
            "--state",
        ])
        .arg(dir.join("state.json"))
        .arg("--clusters")
        .arg(&clusters)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the sandbox starts");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut configs = Vec::new();
    let mut lines = out.lines();
    for line in lines.by_ref() {
        let line = line.expect("a line");
        if let Some(rest) = line.trim().strip_prefix("cluster        : ") {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            configs.push((parts[1].to_string(), PathBuf::from(parts[3])));
            if configs.len() == 4 {
                break;
            }
        }
    }
    std::thread::spawn(move || for _ in lines {});
    assert_eq!(
        configs.len(),
        4,
        "the sandbox names four clusters' kubeconfigs"
    );
    (child, configs)
}

#[test]
fn helm_installs_nvidias_charts_on_the_clusters_of_serve() {
    let (Some(helm3), Some(helm4), Some(kubectl), Some(fixtures)) = (
        tools::require(Tool::Helm3),
        tools::require(Tool::Helm4),
        tools::require(Tool::Kubectl),
        apiserver::fixtures(),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut child, configs) = serve_bare(dir.path());
    // One GPU operator per cluster (its cluster-scoped objects have fixed names), with the
    // standalone device plugin beside it in a namespace of its own on two of them.
    let plan: Vec<(&PathBuf, &str, &Path, Option<&Path>)> = vec![
        (&configs[0].1, OPERATOR_25, &helm4, Some(&helm3)),
        (&configs[1].1, OPERATOR_26, &helm3, Some(&helm4)),
        (&configs[2].1, OPERATOR_25, &helm3, None),
        (&configs[3].1, OPERATOR_26, &helm4, None),
    ];
    // On a cluster of serve the twin's job controller completes the chart's upgrade hook: the
    // whole life of the chart there, before the installs that stay.
    let on = On {
        helm: &helm4,
        kubectl: &kubectl,
        kubeconfig: &configs[0].1,
    };
    let v25 = fixtures.join(OPERATOR_25).display().to_string();
    lifecycle_on(&on, &v25, &OPERATOR, false);
    for (kc, chart, h, plugin_helm) in plan {
        let chart = fixtures.join(chart).display().to_string();
        helm_ok(
            h,
            kc,
            &[
                "install",
                "gpu-operator",
                &chart,
                "-n",
                "gpu-operator",
                "--create-namespace",
            ],
        );
        for obj in rendered(h, kc, "gpu-operator", &chart, "gpu-operator", &[]) {
            assert!(
                exists(&kubectl, kc, "gpu-operator", &obj),
                "{chart}: {obj:?} missing after the install"
            );
        }
        if let Some(ph) = plugin_helm {
            let dp = fixtures.join(DEVICE_PLUGIN).display().to_string();
            helm_ok(
                ph,
                kc,
                &[
                    "install",
                    "nvdp",
                    &dp,
                    "-n",
                    "nvidia-device-plugin",
                    "--create-namespace",
                ],
            );
            for obj in rendered(ph, kc, "nvdp", &dp, "nvidia-device-plugin", &[]) {
                assert!(
                    exists(&kubectl, kc, "nvidia-device-plugin", &obj),
                    "{obj:?} missing"
                );
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// One chart's life on a fresh control plane with one helm: install (its CRDs by helm, or
/// applied beforehand with `--skip-crds`), upgrade with a value, rollback, uninstall.
fn lifecycle(helm_tool: Tool, chart: &str, release: &Release, skip_crds: bool) {
    let (Some(h), Some(kubectl), Some(fixtures)) = (
        tools::require(helm_tool),
        tools::require(Tool::Kubectl),
        apiserver::fixtures(),
    ) else {
        return;
    };
    let Some(server) = ApiServer::start() else {
        return;
    };
    let _hooks = server.complete_hook_jobs();
    let kc = server.kubeconfig();
    let chart_path = fixtures.join(chart).display().to_string();
    if skip_crds {
        // The chart's own CRDs, applied as a platform team applies them before installing.
        let unpacked = tempfile::tempdir().unwrap();
        let untar = Command::new("tar")
            .args(["-xzf", &chart_path, "-C"])
            .arg(unpacked.path())
            .status()
            .expect("tar runs");
        assert!(untar.success(), "tar -xzf {chart_path}");
        let crds: Vec<PathBuf> = walk(unpacked.path())
            .into_iter()
            .filter(|p| {
                p.parent().is_some_and(|d| d.ends_with("crds"))
                    && p.extension().is_some_and(|e| e == "yaml")
            })
            .collect();
        assert!(!crds.is_empty(), "{chart} carries CRDs");
        let mut args = vec!["apply".to_string(), "--server-side".into()];
        for c in &crds {
            args.extend(["-f".into(), c.display().to_string()]);
        }
        server.kubectl_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let on = On {
        helm: &h,
        kubectl: &kubectl,
        kubeconfig: &kc,
    };
    lifecycle_on(&on, &chart_path, release, skip_crds);
}

/// Install, upgrade with `set` (`path=value`), rollback to the first revision and uninstall, on
/// the cluster of `kc`; every object the chart renders is there after the install and gone after
/// the uninstall.
fn lifecycle_on(on: &On, chart_path: &str, release: &Release, skip_crds: bool) {
    let (h, kubectl, kc) = (on.helm, on.kubectl, on.kubeconfig);
    let (ns, set) = (release.ns, release.set);
    let release = release.name;
    let mut install = vec![
        "install",
        release,
        chart_path,
        "-n",
        ns,
        "--create-namespace",
    ];
    if skip_crds {
        install.push("--skip-crds");
    }
    helm_ok(h, kc, &install);
    let objects = rendered(h, kc, release, chart_path, ns, &[]);
    for obj in &objects {
        assert!(
            exists(kubectl, kc, ns, obj),
            "{chart_path}: {obj:?} missing after the install"
        );
    }
    helm_ok(
        h,
        kc,
        &[
            "upgrade",
            release,
            chart_path,
            "-n",
            ns,
            "--reuse-values",
            "--set",
            set,
        ],
    );
    let values = || -> Value {
        let a = ["get", "values", release, "-n", ns, "-o", "json"];
        serde_json::from_str(&helm_ok(h, kc, &a)).expect("JSON values")
    };
    let (key, value) = set.split_once('=').expect("path=value");
    let at = |v: &Value| v.pointer(&format!("/{}", key.replace('.', "/"))).cloned();
    assert_eq!(at(&values()), Some(json!(value)), "the upgrade's value");
    helm_ok(h, kc, &["rollback", release, "1", "-n", ns]);
    assert_eq!(at(&values()), None, "the rollback takes the value back");
    let status: Value = serde_json::from_str(&helm_ok(
        h,
        kc,
        &["status", release, "-n", ns, "-o", "json"],
    ))
    .unwrap();
    assert_eq!(
        (
            status["version"].as_u64(),
            status["info"]["status"].as_str()
        ),
        (Some(3), Some("deployed"))
    );
    helm_ok(h, kc, &["uninstall", release, "-n", ns, "--wait"]);
    for obj in objects.iter().filter(|o| o.1 != "CustomResourceDefinition") {
        assert!(
            !exists(kubectl, kc, ns, obj),
            "{chart_path}: {obj:?} left after the uninstall"
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn gpu_operator_v25_lifecycle_helm4() {
    lifecycle(Tool::Helm4, OPERATOR_25, &OPERATOR, false);
}

#[test]
fn gpu_operator_v25_lifecycle_helm3_crds_beforehand() {
    lifecycle(Tool::Helm3, OPERATOR_25, &OPERATOR, true);
}

#[test]
fn gpu_operator_v26_lifecycle_helm3() {
    lifecycle(Tool::Helm3, OPERATOR_26, &OPERATOR, false);
}

#[test]
fn gpu_operator_v26_lifecycle_helm4_crds_beforehand() {
    lifecycle(Tool::Helm4, OPERATOR_26, &OPERATOR, true);
}

#[test]
fn device_plugin_lifecycle_helm4() {
    lifecycle(Tool::Helm4, DEVICE_PLUGIN, &PLUGIN, false);
}

#[test]
fn device_plugin_lifecycle_helm3() {
    lifecycle(Tool::Helm3, DEVICE_PLUGIN, &PLUGIN, false);
}
