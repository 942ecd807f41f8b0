//! The sandbox's Kubernetes API over real HTTP: kubectl, raw requests, the digital twin and bad requests.

use testkit::tools::{self, Tool};

use sandbox::kube::{KubeApi, PoolNodes};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

struct Server {
    api: Arc<KubeApi>,
    base: String,
    addr: String,
    tls: Arc<rustls::ClientConfig>,
}

fn serve() -> Server {
    let api = KubeApi::new();
    for (cloud, cluster) in [
        ("aks", "sandbox-aks"),
        ("gke", "sandbox-gke"),
        ("eks", "sandbox-eks"),
    ] {
        api.add_cluster(cloud, cluster);
    }
    let served = api.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send");
            served.serve_tls(listener).await.expect("serve");
        });
    });
    let addr = rx.recv().expect("address").to_string();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            api.tls_identity().ca_der,
        ))
        .expect("CA");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Server {
        api,
        base: format!("https://{addr}"),
        addr,
        tls: Arc::new(tls),
    }
}

struct Resp {
    code: u16,
    body: Value,
}

impl Server {
    fn prefix(&self, cloud: &str, cluster: &str) -> String {
        format!("/k8s/{cloud}/{cluster}")
    }

    fn token(&self, cloud: &str, cluster: &str) -> String {
        self.api.token(cloud, cluster).expect("token")
    }

