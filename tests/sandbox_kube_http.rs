//! The sandbox's Kubernetes API over real HTTP: kubectl, raw requests, the digital twin and bad requests.

use fracgpu::sandbox::kube::{KubeApi, PoolNodes};
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

fn kubectl_path() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/kubectl");
    if p.exists() {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.exists())
    })
}

struct Kubectl {
    bin: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(srv: &Server, cloud: &str, cluster: &str) -> Option<Kubectl> {
        let Some(bin) = kubectl_path() else {
            eprintln!("SKIPPED: kubectl is not installed (looked in /usr/bin and PATH)");
            return None;
        };
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
    let table = k.ok(&["get", "nodes"]);
    assert!(table.contains(&name), "{table}");

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
        "--validate=false",
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
        "--validate=false",
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
        "--validate=false",
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
        "--validate=false",
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
        "--validate=false",
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
        "--validate=false",
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

#[test]
#[ignore]
fn debug_kubectl() {
    let srv = serve();
    let k = Kubectl::new(&srv, "aks", "sandbox-aks").unwrap();
    eprintln!("{}", std::fs::read_to_string(&k.config).unwrap());
    let args: Vec<String> = std::env::var("KARGS")
        .unwrap()
        .split(' ')
        .map(str::to_string)
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, o, e) = k.run(&a);
    eprintln!("{o}\n{e}");
}
