//! `fracgpu-sandbox apiserver`: one bare cluster's Kubernetes API served at the root of its own
//! HTTPS address, the way envtest serves a kube-apiserver: no GPU operator, no twin, no
//! controllers, the admin's bearer token given on the command line, the sandbox's CA written
//! beside it. Tests that run on a real control plane where one is given run on this otherwise.
//!
//! Its state file plays etcd: every write is in the file before its answer leaves, so a process
//! killed with SIGKILL and started again on the same file is an API server restarted on its
//! etcd, with the same objects, resourceVersions and CA.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::kube::{KubeApi, OpenApiDocs, TlsListener};

/// The cluster's names inside the sandbox (the API is served at the root; these never show).
const CLOUD: &str = "kube";
const CLUSTER: &str = "apiserver";

/// What `fracgpu-sandbox apiserver` is told.
#[derive(Debug, PartialEq)]
pub struct Args {
    pub port: u16,
    /// Where `ca.crt` is written.
    pub dir: PathBuf,
    pub token: String,
    pub state: Option<PathBuf>,
    /// A real server's documents folder (see `kube::openapi`).
    pub openapi: Option<PathBuf>,
}

fn io(what: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", what.display())
}

/// The API server of `args`, its cluster restored from the state file when there is one.
fn build(args: &Args) -> Result<Arc<KubeApi>, String> {
    let docs = match &args.openapi {
        Some(dir) => OpenApiDocs::from_dir(dir)?,
        None => OpenApiDocs::default(),
    };
    let api = KubeApi::with_openapi(docs);
    match args.state.as_deref().filter(|p| p.exists()) {
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| io(path, e))?;
            let snapshot: serde_json::Value =
                serde_json::from_slice(&text).map_err(|e| io(path, e))?;
            api.restore(&snapshot).map_err(|e| io(path, e))?;
        }
        None => api.add_bare_cluster(CLOUD, CLUSTER, &args.token),
    }
    if let Some(path) = args.state.clone() {
        let weak = Arc::downgrade(&api);
        // Synchronously, before the write's answer: what was answered is what a restart finds.
        api.on_write(Arc::new(move || {
            if let Some(api) = weak.upgrade() {
                let bytes = serde_json::to_vec(&api.snapshot()).unwrap_or_default();
                if let Err(e) = crate::persist::write_atomic(&path, &bytes) {
                    eprintln!(
                        "fracgpu-sandbox apiserver: state file {}: {e}",
                        path.display()
                    );
                }
            }
        }));
    }
    std::fs::create_dir_all(&args.dir).map_err(|e| io(&args.dir, e))?;
    let ca = args.dir.join("ca.crt");
    crate::persist::write_atomic(&ca, api.ca_pem().as_bytes()).map_err(|e| io(&ca, e))?;
    Ok(api)
}

/// Serves until `stop` resolves.
pub async fn run(
    args: Args,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let api = build(&args)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| format!("127.0.0.1:{}: {e}", args.port))?;
    let addr = listener.local_addr()?;
    let tls = TlsListener::new(listener, &api.tls_identity())?;
    println!(
        "fracgpu-sandbox apiserver listening on https://{addr} (CA {})",
        args.dir.join("ca.crt").display()
    );
    // One line per request on stdout, as an API server's log at verbosity 2: what a failing
    // test's client asked for is in the log beside it.
    let app = api
        .root_router(CLOUD, CLUSTER)
        .layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let line = format!(
                    "{} {}",
                    req.method(),
                    req.uri()
                        .path_and_query()
                        .map(|p| p.as_str())
                        .unwrap_or("/")
                );
                let resp = next.run(req).await;
                println!("{line} {}", resp.status().as_u16());
                resp
            },
        ));
    tokio::select! {
        r = axum::serve(tls, app) => r?,
        _ = stop => {}
    }
    Ok(())
}