    /// One HTTP/1.1 request with the AKS cluster's token unless `token` overrides it.
    fn raw(&self, method: &str, path: &str, ctype: &str, body: &[u8], token: Option<&str>) -> Resp {
        let tok = token
            .map(str::to_string)
            .unwrap_or_else(|| self.token("aks", "sandbox-aks"));
        let tcp = TcpStream::connect(&self.addr).expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let conn = rustls::ClientConnection::new(self.tls.clone(), name).expect("tls");
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: sandbox-test/1.0\r\n",
            self.addr
        );
        if !tok.is_empty() {
            req.push_str(&format!("Authorization: Bearer {tok}\r\n"));
        }
        if !ctype.is_empty() {
            req.push_str(&format!("Content-Type: {ctype}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(req.as_bytes()).expect("write");
        let _ = s.write_all(body);
        let mut out = Vec::new();
        // The server closes without close_notify at times; what was read is complete for Connection: close.
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status code");
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        Resp {
            code,
            body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        let b = body.map(|b| b.to_string()).unwrap_or_default();
        self.raw(
            method,
            &format!("{}{path}", self.prefix("aks", "sandbox-aks")),
            "application/json",
            b.as_bytes(),
            None,
        )
    }

    fn patch(&self, path: &str, ctype: &str, body: &str) -> Resp {
        self.raw(
            "PATCH",
            &format!("{}{path}", self.prefix("aks", "sandbox-aks")),
            ctype,
            body.as_bytes(),
            None,
        )
    }
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((len, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    out
}

struct Kubectl {
    bin: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(srv: &Server, cloud: &str, cluster: &str) -> Option<Kubectl> {
        let bin = tools::require(Tool::Kubectl)?;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("kubeconfig");
        std::fs::write(&config, srv.api.kubeconfig(cloud, cluster, &srv.base)).expect("kubeconfig");
        Some(Kubectl {
            bin,
            config,
            _dir: dir,
        })
    }

    fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.config)
            .args(args)
            .env("HOME", self.dir())
            .env("KUBECACHEDIR", self.dir().join("cache"))
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).expect("kubectl printed JSON")
    }
}

fn aks_a100_pool(config_label: Option<&str>) -> PoolNodes {
    let mut labels = BTreeMap::from([("team".to_string(), "ml".to_string())]);
    if let Some(l) = config_label {
        labels.insert("nvidia.com/device-plugin.config".into(), l.into());
    }
    PoolNodes {
        cloud: "aks",
        cluster: "sandbox-aks".into(),
        pool: "gpua100".into(),
        node_count: 2,
        labels,
        taints: vec![("sku".into(), "gpu".into(), "NoSchedule".into())],
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus_per_node: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
    }
}

fn allocatable(node: &Value, res: &str) -> Option<String> {
    node.pointer(&format!("/status/allocatable/{}", res.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn label(node: &Value, key: &str) -> Option<String> {
    node.pointer(&format!("/metadata/labels/{}", key.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

const TS10: &str = "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n";

/// kubectl refuses a second restart within the same second (restartedAt has second precision).
fn restart_again(k: &Kubectl) {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    k.ok(&[
        "rollout",
        "restart",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
}

#[test]
fn kubectl_time_slicing_twin_scenario() {
    let srv = serve();
    srv.api.pool_changed(&aks_a100_pool(Some("time-sliced-10")));
    let Some(k) = Kubectl::new(&srv, "aks", "sandbox-aks") else {
        return;
    };

    // kubectl lists the pool's nodes, named and labelled as AKS does.
    let nodes = k.json(&["get", "nodes", "-l", "agentpool=gpua100"]);
    let items = nodes["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    let name = items[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(
        name.starts_with("aks-gpua100-") && name.contains("-vmss00000"),
        "{name}"
    );
    assert_eq!(label(&items[0], "team").as_deref(), Some("ml"));
    assert_eq!(items[0]["spec"]["taints"][0]["effect"], "NoSchedule");
    assert_eq!(
        allocatable(&items[0], "nvidia.com/gpu").as_deref(),
        Some("1")
    );
    // Server-side printing: the columns kubectl users know.
    let table = k.ok(&["get", "nodes", "-L", "nvidia.com/gpu.replicas"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.REPLICAS"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&name) && l.contains(" Ready ") && l.trim_end().ends_with(" 1")),
        "{table}"
    );
    let described = k.ok(&["describe", "node", &name]);
    assert!(
        described.contains("nvidia.com/gpu:") && described.contains("Non-terminated Pods:"),
        "{described}"
    );

    // NVIDIA's documented steps: the ConfigMap from a file, then point the ClusterPolicy at it.
    let file = k.dir().join("time-sliced-10");
    std::fs::write(&file, TS10).expect("write");
    k.ok(&[
        "create",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        &format!("--from-file={}", file.display()),
    ]);
    let cm = k.json(&[
        "get",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
    ]);
    assert_eq!(cm["data"]["time-sliced-10"], TS10);
    k.ok(&[
        "patch",
        "clusterpolicies.nvidia.com/cluster-policy",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"any"}}}}"#,
    ]);
    let cp = k.json(&["get", "clusterpolicies.nvidia.com", "cluster-policy"]);
    assert_eq!(
        cp["spec"]["devicePlugin"]["config"]["name"],
        "time-slicing-config"
    );
    assert_eq!(cp["spec"]["mig"]["strategy"], "single");
    assert_eq!(cp["metadata"]["generation"], 2);

    // The operator does not watch the ConfigMap: nothing changes on the nodes yet.
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("1"));
    assert_eq!(
        label(&node, "nvidia.com/gpu.replicas").as_deref(),
        Some("1")
    );

    k.ok(&[
        "rollout",
        "restart",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
    // rollout status watches the daemonset until the rollout is done.
    let out = k.ok(&[
        "rollout",
        "status",
        "daemonset/nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
        "--timeout=20s",
    ]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let ds = k.json(&[
        "get",
        "daemonset",
        "nvidia-device-plugin-daemonset",
        "-n",
        "gpu-operator",
    ]);
    assert!(
        ds["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string()
    );
    for item in k.json(&["get", "nodes", "-l", "agentpool=gpua100"])["items"]
        .as_array()
        .expect("items")
    {
        assert_eq!(
            allocatable(item, "nvidia.com/gpu").as_deref(),
            Some("10"),
            "{item}"
        );
        assert_eq!(item["status"]["capacity"]["nvidia.com/gpu"], "10");
        assert_eq!(
            label(item, "nvidia.com/gpu.replicas").as_deref(),
            Some("10")
        );
        assert_eq!(
            label(item, "nvidia.com/gpu.sharing-strategy").as_deref(),
            Some("time-slicing")
        );
        assert_eq!(
            label(item, "nvidia.com/gpu.product").as_deref(),
            Some("NVIDIA-A100-80GB-PCIe-SHARED")
        );
        assert_eq!(label(item, "nvidia.com/gpu.count").as_deref(), Some("1"));
    }

    // Editing the ConfigMap changes nothing until the next restart.
    k.ok(&[
        "patch",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        "--type",
        "merge",
        "-p",
        &json!({"data": {"time-sliced-10": TS10.replace("replicas: 10", "replicas: 4")}})
            .to_string(),
    ]);
    assert_eq!(
        allocatable(&k.json(&["get", "node", &name]), "nvidia.com/gpu").as_deref(),
        Some("10")
    );
    restart_again(&k);
    assert_eq!(
        allocatable(&k.json(&["get", "node", &name]), "nvidia.com/gpu").as_deref(),
        Some("4")
    );

    // A broken config: the plugin keeps its previous advertisement and the node says why.
    k.ok(&[
        "patch",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        "--type",
        "merge",
        "-p",
        &json!({"data": {"time-sliced-10": TS10.replace("replicas: 10", "replicas: 1")}})
            .to_string(),
    ]);
    restart_again(&k);
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("4"));
    let why = node["metadata"]["annotations"]["sandbox.fracgpu.dev/device-plugin-error"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("replicas must be >= 2"), "{why}");

    // Relabelling a node to a config the plugin does not know: also kept.
    k.ok(&[
        "label",
        "node",
        &name,
        "--overwrite",
        "nvidia.com/device-plugin.config=nope",
    ]);
    let node = k.json(&["get", "node", &name]);
    assert_eq!(allocatable(&node, "nvidia.com/gpu").as_deref(), Some("4"));
    assert!(
        node["metadata"]["annotations"]["sandbox.fracgpu.dev/device-plugin-error"]
            .as_str()
            .unwrap_or_default()
            .contains("\"nope\"")
    );
}

#[test]
fn kubectl_server_side_apply_and_conflicts() {
    let srv = serve();
    let Some(k) = Kubectl::new(&srv, "eks", "sandbox-eks") else {
        return;
    };
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dp\n  namespace: gpu-operator\n  labels:\n    owner: tf\ndata:\n  all: \"\"\n  ts: \"{v}\"\n"
        )
    };
    let f = k.dir().join("cm.yaml");
    std::fs::write(&f, cm("a")).expect("write");
    let fp = f.display().to_string();
    let out = k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    assert!(out.contains("serverside-applied"), "{out}");
    let got = k.json(&[
        "get",
        "cm",
        "dp",
        "-n",
        "gpu-operator",
        "--show-managed-fields",
    ]);
    assert_eq!(got["data"]["ts"], "a");
    let mf = &got["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "fracgpu");
    assert_eq!(mf["operation"], "Apply");
    assert!(mf["fieldsV1"]["f:data"]["f:ts"].is_object(), "{mf}");

    // Someone else changes the field: our next apply with another value conflicts, unless forced.
    k.ok(&[
        "patch",
        "cm",
        "dp",
        "-n",
        "gpu-operator",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"ts":"hand-edit"}}"#,
    ]);
    std::fs::write(&f, cm("b")).expect("write");
    let (ok, _, err) = k.run(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    assert!(!ok);
    assert!(
        err.contains("conflict") && err.contains("kubectl-patch") && err.contains(".data.ts"),
        "{err}"
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "--force-conflicts",
        "-f",
        &fp,
    ]);
    assert_eq!(
        k.json(&["get", "cm", "dp", "-n", "gpu-operator"])["data"]["ts"],
        "b"
    );

    // Dropping a field from the applied configuration removes it (nobody else owns it now).
    std::fs::write(&f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dp\n  namespace: gpu-operator\ndata:\n  all: \"\"\n").expect("write");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &fp,
    ]);
    let got = k.json(&["get", "cm", "dp", "-n", "gpu-operator"]);
    assert_eq!(got["data"], json!({"all": ""}));
    assert!(got["metadata"]["labels"].get("owner").is_none(), "{got}");

    // Server-side apply of the ClusterPolicy pointer, as the provider will do it.
    let cp = k.dir().join("cp.yaml");
    std::fs::write(&cp, "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  devicePlugin:\n    config:\n      name: dp\n      default: all\n").expect("write");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &cp.display().to_string(),
    ]);
    let got = k.json(&["get", "clusterpolicies.nvidia.com", "cluster-policy"]);
    assert_eq!(
        got["spec"]["devicePlugin"]["config"],
        json!({"name": "dp", "default": "all"})
    );
    assert_eq!(
        got["spec"]["devicePlugin"]["enabled"], true,
        "fields owned by helm stay"
    );
    // The chart's manager owns mig.strategy: changing it by apply conflicts with "helm".
    std::fs::write(&cp, "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  mig:\n    strategy: mixed\n").expect("write");
    let (ok, _, err) = k.run(&[
        "apply",
        "--server-side",
        "--field-manager",
        "fracgpu",
        "-f",
        &cp.display().to_string(),
    ]);
    assert!(
        !ok && err.contains("\"helm\"") && err.contains(".spec.mig.strategy"),
        "{err}"
    );

    // Client-side apply (kubectl's default, validated through the OpenAPI v3 verifier), twice: create, then
    // a strategic merge patch carrying the last-applied annotation.
    let ca = k.dir().join("ca.yaml");
    let ds = |img: &str| {
        format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: probe\n  template:\n    metadata:\n      labels:\n        app: probe\n    spec:\n      containers:\n      - name: c\n        image: {img}\n"
        )
    };
    std::fs::write(&ca, ds("busybox:1")).expect("write");
    assert!(
        k.ok(&["apply", "-f", &ca.display().to_string()])
            .contains("created")
    );
    std::fs::write(&ca, ds("busybox:2")).expect("write");
    assert!(
        k.ok(&["apply", "-f", &ca.display().to_string()])
            .contains("configured")
    );
    let got = k.json(&["get", "ds", "probe"]);
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"],
        json!([{"name": "c", "image": "busybox:2"}])
    );
    assert_eq!(got["metadata"]["generation"], 2);
    assert!(
        got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    // Namespaces, labels and deletes through kubectl's typed (protobuf) and patch paths.
    k.ok(&["create", "namespace", "team-a"]);
    k.ok(&["label", "namespace", "team-a", "tier=gpu"]);
    assert_eq!(
        k.json(&["get", "ns", "-l", "tier=gpu"])["items"][0]["metadata"]["name"],
        "team-a"
    );
    k.ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    k.ok(&["delete", "namespace", "team-a"]);
    let (ok, _, err) = k.run(&["get", "cm", "c", "-n", "team-a"]);
    assert!(!ok && err.contains("not found"), "{err}");

    // kubectl get for the other kinds, and delete.
    assert!(k.ok(&["get", "namespaces"]).contains("gpu-operator"));
    assert!(
        k.ok(&["get", "ds", "-A"])
            .contains("nvidia-device-plugin-daemonset")
    );
    assert!(k.ok(&["get", "crd"]).contains("clusterpolicies.nvidia.com"));
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "default",
        "--from-literal=k=v",
    ]);
    assert_eq!(k.json(&["get", "secret", "s1"])["data"]["k"], "dg==");
    k.ok(&["delete", "cm", "dp", "-n", "gpu-operator"]);
    let (ok, _, err) = k.run(&["get", "cm", "dp", "-n", "gpu-operator"]);
    assert!(!ok && err.contains("configmaps \"dp\" not found"), "{err}");
}

