//! The provider's cloud and Kubernetes clients against the sandbox over real HTTP, without
//! terraform: request shapes, long-running operations, retries, errors (and moto for EKS).

mod cloud_aks;
mod cloud_eks;
mod cloud_gke;
mod cloud_lists;
mod request_costs;
mod sandbox_kube_client;
mod shared_reads;

/// A sandbox of `config` over real HTTP on loopback, its router wrapped by `layer` (a counting or
/// rewriting middleware, or none): the sandbox and its base URL.
async fn serve_sandbox(
    config: ::sandbox::Config,
    layer: impl FnOnce(axum::Router) -> axum::Router,
) -> (::sandbox::Sandbox, String) {
    let sb = ::sandbox::Sandbox::open(config).expect("sandbox");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = layer(sb.router());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (sb, base)
}
