//! `fracgpu_device_plugin_config` with delivery "helm": the deployed release is read from
//! Helm-format release Secrets in the sandbox (encoded here the way Helm 3 writes them,
//! independently of the provider's decoder) and compared with the configuration; apply runs
//! `helm upgrade --reuse-values`. Most tests use a recording stand-in for helm (named so);
//! one runs the real helm binary and is skipped when helm is not on the PATH.

mod common;

use std::io::Write as _;
use std::process::Command;

use base64::Engine as _;
use common::sandbox::{RunningStack, start_stack};
use common::terraform::{REQUIRED_PROVIDERS, Workspace};
use fracgpu::sandbox::kube::PoolNodes;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const NS: &str = "gpu-operator";
const RELEASE: &str = "tfy-gpu-operator";
const ALIAS: &str = "azure-aks-gpu-operator";

fn ts(replicas: u32) -> String {
    format!(
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: {replicas}\n"
    )
}

/// A release document as Helm 3 stores it, with the user-supplied values in `config`.
fn release_json(revision: u64, status: &str, config: Value) -> Value {
    json!({
        "name": RELEASE, "namespace": NS, "version": revision,
        "info": {"status": status, "first_deployed": "2026-01-01T00:00:00Z", "last_deployed": "2026-01-01T00:00:00Z", "description": "Upgrade complete"},
        "chart": {
            "metadata": {"apiVersion": "v2", "name": "tfy-gpu-operator", "version": "0.1.20", "appVersion": "v26.7.0"},
            "values": {ALIAS: {"devicePlugin": {"config": {"create": false, "name": "", "default": "", "data": {}}}, "mig": {"strategy": "mixed"}}},
            "templates": [],
        },
        "config": config,
        "manifest": "---\n",
    })
}

/// Helm's storage encoding: gzip (magic 1f 8b 08), then base64; the Secret's data field then
/// gets the API's own base64 layer from the client.
fn helm_encode(release: &Value) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes()).unwrap();
    let zipped = gz.finish().unwrap();
    assert_eq!(&zipped[..3], &[0x1f, 0x8b, 0x08]);
    base64::engine::general_purpose::STANDARD
        .encode(zipped)
        .into_bytes()
}

fn values(data: Value, default: &str) -> Value {
    json!({ALIAS: {"devicePlugin": {"config": {"create": true, "name": "time-slicing-config", "default": default, "data": data}}}})
}

/// Stores one revision as Helm does: Secret sh.helm.release.v1.<release>.v<N>.
fn put_revision(st: &RunningStack, revision: u64, status: &str, config: Value) {
    let kc = st.kubeconfig("aks", "sandbox-aks");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&kc).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        let api: Api<Secret> = Api::namespaced(client, NS);
        let name = format!("sh.helm.release.v1.{RELEASE}.v{revision}");
        let secret = Secret {
            metadata: kube::core::ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    [
                        ("name", RELEASE.to_string()),
                        ("owner", "helm".to_string()),
                        ("status", status.to_string()),
                        ("version", revision.to_string()),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                ),
                ..Default::default()
            },
            type_: Some("helm.sh/release.v1".into()),
            data: Some(
                [(
                    "release".to_string(),
                    ByteString(helm_encode(&release_json(revision, status, config))),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let _ = api.delete(&name, &Default::default()).await;
        api.create(&PostParams::default(), &secret).await.unwrap();
    });
}

fn config(kubeconfig: &str, helm_path: &str, replicas: u32) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  kubernetes {{ config_path = "{kubeconfig}" }}
}}

resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "helm"
  default_config = "all"
  config {{ name = "all" }}
  config {{
    name = "time-sliced-10"
    time_slicing {{
      replicas          = {replicas}
      rename_by_default = true
    }}
  }}
  helm {{
    release     = "{RELEASE}"
    namespace   = "{NS}"
    chart       = "truefoundry/tfy-gpu-operator"
    values_path = "{ALIAS}.devicePlugin"
    helm_path   = "{helm_path}"
  }}
}}

output "dpc" {{ value = fracgpu_device_plugin_config.this }}
"#
    )
}

/// A stand-in for helm that records its arguments and the values file it was given.
struct RecordingHelm {
    dir: tempfile::TempDir,
}

