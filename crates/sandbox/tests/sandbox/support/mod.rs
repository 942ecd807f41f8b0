//! What the sandbox's tests share: serving on a free loopback port, a sandbox served that way with
//! real HTTP calls to it through hyper's client, the clouds' request shapes, and moto.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sandbox::{Config, RecordingSink, Sandbox};
use serde_json::Value;

pub const SUB: &str = "00000000-0000-0000-0000-000000000000";

pub struct Srv {
    pub base: String,
    pub sb: Sandbox,
    pub sink: Arc<RecordingSink>,
    client: Client<HttpConnector, Full<Bytes>>,
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

pub async fn start(op_ms: u64) -> Srv {
    start_with(Config {
        op_time: Duration::from_millis(op_ms),
        // The autoscalers act at once (their wait for more pods is tested on its own).
        pod_buffers: sandbox::PodBuffers::NONE,
        ..Config::default()
    })
    .await
}

/// A listener on a free port of 127.0.0.1, and its address.
pub async fn loopback() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

/// Serves `router` on a free loopback port for as long as the test's runtime runs.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let (listener, addr) = loopback().await;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

pub async fn start_with(mut config: Config) -> Srv {
    let sink = Arc::new(RecordingSink::default());
    config.node_sink = Some(sink.clone());
    let sb = Sandbox::open(config).expect("sandbox opens");
    let addr = serve(sb.router()).await;
    Srv {
        base: format!("http://{addr}"),
        sb,
        sink,
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// A sandbox whose node sink is a Kubernetes API (`kube`, served under `/k8s/...` on the same
/// port), with the twin's cluster-autoscalers connected to it, as the stack runs them.
pub async fn start_twin(op_ms: u64) -> (Srv, Arc<sandbox::kube::KubeApi>) {
    let kube = sandbox::kube::KubeApi::new();
    for (cloud, cluster) in [
        ("aks", "sandbox-aks"),
        ("gke", "sandbox-gke"),
        ("eks", "sandbox-eks"),
    ] {
        kube.add_cluster(cloud, cluster);
    }
    let sb = Sandbox::open(Config {
        op_time: Duration::from_millis(op_ms),
        node_sink: Some(kube.clone()),
        // The autoscalers act at once (their wait for more pods is tested on its own).
        pod_buffers: sandbox::PodBuffers::NONE,
        ..Config::default()
    })
    .expect("sandbox opens");
    sandbox::stack::connect_autoscaler(&sb, &kube);
    let addr = serve(sb.router_with(kube.router())).await;
    let srv = Srv {
        base: format!("http://{addr}"),
        sb,
        sink: Arc::new(RecordingSink::default()),
        client: Client::builder(TokioExecutor::new()).build_http(),
    };
    (srv, kube)
}

impl Srv {
    /// A raw call; `Err` when the connection fails (e.g. an injected drop).
    pub async fn try_call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Resp, String> {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{}", self.base, path)
        };
        let mut b = Request::builder().method(method).uri(url);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("request failed: {e:?}"))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body failed: {e:?}"))?
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Resp {
            status,
            headers,
            body,
            text,
        })
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        self.try_call(method, path, headers, body)
            .await
            .expect("sandbox answers")
    }

    pub async fn azure_token(&self) -> String {
        let r = self
            .call(
                Method::POST,
                "/my-tenant/oauth2/v2.0/token",
                &[("content-type", "application/x-www-form-urlencoded")],
                b"grant_type=client_credentials&client_id=app&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default",
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.body["access_token"].as_str().expect("token").to_string()
    }

    pub async fn arm(&self, token: &str, method: Method, path: &str, body: Option<&Value>) -> Resp {
        let auth = format!("Bearer {token}");
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.call(
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            &bytes,
        )
        .await
    }

    pub async fn gke(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.call(
            method,
            path,
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer ya29.sandbox"),
            ],
            &bytes,
        )
        .await
    }

    pub async fn eks(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.call(method, path, &eks_headers("us-east-1"), &bytes)
            .await
    }
}

impl Srv {
    /// An Auto Scaling (awsQuery) call: `form` is the body after `Version=2011-01-01&`, signed for
    /// the `autoscaling` service in us-east-1.
    pub async fn autoscaling(&self, form: &str) -> Resp {
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=AKIDSANDBOX/20261130/us-east-1/autoscaling/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature={}",
            "0123456789abcdef".repeat(4)
        );
        let body = format!("Version=2011-01-01&{form}");
        self.call(
            Method::POST,
            "/",
            &[
                ("authorization", &auth),
                ("x-amz-date", "20261130T080000Z"),
                (
                    "content-type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                ),
            ],
            body.as_bytes(),
        )
        .await
    }
}

pub fn eks_headers(region: &str) -> [(&'static str, &'static str); 3] {
    let auth: &'static str = Box::leak(
        format!(
            "AWS4-HMAC-SHA256 Credential=AKIDSANDBOX/20261130/{region}/eks/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature={}",
            "0123456789abcdef".repeat(4)
        )
        .into_boxed_str(),
    );
    [
        ("authorization", auth),
        ("x-amz-date", "20261130T080000Z"),
        ("content-type", "application/json"),
    ]
}

pub fn aks_pools(cluster: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/{cluster}/agentPools"
    )
}

pub const API: &str = "api-version=2025-10-01";
pub const GKE_CLUSTER: &str =
    "/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke";

/// Poll `f` until it returns Some, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "condition not reached within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// moto's server (`python3 -m moto.server`) on a free loopback port, killed when dropped.
pub struct Moto {
    pub url: String,
    child: tokio::process::Child,
}

impl Moto {
    /// Starts moto and waits until it accepts connections.
    pub async fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = tokio::process::Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("moto starts");
        let mut up = false;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(up, "moto did not start");
        Moto {
            url: format!("http://127.0.0.1:{port}"),
            child,
        }
    }

    /// Stops moto and waits until it is gone.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
