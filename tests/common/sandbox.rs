//! The sandbox served over real HTTP on 127.0.0.1 from a thread of the test process, so that a
//! provider started by terraform can reach it and the test can inspect and poke its world.

use std::time::Duration;

use fracgpu::sandbox::{Config, Sandbox};

pub struct Running {
    pub url: String,
    pub sandbox: Sandbox,
}

pub fn start(op_time: Duration) -> Running {
    let sandbox = Sandbox::open(Config {
        op_time,
        ..Config::default()
    })
    .expect("sandbox opens");
    let router = sandbox.router();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    let addr = rx.recv().expect("sandbox listening");
    Running {
        url: format!("http://{addr}"),
        sandbox,
    }
}

impl Running {
    /// The pools of the world, as (cloud, cluster, name) sorted.
    pub fn pools(&self) -> Vec<(String, String, String)> {
        let inv = self.sandbox.inventory();
        let mut out: Vec<(String, String, String)> = inv["pools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
                (s("cloud"), s("cluster"), s("name"))
            })
            .collect();
        out.sort();
        out
    }

    /// One pool's resource document as the cloud API shows it.
    pub fn pool(&self, name: &str) -> serde_json::Value {
        let inv = self.sandbox.inventory();
        inv["pools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .map(|p| p["resource"].clone())
            .unwrap_or(serde_json::Value::Null)
    }
}

/// The whole stack (clouds over HTTP, every cluster's Kubernetes API over HTTPS) served from a
/// thread of the test process, with one kubeconfig per cluster written to a temp dir.
pub struct RunningStack {
    pub url: String,
    pub kube_url: String,
    pub sandbox: Sandbox,
    pub kube: std::sync::Arc<fracgpu::sandbox::kube::KubeApi>,
    pub kubeconfig_dir: tempfile::TempDir,
    /// Keeps the runtime that serves the stack alive.
    _rt: std::sync::mpsc::Sender<()>,
}

pub fn start_stack() -> RunningStack {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let stack = rt
            .block_on(fracgpu::sandbox::stack::Stack::start(
                Config {
                    op_time: Duration::ZERO,
                    ..Config::default()
                },
                0,
            ))
            .expect("stack starts");
        tx.send(stack).ok();
        // Serve until the test drops its handle.
        let _ = stop_rx.recv();
        drop(rt);
    });
    let stack = rx.recv().expect("stack running");
    let dir = tempfile::tempdir().unwrap();
    stack.write_kubeconfigs(dir.path()).expect("kubeconfigs");
    RunningStack {
        url: stack.cloud_url(),
        kube_url: stack.kube_url(),
        sandbox: stack.sandbox,
        kube: stack.kube,
        kubeconfig_dir: dir,
        _rt: stop_tx,
    }
}

impl RunningStack {
    /// The kubeconfig of one cluster, e.g. ("aks", "sandbox-aks").
    pub fn kubeconfig(&self, cloud: &str, cluster: &str) -> std::path::PathBuf {
        self.kubeconfig_dir
            .path()
            .join(format!("{cloud}-{cluster}.kubeconfig"))
    }
}