impl RecordingHelm {
    fn new() -> RecordingHelm {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("helm");
        let d = dir.path().display();
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > {d}/args\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = --values ]; then cp \"$2\" {d}/values; fi\n  shift\ndone\nif [ -x {d}/hook ]; then {d}/hook && rm {d}/hook; fi\necho 'Release \"tfy-gpu-operator\" has been upgraded.'\n"
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        RecordingHelm { dir }
    }
    /// A script the stand-in runs once, as its next upgrade: what the chart would change.
    fn hook(&self, script: &str) {
        let path = self.dir.path().join("hook");
        std::fs::write(&path, format!("#!/bin/sh\nset -e\n{script}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    fn path(&self) -> String {
        self.dir.path().join("helm").display().to_string()
    }
    /// The last invocation's arguments and values; None when helm was not run.
    fn take(&self) -> Option<(Vec<String>, Value)> {
        let args = std::fs::read_to_string(self.dir.path().join("args")).ok()?;
        let values = std::fs::read_to_string(self.dir.path().join("values")).unwrap();
        std::fs::remove_file(self.dir.path().join("args")).unwrap();
        Some((
            args.lines().map(str::to_string).collect(),
            serde_json::from_str(&values).expect("values file is JSON (valid YAML)"),
        ))
    }
}

#[test]
fn helm_delivery_with_recording_helm_stand_in() {
    let st = start_stack(std::time::Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let helm = RecordingHelm::new();
    // History: v1 superseded, v2 deployed (what counts), v3 failed.
    put_revision(&st, 1, "superseded", values(json!({"all": ""}), "all"));
    put_revision(
        &st,
        2,
        "deployed",
        values(json!({"all": "", "time-sliced-10": ts(10)}), "all"),
    );
    put_revision(&st, 3, "failed", values(json!({"x": ""}), "x"));

    // A time-sliced pool's node, labelled for the config.
    st.stack.kube.pool_changed(&PoolNodes {
        cloud: "aks",
        cluster: "sandbox-aks".into(),
        pool: "ts10".into(),
        node_count: 1,
        labels: [(
            "nvidia.com/device-plugin.config".to_string(),
            "time-sliced-10".to_string(),
        )]
        .into(),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus_per_node: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
    });
    // What the operator chart does on this upgrade: render the ConfigMap and point the
    // ClusterPolicy at it. The provider's restart must come after it.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "time-slicing-config", "namespace": NS},
        "data": {"all": "", "time-sliced-10": ts(10)}});
    let cm_file = st.kubeconfig_dir.path().join("chart-configmap.json");
    std::fs::write(&cm_file, cm.to_string()).unwrap();
    helm.hook(&format!(
        "kubectl --kubeconfig {kc} apply -f {}\nkubectl --kubeconfig {kc} patch clusterpolicies.nvidia.com cluster-policy --type merge -p '{{\"spec\":{{\"devicePlugin\":{{\"config\":{{\"name\":\"time-slicing-config\",\"default\":\"all\"}}}}}}}}'\n",
        cm_file.display()
    ));

    let ws = Workspace::new(&config(&kc, &helm.path(), 10));
    ws.init();
    ws.apply();
    let (args, vals) = helm.take().expect("helm upgrade ran");
    let node = st.stack.kube.pool_node_names("aks", "sandbox-aks", "ts10")[0].clone();
    let node = st
        .stack
        .kube
        .object("aks", "sandbox-aks", "nodes", "", &node)
        .unwrap();
    assert_eq!(
        node.pointer("/status/allocatable/nvidia.com~1gpu.shared"),
        Some(&json!("10")),
        "the twin advertises the shared GPU after upgrade + restart: {}",
        node["status"]
    );
    assert_eq!(
        &args[..5],
        [
            "upgrade",
            RELEASE,
            "truefoundry/tfy-gpu-operator",
            "--namespace",
            NS
        ]
    );
    assert!(args.contains(&"--reuse-values".to_string()), "{args:?}");
    let at = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .map(|i| args[i + 1].clone())
    };
    assert_eq!(
        at("--version").as_deref(),
        Some("0.1.20"),
        "the deployed chart version"
    );
    assert_eq!(at("--kubeconfig").as_deref(), Some(kc.as_str()));
    let cfg = &vals[ALIAS]["devicePlugin"]["config"];
    assert_eq!(cfg["create"], true);
    assert_eq!(cfg["name"], "time-slicing-config");
    assert_eq!(cfg["default"], "all");
    assert!(
        cfg["data"]["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 10")
    );
    // The daemonset was restarted: the chart's ConfigMap change alone reaches no node.
    let ds = st
        .stack
        .kube
        .object(
            "aks",
            "sandbox-aks",
            "daemonsets.apps",
            NS,
            "nvidia-device-plugin-daemonset",
        )
        .unwrap();
    assert!(
        ds.pointer("/spec/template/metadata/annotations/fracgpu.dev~1restartedAt")
            .is_some()
    );

    // The deployed values match: no drift, and helm is not run again.
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Someone runs `helm upgrade --set ...replicas=5` outside terraform: drift.
    put_revision(
        &st,
        2,
        "superseded",
        values(json!({"all": "", "time-sliced-10": ts(10)}), "all"),
    );
    put_revision(
        &st,
        4,
        "deployed",
        values(json!({"all": "", "time-sliced-10": ts(5)}), "all"),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "changed Helm values are drift:\n{}", plan.text());
    assert!(plan.stdout.contains("replicas: 5"), "{}", plan.stdout);

    // Apply repairs it through helm, with only the change in the values file.
    ws.apply();
    let (_, vals) = helm.take().expect("helm upgrade ran");
    assert!(
        vals[ALIAS]["devicePlugin"]["config"]["data"]["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 10")
    );
    put_revision(
        &st,
        4,
        "superseded",
        values(json!({"all": "", "time-sliced-10": ts(5)}), "all"),
    );
    put_revision(
        &st,
        5,
        "deployed",
        values(json!({"all": "", "time-sliced-10": ts(10)}), "all"),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Update replicas; a key the release has and the configuration does not is removed (null).
    put_revision(
        &st,
        5,
        "deployed",
        values(
            json!({"all": "", "time-sliced-10": ts(10), "stale": ""}),
            "all",
        ),
    );
    ws.write("main.tf", &config(&kc, &helm.path(), 4));
    ws.apply();
    let (_, vals) = helm.take().expect("helm upgrade ran");
    let data = &vals[ALIAS]["devicePlugin"]["config"]["data"];
    assert!(
        data["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    assert!(data.get("stale").is_some_and(Value::is_null), "{data}");
    put_revision(
        &st,
        6,
        "deployed",
        values(json!({"all": "", "time-sliced-10": ts(4)}), "all"),
    );

    // A pending operation blocks the upgrade with a clear error.
    put_revision(&st, 7, "pending-upgrade", values(json!({}), "all"));
    ws.write("main.tf", &config(&kc, &helm.path(), 3));
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(out.text().contains("pending-upgrade"), "{}", out.text());
    assert!(helm.take().is_none(), "helm was not run");
    put_revision(&st, 7, "failed", values(json!({}), "all"));

    // Helm missing: a diagnostic naming helm_path.
    ws.write("main.tf", &config(&kc, "/nonexistent/helm", 3));
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_ne!(out.code, 0);
    assert!(out.text().contains("helm.helm_path"), "{}", out.text());

    // Destroy: the chart stops creating the ConfigMap, every key is removed.
    ws.write("main.tf", &config(&kc, &helm.path(), 4));
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (_, vals) = helm.take().expect("helm upgrade ran");
    let cfg = &vals[ALIAS]["devicePlugin"]["config"];
    assert_eq!(cfg["create"], false, "{cfg}");
    assert!(cfg["data"]["time-sliced-10"].is_null(), "{cfg}");
}

/// The real helm against the sandbox: a tiny local chart is installed, then the resource
/// upgrades it. Skipped when helm is not on the PATH.
#[test]
fn helm_delivery_with_real_helm_when_available() {
    let Ok(found) = Command::new("helm").arg("version").output() else {
        eprintln!("helm is not on the PATH: skipped");
        return;
    };
    if !found.status.success() {
        eprintln!("helm does not run: skipped");
        return;
    }
    let st = start_stack(std::time::Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let chart = tempfile::tempdir().unwrap();
    let c = chart.path().join("tfy-gpu-operator");
    std::fs::create_dir_all(c.join("templates")).unwrap();
    std::fs::write(
        c.join("Chart.yaml"),
        "apiVersion: v2\nname: tfy-gpu-operator\nversion: 0.1.20\n",
    )
    .unwrap();
    std::fs::write(
        c.join("values.yaml"),
        format!("{ALIAS}:\n  devicePlugin:\n    config:\n      create: false\n      name: \"\"\n      default: \"\"\n      data: {{}}\n"),
    )
    .unwrap();
    std::fs::write(
        c.join("templates/configmap.yaml"),
        format!("{{{{- $c := index .Values \"{ALIAS}\" \"devicePlugin\" \"config\" }}}}\n{{{{- if $c.create }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ $c.name }}}}\ndata:\n{{{{- range $k, $v := $c.data }}}}\n  {{{{ $k }}}}: {{{{ $v | quote }}}}\n{{{{- end }}}}\n{{{{- end }}}}\n"),
    )
    .unwrap();
    let install = Command::new("helm")
        .args([
            "install",
            RELEASE,
            &c.display().to_string(),
            "--namespace",
            NS,
            "--kubeconfig",
            &kc,
        ])
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let ws = Workspace::new(
        &config(&kc, "helm", 10).replace("truefoundry/tfy-gpu-operator", &c.display().to_string()),
    );
    ws.init();
    ws.apply();
    let cm = st
        .stack
        .kube
        .object(
            "aks",
            "sandbox-aks",
            "configmaps",
            NS,
            "time-slicing-config",
        )
        .expect("the chart rendered the ConfigMap");
    assert!(
        cm["data"]["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 10")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}