fn gke_pool(
    pool: &str,
    gpus: u32,
    partition: Option<(&str, u32)>,
    sharing: Option<(&str, u32)>,
) -> PoolNodes {
    PoolNodes {
        cloud: "gke",
        cluster: "sandbox-gke".into(),
        pool: pool.into(),
        node_count: 1,
        labels: BTreeMap::from([(
            "cloud.google.com/gke-nodepool".to_string(),
            pool.to_string(),
        )]),
        taints: vec![(
            "nvidia.com/gpu".into(),
            "present".into(),
            "NoSchedule".into(),
        )],
        gpu_product: Some("nvidia-tesla-a100".into()),
        gpus_per_node: gpus,
        gpu_memory_mib: 40960,
        mig_profile: partition.map(|(p, _)| p.to_string()),
        mig_instances_per_gpu: partition.map(|(_, n)| n).unwrap_or(0),
        gke_sharing: sharing.map(|(s, n)| (s.to_string(), n)),
    }
}

impl Server {
    fn get_in(&self, cloud: &str, cluster: &str, path: &str) -> Resp {
        let tok = self.token(cloud, cluster);
        self.raw(
            "GET",
            &format!("{}{path}", self.prefix(cloud, cluster)),
            "",
            b"",
            Some(&tok),
        )
    }

