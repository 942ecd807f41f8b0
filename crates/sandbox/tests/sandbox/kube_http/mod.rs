//! The sandbox's Kubernetes API over real HTTP: kubectl, raw requests, the digital twin and bad requests.

mod api;
mod bad_requests;
mod control_planes;
mod differential;
mod discovery;
mod kubectl;
mod rbac;
mod remote_twin;
mod standalone_plugin;
mod twin;

use testkit::tools::{self, Tool};

use crate::support::loopback;
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
    serve_with(KubeApi::new())
}

/// [`serve`] of a given API server (one made with the real server's OpenAPI documents).
fn serve_with(api: Arc<KubeApi>) -> Server {
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
            let (listener, addr) = loopback().await;
            tx.send(addr).expect("send");
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
        self.raw_with(method, path, ctype, body, token, &[])
    }

    /// A GET of the AKS cluster's `path` with an `Accept` header.
    fn get_accept(&self, path: &str, accept: &str) -> Resp {
        let full = format!("{}{path}", self.prefix("aks", "sandbox-aks"));
        self.raw_with("GET", &full, "", b"", None, &[("Accept", accept)])
    }

    /// [`Server::raw`] with more headers.
    fn raw_with(
        &self,
        method: &str,
        path: &str,
        ctype: &str,
        body: &[u8],
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
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
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
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
        instances: Vec::new(),
        cloud: "aks",
        cluster: "sandbox-aks".into(),
        pool: "gpua100".into(),
        node_count: 2,
        zones: vec![],
        labels,
        taints: vec![("sku".into(), "gpu".into(), "NoSchedule".into())],
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus_per_node: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: None,
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

fn gke_pool(
    pool: &str,
    gpus: u32,
    partition: Option<(&str, u32)>,
    sharing: Option<(&str, u32)>,
) -> PoolNodes {
    let mut labels = BTreeMap::from([(
        "cloud.google.com/gke-nodepool".to_string(),
        pool.to_string(),
    )]);
    // A partitioned pool names its MIG config, or the GPU operator's MIG manager undoes it.
    if let Some((p, _)) = partition {
        labels.insert("nvidia.com/mig.config".to_string(), format!("all-{p}"));
    }
    PoolNodes {
        instances: Vec::new(),
        cloud: "gke",
        cluster: "sandbox-gke".into(),
        pool: pool.into(),
        node_count: 1,
        zones: vec!["us-central1-a".into()],
        labels,
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
        os_image: None,
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
