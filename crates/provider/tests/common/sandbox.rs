//! The sandbox served over real HTTP on 127.0.0.1 from a thread of the test process, so that a
//! provider started by terraform can reach it and the test can inspect and poke its world.

use std::time::Duration;

use ::sandbox::{Config, Sandbox};

pub struct Running {
    pub url: String,
    pub sandbox: Sandbox,
}

/// The `fracgpu-sandbox` binary of this build, for tests that need the sandbox in a process of
/// its own (to kill it, or read its usage); see [`testkit::apiserver::sandbox_binary`].
pub fn binary() -> std::path::PathBuf {
    testkit::apiserver::sandbox_binary()
}

pub fn start(op_time: Duration) -> Running {
    start_with(Config {
        op_time,
        // The autoscalers act at once (their wait for more pods is tested on its own).
        pod_buffers: ::sandbox::PodBuffers::NONE,
        ..Config::default()
    })
}

/// A sandbox of any config (e.g. more clusters than the default world's three).
pub fn start_with(config: Config) -> Running {
    start_with_layer(config, |r| r)
}

/// The requests a sandbox was sent, as "METHOD path" (no query), in order.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A sandbox that records every request it is sent (see [`Seen`]).
pub fn start_counted(config: Config) -> (Running, Seen) {
    let seen = Seen::default();
    let counting = seen.clone();
    let running = start_with_layer(config, move |r| {
        r.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let line = format!("{} {}", req.method(), req.uri().path());
                counting.lock().unwrap().push(line);
                next.run(req)
            },
        ))
    });
    (running, seen)
}

/// A sandbox whose router `layer` wraps (to record or hold back requests).
pub fn start_with_layer(
    config: Config,
    layer: impl FnOnce(axum::Router) -> axum::Router,
) -> Running {
    let sandbox = Sandbox::open(config).expect("sandbox opens");
    let router = layer(sandbox.router());
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

/// The pools of an inventory, as (cloud, cluster, name) sorted.
fn pool_names(inv: &serde_json::Value) -> Vec<(String, String, String)> {
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

impl Running {
    /// The pools of the world, as (cloud, cluster, name) sorted.
    pub fn pools(&self) -> Vec<(String, String, String)> {
        pool_names(&self.sandbox.inventory())
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

/// The whole stack: cloud APIs plus every cluster's Kubernetes API, whose nodes mirror the pools.
pub struct RunningStack {
    pub url: String,
    pub stack: ::sandbox::stack::Stack,
    /// One kubeconfig per cluster (see [`RunningStack::kubeconfig`]).
    pub kubeconfig_dir: tempfile::TempDir,
}

pub fn start_stack(op_time: Duration) -> RunningStack {
    start_stack_with(Config {
        op_time,
        // The autoscalers act at once (their wait for more pods is tested on its own).
        pod_buffers: ::sandbox::PodBuffers::NONE,
        ..Config::default()
    })
}

/// The whole stack with any config.
pub fn start_stack_with(config: Config) -> RunningStack {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let stack = ::sandbox::stack::Stack::start(config, 0)
                .await
                .expect("stack starts");
            tx.send(stack).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let stack = rx.recv().expect("stack running");
    RunningStack {
        url: stack.cloud_url(),
        stack,
        kubeconfig_dir: tempfile::tempdir().unwrap(),
    }
}

impl RunningStack {
    /// The kubeconfig of one cluster, e.g. ("aks", "sandbox-aks"), written afresh so that
    /// clusters added after the start have one too.
    pub fn kubeconfig(&self, cloud: &str, cluster: &str) -> std::path::PathBuf {
        self.stack
            .write_kubeconfigs(self.kubeconfig_dir.path())
            .expect("kubeconfigs written");
        self.kubeconfig_dir
            .path()
            .join(format!("{cloud}-{cluster}.kubeconfig"))
    }

    /// The kubeconfig of each default cluster by cloud, as the JSON object a `kubeconfigs`
    /// variable takes: `{"aks": ".../aks-sandbox-aks.kubeconfig", "gke": ..., "eks": ...}`.
    pub fn kubeconfigs_var(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = ["aks", "gke", "eks"]
            .into_iter()
            .map(|cloud| {
                let path = self.kubeconfig(cloud, &format!("sandbox-{cloud}"));
                (cloud.to_string(), path.display().to_string().into())
            })
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// The pools of the world, as (cloud, cluster, name) sorted.
    pub fn pools(&self) -> Vec<(String, String, String)> {
        pool_names(&self.stack.sandbox.inventory())
    }

    /// The Node objects of one pool as its cluster's Kubernetes API holds them.
    pub fn nodes(&self, cloud: &str, cluster: &str, pool: &str) -> Vec<serde_json::Value> {
        let kube = &self.stack.kube;
        kube.pool_node_names(cloud, cluster, pool)
            .iter()
            .filter_map(|n| kube.object(cloud, cluster, "nodes", "", n))
            .collect()
    }
}

impl Running {
    /// Arms a fault (see `crates/sandbox/src/faults.rs`) on this sandbox.
    pub fn inject(&self, fault: serde_json::Value) -> serde_json::Value {
        inject(&self.url, fault)
    }

    /// The faults still armed, i.e. not yet consumed by a matching request.
    pub fn armed(&self) -> Vec<serde_json::Value> {
        armed(&self.url)
    }
}

/// One request to a sandbox's control plane at `url` (in-process or a `fracgpu-sandbox` child),
/// answering its status and JSON body.
pub fn control(
    method: &str,
    url: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut req = reqwest::Client::new()
            .request(method.parse().unwrap(), url)
            .timeout(Duration::from_secs(10));
        if let Some(b) = body {
            req = req.json(&b);
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let v = resp.json().await.unwrap_or(serde_json::Value::Null);
                (status, v)
            }
            Err(_) => (0, serde_json::Value::Null),
        }
    })
}

/// `POST {url}/_sandbox/faults`: the next `count` matching requests fail as `kind` says.
pub fn inject(url: &str, fault: serde_json::Value) -> serde_json::Value {
    let (status, body) = control(
        "POST",
        &format!("{url}/_sandbox/faults"),
        Some(fault.clone()),
    );
    assert_eq!(status, 201, "arming {fault}: {body}");
    body
}

/// `POST {url}/_sandbox/chaos`: seeded random faults (see `crates/sandbox/src/faults.rs`) until disarmed.
pub fn arm_chaos(url: &str, chaos: serde_json::Value) {
    let (status, body) = control(
        "POST",
        &format!("{url}/_sandbox/chaos"),
        Some(chaos.clone()),
    );
    assert_eq!(status, 201, "arming chaos {chaos}: {body}");
}

/// `DELETE {url}/_sandbox/chaos`: disarms chaos and answers what it did (`requests`, `injected`
/// per kind).
pub fn disarm_chaos(url: &str) -> serde_json::Value {
    let (status, body) = control("DELETE", &format!("{url}/_sandbox/chaos"), None);
    assert_eq!(status, 200, "{body}");
    body
}

pub fn armed(url: &str) -> Vec<serde_json::Value> {
    let (status, body) = control("GET", &format!("{url}/_sandbox/faults"), None);
    assert_eq!(status, 200, "{body}");
    body["faults"].as_array().cloned().unwrap_or_default()
}

/// `GET {url}/_sandbox/inventory`, or None when nothing answers.
pub fn inventory(url: &str) -> Option<serde_json::Value> {
    match control("GET", &format!("{url}/_sandbox/inventory"), None) {
        (200, v) => Some(v),
        _ => None,
    }
}