    fn send_in(
        &self,
        cloud: &str,
        cluster: &str,
        method: &str,
        path: &str,
        ctype: &str,
        body: &str,
    ) -> Resp {
        let tok = self.token(cloud, cluster);
        self.raw(
            method,
            &format!("{}{path}", self.prefix(cloud, cluster)),
            ctype,
            body.as_bytes(),
            Some(&tok),
        )
    }
}

fn items(r: &Resp) -> Vec<Value> {
    assert_eq!(r.code, 200, "{}", r.body);
    r.body["items"].as_array().cloned().unwrap_or_default()
}

#[test]
fn gke_sharing_and_partitions_advertise_at_once() {
    let srv = serve();
    srv.api
        .pool_changed(&gke_pool("shared", 2, None, Some(("TIME_SHARING", 4))));
    srv.api
        .pool_changed(&gke_pool("parted", 1, Some(("1g.5gb", 7)), None));
    srv.api
        .pool_changed(&gke_pool("both", 1, Some(("3g.20gb", 2)), Some(("MPS", 3))));
    let list = srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Dshared",
    );
    let nodes = items(&list);
    assert_eq!(nodes.len(), 1);
    let n = &nodes[0];
    let name = n["metadata"]["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("gke-sandbox-gke-shared-"), "{name}");
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(
        label(n, "cloud.google.com/gke-gpu-sharing-strategy").as_deref(),
        Some("time-sharing")
    );
    assert_eq!(
        label(n, "cloud.google.com/gke-max-shared-clients-per-gpu").as_deref(),
        Some("4")
    );
    assert_eq!(n["spec"]["taints"][0]["key"], "nvidia.com/gpu");
    let parted = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Dparted",
    ));
    assert_eq!(
        allocatable(&parted[0], "nvidia.com/gpu").as_deref(),
        Some("7")
    );
    assert_eq!(
        label(&parted[0], "cloud.google.com/gke-gpu-partition-size").as_deref(),
        Some("1g.5gb")
    );
    let both = items(&srv.get_in(
        "gke",
        "sandbox-gke",
        "/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool+in+(both,nothing)",
    ));
    assert_eq!(
        allocatable(&both[0], "nvidia.com/gpu").as_deref(),
        Some("6")
    );
    assert_eq!(
        label(&both[0], "cloud.google.com/gke-gpu-sharing-strategy").as_deref(),
        Some("mps")
    );
    // GKE's device plugin is not the operator's: restarting the daemonset or a ClusterPolicy config changes nothing.
    let r = srv.send_in(
        "gke",
        "sandbox-gke",
        "PATCH",
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "application/merge-patch+json",
        r#"{"spec":{"devicePlugin":{"config":{"name":"nope","default":"x"}}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let r = srv.send_in("gke", "sandbox-gke", "PATCH", "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/strategic-merge-patch+json", r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"now"}}}}}"#);
    assert_eq!(r.code, 200, "{}", r.body);
    let all = items(&srv.get_in("gke", "sandbox-gke", "/api/v1/nodes"));
    let mut got: Vec<String> = all
        .iter()
        .filter_map(|n| allocatable(n, "nvidia.com/gpu"))
        .collect();
    got.sort();
    assert_eq!(got, ["6", "7", "8"]);
}

#[test]
fn eks_mig_manager_and_strategies() {
    let srv = serve();
    let pool = PoolNodes {
        cloud: "eks",
        cluster: "sandbox-eks".into(),
        pool: "p4d".into(),
        node_count: 1,
        labels: BTreeMap::from([(
            "nvidia.com/mig.config".to_string(),
            "all-1g.5gb".to_string(),
        )]),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-SXM4-40GB".into()),
        gpus_per_node: 8,
        gpu_memory_mib: 40960,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
    };
    srv.api.pool_changed(&pool);
    let n = &items(&srv.get_in(
        "eks",
        "sandbox-eks",
        "/api/v1/nodes?labelSelector=eks.amazonaws.com%2Fnodegroup%3Dp4d",
    ))[0];
    let name = n["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        name.starts_with("ip-10-") && name.ends_with(".ec2.internal"),
        "{name}"
    );
    // The chart's default strategy is single: 8 GPUs x 7 instances as nvidia.com/gpu.
    assert_eq!(
        label(n, "nvidia.com/mig.config.state").as_deref(),
        Some("success")
    );
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("56"));
    assert_eq!(
        label(n, "nvidia.com/gpu.product").as_deref(),
        Some("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
    );
    // Switch to mixed; it takes effect at the next restart.
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/mig/strategy","value":"mixed"}]"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let n = srv
        .get_in("eks", "sandbox-eks", &format!("/api/v1/nodes/{name}"))
        .body;
    assert_eq!(allocatable(&n, "nvidia.com/gpu").as_deref(), Some("56"));
    let r = srv.send_in("eks", "sandbox-eks", "PATCH", "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/strategic-merge-patch+json", r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"t1"}}}}}"#);
    assert_eq!(r.code, 200);
    let n = srv
        .get_in("eks", "sandbox-eks", &format!("/api/v1/nodes/{name}"))
        .body;
    assert_eq!(
        allocatable(&n, "nvidia.com/mig-1g.5gb").as_deref(),
        Some("56"),
        "{n}"
    );
    assert_eq!(allocatable(&n, "nvidia.com/gpu"), None);
    assert_eq!(
        label(&n, "nvidia.com/mig-1g.5gb.count").as_deref(),
        Some("56")
    );
    // A profile this GPU does not have: the MIG manager fails and the GPUs stay whole.
    let r = srv.send_in(
        "eks",
        "sandbox-eks",
        "PATCH",
        &format!("/api/v1/nodes/{name}"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"nvidia.com/mig.config":"all-1g.20gb"}}}"#,
    );
    assert_eq!(r.code, 200);
    assert_eq!(
        label(&r.body, "nvidia.com/mig.config.state").as_deref(),
        Some("failed")
    );
    assert_eq!(allocatable(&r.body, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(allocatable(&r.body, "nvidia.com/mig-1g.5gb"), None);
}

#[test]
fn aks_mig_pool_with_time_slicing_and_default_config() {
    let srv = serve();
    let mut pool = aks_a100_pool(None);
    pool.pool = "mig".into();
    pool.gpus_per_node = 2;
    pool.mig_profile = Some("1g.10gb".into());
    pool.mig_instances_per_gpu = 7;
    srv.api.pool_changed(&pool);
    let n = &items(&srv.call("GET", "/api/v1/nodes?labelSelector=agentpool%3Dmig", None))[0];
    let name = n["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(allocatable(n, "nvidia.com/gpu").as_deref(), Some("14"));
    // A config named by the ClusterPolicy default (the node has no label), rename by default.
    let cfg = "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n";
    let r = srv.call("POST", "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp"}, "data": {"ts3": cfg, "all": ""}})));
    assert_eq!(r.code, 201, "{}", r.body);
    // Server-side apply with a JSON body, as kube-rs sends it.
    let r = srv.patch("/apis/nvidia.com/v1/clusterpolicies/cluster-policy?fieldManager=fracgpu&force=true", "application/apply-patch+yaml",
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"devicePlugin": {"config": {"name": "dp", "default": "ts3"}}}}).to_string());
    assert_eq!(r.code, 200, "{}", r.body);
    let r = srv.patch(
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset",
        "application/merge-patch+json",
        r#"{"spec":{"template":{"metadata":{"annotations":{"fracgpu.dev/restartedAt":"1"}}}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["status"]["numberReady"], 2,
        "the rollout reports both GPU nodes"
    );
    let n = srv.call("GET", &format!("/api/v1/nodes/{name}"), None).body;
    assert_eq!(
        allocatable(&n, "nvidia.com/gpu.shared").as_deref(),
        Some("42"),
        "{n}"
    );
    assert_eq!(allocatable(&n, "nvidia.com/gpu"), None);
    assert_eq!(
        label(&n, "nvidia.com/gpu.product").as_deref(),
        Some("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb")
    );
    assert_eq!(label(&n, "nvidia.com/gpu.replicas").as_deref(), Some("3"));
}

#[test]
fn pool_lifecycle_keeps_api_labels_and_names() {
    let srv = serve();
    let mut pool = aks_a100_pool(None);
    pool.node_count = 3;
    srv.api.pool_changed(&pool);
    let names = srv.api.pool_node_names("aks", "sandbox-aks", "gpua100");
    assert_eq!(names.len(), 3);
    let first = names[0].clone();
    let r = srv.patch(
        &format!("/api/v1/nodes/{first}"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"added-by":"kubectl"}}}"#,
    );
    assert_eq!(r.code, 200, "{}", r.body);
    pool.node_count = 1;
    pool.labels = BTreeMap::from([("team".to_string(), "infra".to_string())]);
    srv.api.pool_changed(&pool);
    assert_eq!(
        srv.api.pool_node_names("aks", "sandbox-aks", "gpua100"),
        vec![first.clone()]
    );
    let n = srv
        .call("GET", &format!("/api/v1/nodes/{first}"), None)
        .body;
    assert_eq!(label(&n, "team").as_deref(), Some("infra"));
    assert_eq!(label(&n, "added-by").as_deref(), Some("kubectl"));
    assert_eq!(
        label(&n, "kubernetes.azure.com/agentpool").as_deref(),
        Some("gpua100")
    );
    srv.api.pool_deleted("aks", "sandbox-aks", "gpua100");
    assert_eq!(
        srv.call("GET", &format!("/api/v1/nodes/{first}"), None)
            .code,
        404
    );
    assert!(items(&srv.call("GET", "/api/v1/nodes", None)).is_empty());
}

#[test]
fn api_semantics_discovery_versions_and_persistence() {
    let srv = serve();
    let v = srv.get_in("aks", "sandbox-aks", "/version");
    assert_eq!(v.body["major"], "1");
    assert_eq!(srv.call("GET", "/api", None).body["versions"][0], "v1");
    let groups = srv.call("GET", "/apis", None).body;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(names, ["apps", "apiextensions.k8s.io", "nvidia.com"]);
    let core = srv.call("GET", "/api/v1", None).body;
    assert!(
        core["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["name"] == "configmaps" && r["namespaced"] == true)
    );
    let nv = srv.call("GET", "/apis/nvidia.com/v1", None).body;
    assert_eq!(nv["resources"][0]["kind"], "ClusterPolicy");
    assert_eq!(nv["resources"][0]["namespaced"], false);

    // Create: uid, resourceVersion, creationTimestamp, generation, managedFields from the user agent.
    let r = srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "a", "labels": {"tier": "x"}}, "data": {"k": "v"}})),
    );
    assert_eq!(r.code, 201, "{}", r.body);
    let m = &r.body["metadata"];
    assert!(m["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(
        m["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(m["generation"], 1);
    assert_eq!(m["managedFields"][0]["manager"], "sandbox-test");
    let rv1: u64 = m["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("rv");
    // A no-op patch keeps the resourceVersion; a change bumps it and the generation.
    let same = srv.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        r#"{"data":{"k":"v"}}"#,
    );
    assert_eq!(
        same.body["metadata"]["resourceVersion"],
        m["resourceVersion"]
    );
    let changed = srv.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        r#"{"data":{"k":"w"}}"#,
    );
    let rv2: u64 = changed.body["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("rv");
    assert!(rv2 > rv1);
    assert_eq!(changed.body["metadata"]["generation"], 2);
    // PUT with the current resourceVersion succeeds.
    let mut obj = changed.body.clone();
    obj["data"]["k2"] = json!("z");
    let put = srv.call("PUT", "/api/v1/namespaces/default/configmaps/a", Some(obj));
    assert_eq!(put.code, 200, "{}", put.body);
    // Label and field selectors.
    srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "b", "labels": {"tier": "y"}}})),
    );
    let sel = |q: &str| -> Vec<String> {
        items(&srv.call(
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?{q}"),
            None,
        ))
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
    };
    assert_eq!(sel("labelSelector=tier%3Dx"), ["a"]);
    assert_eq!(sel("labelSelector=tier+notin+(x)"), ["b"]);
    assert_eq!(sel("labelSelector=tier%2C%21nothing"), ["a", "b"]);
    assert_eq!(sel("fieldSelector=metadata.name%3Db"), ["b"]);
    assert_eq!(sel("fieldSelector=metadata.name%21%3Db"), ["a"]);
    assert_eq!(
        items(&srv.call("GET", "/api/v1/configmaps?labelSelector=tier", None)).len(),
        2
    );
    // Server-side apply with a YAML body (what a hand-written apply sends).
    let yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  cfg: |\n    version: v1\n";
    let r = srv.patch(
        "/api/v1/namespaces/default/configmaps/y?fieldManager=me",
        "application/apply-patch+yaml",
        yaml,
    );
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["data"]["cfg"], "version: v1\n");
    // Dry run persists nothing.
    let dry = srv.call(
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        Some(json!({"metadata": {"name": "dry"}})),
    );
    assert_eq!(dry.code, 201);
    assert_eq!(
        srv.call("GET", "/api/v1/namespaces/default/configmaps/dry", None)
            .code,
        404
    );
    // Secrets: stringData folds into base64 data; a helm release secret is stored as is.
    let s = srv.call("POST", "/api/v1/namespaces/default/secrets", Some(json!({"metadata": {"name": "sh.helm.release.v1.op.v1",
        "labels": {"owner": "helm", "status": "deployed", "name": "op", "version": "1"}}, "type": "helm.sh/release.v1", "data": {"release": "SDRzSQ=="}, "stringData": {"x": "y"}})));
    assert_eq!(s.code, 201, "{}", s.body);
    assert_eq!(s.body["data"], json!({"release": "SDRzSQ==", "x": "eQ=="}));
    assert_eq!(s.body["type"], "helm.sh/release.v1");
    // Delete answers a Success Status; deleting a namespace takes its objects along.
    let d = srv.call("DELETE", "/api/v1/namespaces/default/configmaps/b", None);
    assert_eq!((d.code, d.body["status"].as_str()), (200, Some("Success")));
    assert_eq!(
        srv.call(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": "tmp"}}))
        )
        .code,
        201
    );
    srv.call(
        "POST",
        "/api/v1/namespaces/tmp/configmaps",
        Some(json!({"metadata": {"name": "c"}})),
    );
    assert_eq!(srv.call("DELETE", "/api/v1/namespaces/tmp", None).code, 200);
    assert!(
        items(&srv.call(
            "GET",
            "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dtmp",
            None
        ))
        .is_empty()
    );

    // Snapshot and restore into a new API: same objects, same token, same CA.
    srv.api.pool_changed(&aks_a100_pool(None));
    let snap = srv.api.snapshot();
    let other = KubeApi::new();
    other.restore(&snap).expect("restore");
    assert_eq!(other.snapshot(), snap);
    assert_eq!(
        other.token("aks", "sandbox-aks"),
        srv.api.token("aks", "sandbox-aks")
    );
    assert_eq!(other.ca_pem(), srv.api.ca_pem());
    assert_eq!(
        other
            .object("aks", "sandbox-aks", "configmaps", "default", "a")
            .map(|o| o["data"]["k2"].clone()),
        Some(json!("z"))
    );
    assert!(other.restore(&json!({"clusters": 3})).is_err());
    let dir = tempfile::tempdir().expect("tempdir");
    let written = srv
        .api
        .write_kubeconfigs(dir.path(), &srv.base)
        .expect("kubeconfigs");
    assert_eq!(written.len(), 3);
    let aks = written.iter().find(|(c, _, _)| c == "aks").expect("aks");
    assert!(aks.2.ends_with("aks-sandbox-aks.kubeconfig"));
    assert!(
        std::fs::read_to_string(&aks.2)
            .expect("read")
            .contains(&srv.token("aks", "sandbox-aks"))
    );
    assert!(
        srv.api
            .kubeconfig("aks", "sandbox-aks", &srv.base)
            .contains("certificate-authority-data: ")
    );
}

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

#[allow(clippy::too_many_arguments)] // one table row, read left to right
fn bad(
    what: &'static str,
    method: &'static str,
    path: &str,
    ctype: &'static str,
    body: Value,
    code: u16,
    reason: &'static str,
    message: &'static str,
) -> Bad {
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
                "GET",
                "/api/v1/nodes",
                "",
                Value::Null,
                401,
                "Unauthorized",
                "Unauthorized",
            )
        },
        Bad {
            token: Some("wrong"),
            ..bad(
                "wrong token",
                "GET",
                "/api/v1/nodes",
                "",
                Value::Null,
                401,
                "Unauthorized",
                "Unauthorized",
            )
        },
        bad(
            "missing object",
            "GET",
            &format!("{cms}/nope"),
            "",
            Value::Null,
            404,
            "NotFound",
            "configmaps \"nope\" not found",
        ),
        bad(
            "unknown resource",
            "GET",
            "/api/v1/services",
            "",
            Value::Null,
            404,
            "NotFound",
            "could not find the requested resource",
        ),
        bad(
            "unknown group",
            "GET",
            "/apis/batch/v1/jobs",
            "",
            Value::Null,
            404,
            "NotFound",
            "could not find the requested resource",
        ),
        bad(
            "duplicate",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "exists"}}),
            409,
            "AlreadyExists",
            "configmaps \"exists\" already exists",
        ),
        bad(
            "bad name",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "Bad_Name"}}),
            422,
            "Invalid",
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
        ),
        bad(
            "missing name",
            "POST",
            cms,
            j,
            json!({"metadata": {}}),
            422,
            "Invalid",
            "metadata.name: Required value",
        ),
        bad(
            "bad key",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "k"}, "data": {"a/b": "x"}}),
            422,
            "Invalid",
            "data[a/b]: Invalid value: \"a/b\": a valid config key",
        ),
        bad(
            "long key",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "k"}, "data": {"k".repeat(254): "x"}}),
            422,
            "Invalid",
            "must be no more than 253 characters",
        ),
        bad(
            "bad label",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "k", "labels": {"nvidia.com/device-plugin.config": "-x"}}}),
            422,
            "Invalid",
            "metadata.labels[nvidia.com/device-plugin.config]",
        ),
        bad(
            "bad namespace name",
            "POST",
            "/api/v1/namespaces",
            j,
            json!({"metadata": {"name": "a.b"}}),
            422,
            "Invalid",
            "RFC 1123 label",
        ),
        bad(
            "missing namespace",
            "POST",
            "/api/v1/namespaces/ghost/configmaps",
            j,
            json!({"metadata": {"name": "k"}}),
            404,
            "NotFound",
            "namespaces \"ghost\" not found",
        ),
        bad(
            "malformed JSON",
            "POST",
            cms,
            j,
            Value::String("{\"metadata\": ".into()),
            400,
            "BadRequest",
            "cannot be handled as a ConfigMap",
        ),
        bad(
            "wrong kind",
            "POST",
            cms,
            j,
            json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "k"}}),
            400,
            "BadRequest",
            "but a ConfigMap was expected",
        ),
        bad(
            "namespace mismatch",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "k", "namespace": "default"}}),
            400,
            "BadRequest",
            "does not match the namespace",
        ),
        bad(
            "name mismatch",
            "PUT",
            &format!("{cms}/exists"),
            j,
            json!({"metadata": {"name": "other"}}),
            400,
            "BadRequest",
            "does not match the name on the URL",
        ),
        bad(
            "stale resourceVersion",
            "PUT",
            &format!("{cms}/exists"),
            j,
            json!({"metadata": {"name": "exists", "resourceVersion": stale_rv}}),
            409,
            "Conflict",
            "the object has been modified",
        ),
        bad(
            "stale resourceVersion in a patch",
            "PATCH",
            &format!("{cms}/exists"),
            merge,
            json!({"metadata": {"resourceVersion": stale_rv}}),
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"exists\"",
        ),
        bad(
            "put of a missing object",
            "PUT",
            &format!("{cms}/nope"),
            j,
            json!({"metadata": {"name": "nope"}}),
            404,
            "NotFound",
            "not found",
        ),
        bad(
            "custom resource PUT without resourceVersion",
            "PUT",
            cp,
            j,
            json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "spec": {}}),
            422,
            "Invalid",
            "must be specified for an update",
        ),
        bad(
            "bad MIG strategy",
            "PATCH",
            cp,
            merge,
            json!({"spec": {"mig": {"strategy": "half"}}}),
            422,
            "Invalid",
            "spec.mig.strategy: Unsupported value: \"half\"",
        ),
        bad(
            "unsupported patch type",
            "PATCH",
            &format!("{cms}/exists"),
            "text/plain",
            json!({}),
            415,
            "UnsupportedMediaType",
            "unknown format",
        ),
        bad(
            "json patch test fails",
            "PATCH",
            &format!("{cms}/exists"),
            "application/json-patch+json",
            json!([{"op": "test", "path": "/data/a", "value": "9"}]),
            422,
            "Invalid",
            "testing value /data/a failed",
        ),
        bad(
            "json patch not a list",
            "PATCH",
            &format!("{cms}/exists"),
            "application/json-patch+json",
            json!({"op": "add"}),
            400,
            "BadRequest",
            "must be a list",
        ),
        bad(
            "apply without fieldManager",
            "PATCH",
            &format!("{cms}/exists"),
            apply,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "exists"}}),
            422,
            "Invalid",
            "fieldManager: Required value",
        ),
        bad(
            "apply without kind",
            "PATCH",
            &format!("{cms}/exists?fieldManager=tf"),
            apply,
            json!({"metadata": {"name": "exists"}}),
            400,
            "BadRequest",
            "apiVersion must be set",
        ),
        bad(
            "apply conflict",
            "PATCH",
            &format!("{cms}/exists?fieldManager=tf"),
            apply,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "exists"}, "data": {"b": "2"}}),
            409,
            "Conflict",
            "Apply failed with 1 conflict: conflict with \"sandbox-test\" using v1 at 20",
        ),
        bad(
            "immutable ConfigMap",
            "PATCH",
            &format!("{cms}/frozen"),
            merge,
            json!({"data": {"a": "2"}}),
            422,
            "Invalid",
            "field is immutable when `immutable` is set",
        ),
        bad(
            "secret with bad base64",
            "POST",
            "/api/v1/namespaces/default/secrets",
            j,
            json!({"metadata": {"name": "s"}, "data": {"k": "!!"}}),
            400,
            "BadRequest",
            "illegal base64 data",
        ),
        bad(
            "daemonset selector mismatch",
            "POST",
            "/apis/apps/v1/namespaces/default/daemonsets",
            j,
            json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "c"}}}}}),
            422,
            "Invalid",
            "`selector` does not match template `labels`",
        ),
        bad(
            "bad label selector",
            "GET",
            &format!("{cms}?labelSelector=%3D%3Dx"),
            "",
            Value::Null,
            400,
            "BadRequest",
            "unable to parse requirement",
        ),
        bad(
            "unsupported field selector",
            "GET",
            &format!("{cms}?fieldSelector=spec.x%3D1"),
            "",
            Value::Null,
            400,
            "BadRequest",
            "field label not supported: spec.x",
        ),
        bad(
            "watch from a bad resourceVersion",
            "GET",
            &format!("{cms}?watch=true&resourceVersion=abc"),
            "",
            Value::Null,
            400,
            "BadRequest",
            "invalid resource version: abc",
        ),
        bad(
            "delete a protected namespace",
            "DELETE",
            "/api/v1/namespaces/kube-system",
            "",
            Value::Null,
            403,
            "Forbidden",
            "this namespace may not be deleted",
        ),
        bad(
            "apply body that is neither JSON nor YAML",
            "PATCH",
            &format!("{cms}/exists?fieldManager=tf"),
            apply,
            Value::String("kind: [unclosed".into()),
            400,
            "BadRequest",
            "cannot be handled as a ConfigMap",
        ),
        bad(
            "spec that is not an object",
            "PUT",
            "/api/v1/nodes/any",
            j,
            json!({"metadata": {"name": "any"}, "spec": "x"}),
            400,
            "BadRequest",
            "spec must be an object",
        ),
        bad(
            "create a pod (the sandbox runs no workloads)",
            "POST",
            "/api/v1/namespaces/default/pods",
            j,
            json!({"metadata": {"name": "p"}}),
            405,
            "MethodNotAllowed",
            "does not allow this method",
        ),
        bad(
            "delete collection",
            "DELETE",
            cms,
            "",
            Value::Null,
            405,
            "MethodNotAllowed",
            "does not allow this method",
        ),
        bad(
            "body too large",
            "POST",
            cms,
            j,
            Value::String(format!(
                "{{\"data\":{{\"k\":\"{}\"}}}}",
                "x".repeat(3 * 1024 * 1024 + 10)
            )),
            413,
            "RequestEntityTooLarge",
            "larger than",
        ),
        bad(
            "data over 1 MiB",
            "POST",
            cms,
            j,
            json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(1024 * 1024 + 1)}}),
            422,
            "Invalid",
            "Too long: must have at most 1048576 bytes",
        ),
    ];
    // Another cluster's token does not open this one.
    let eks = srv.token("eks", "sandbox-eks");
    let eks: &'static str = Box::leak(eks.into_boxed_str());
    table.push(Bad {
        token: Some(eks),
        ..bad(
            "another cluster's token",
            "GET",
            "/api/v1/nodes",
            "",
            Value::Null,
            401,
            "Unauthorized",
            "Unauthorized",
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
    let r = srv.call("GET", cp, None);
    assert_eq!((r.code, r.body["reason"].as_str()), (404, Some("NotFound")));
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

#[test]
fn watches_stream_changes_and_expire() {
    let srv = serve();
    let list = srv.call("GET", "/api/v1/namespaces/gpu-operator/configmaps", None);
    let rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Changes after the list's resourceVersion, filtered by label, then the stream ends at timeoutSeconds.
    srv.call(
        "POST",
        "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"metadata": {"name": "w1", "labels": {"w": "yes"}}})),
    );
    srv.call(
        "POST",
        "/api/v1/namespaces/gpu-operator/configmaps",
        Some(json!({"metadata": {"name": "w2"}})),
    );
    srv.patch(
        "/api/v1/namespaces/gpu-operator/configmaps/w1",
        "application/merge-patch+json",
        r#"{"data":{"a":"b"}}"#,
    );
    srv.call(
        "DELETE",
        "/api/v1/namespaces/gpu-operator/configmaps/w1",
        None,
    );
    let r = srv.call("GET", &format!("/api/v1/namespaces/gpu-operator/configmaps?watch=true&resourceVersion={rv}&labelSelector=w%3Dyes&timeoutSeconds=1"), None);
    assert_eq!(r.code, 200);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("event JSON"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"], "{text}");
    assert!(
        events
            .iter()
            .all(|e| e["object"]["metadata"]["name"] == "w1")
    );
    // Without a resourceVersion: the current objects first.
    let r = srv.call("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=1", None);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    assert!(
        text.lines().filter(|l| l.contains("\"ADDED\"")).count() >= 5,
        "{text}"
    );
    // History does not survive a restore: resuming from before it is 410 Expired.
    srv.api.restore(&srv.api.snapshot()).expect("restore");
    let r = srv.call("GET", &format!("/api/v1/namespaces/gpu-operator/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"), None);
    let text = r
        .body
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    let e: Value =
        serde_json::from_str(text.lines().next().unwrap_or_default()).expect("one event");
    assert_eq!(
        (
            e["type"].as_str(),
            e["object"]["code"].as_i64(),
            e["object"]["reason"].as_str()
        ),
        (Some("ERROR"), Some(410), Some("Expired"))
    );
}
