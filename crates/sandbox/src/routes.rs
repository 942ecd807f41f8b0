//! The sandbox's one router: which path belongs to which API, and the fault layer in front of all of
//! them. Routing and fault rendering live together because both answer the same question, which
//! API a path is for: a fault injected into a request must look like an error of that API.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{any, get, post};

use super::api::{ApiRequest, CloudApi, handle};
use super::arm::{Arm, token};
use super::eks::{self, AutoScaling, Ec2, Eks};
use super::gke::{Gke, instance_group_manager};
use super::{Sandbox, faults, inventory, kube, util};

impl Sandbox {
    pub fn router(&self) -> Router {
        self.router_with(Router::new())
    }

    /// The sandbox's routes plus `extra` (e.g. the Kubernetes emulator under `/k8s/...`), all behind
    /// the fault-injection layer so faults can target any API.
    pub fn router_with(&self, extra: Router) -> Router {
        router(self, extra)
    }
}

/// The sandbox's routes plus `extra` (e.g. the Kubernetes emulator under `/k8s/...`), all behind
/// the fault layer so faults can target any API.
pub(crate) fn router(sb: &Sandbox, extra: Router) -> Router {
    let control = Router::new()
        .route("/_sandbox/faults", any(faults::faults_endpoint))
        .route("/_sandbox/chaos", any(faults::chaos_endpoint))
        .with_state(sb.shared_faults());
    let router = Router::new()
        .route("/_sandbox/health", get(|| async { "ok" }))
        .route("/_sandbox/inventory", get(inventory::endpoint))
        .route("/_sandbox/autoscaler", get(autoscaler_log))
        .route("/{tenant}/oauth2/v2.0/token", any(token))
        .route("/subscriptions/{*rest}", any(handle::<Arm>))
        .route("/v1/{*rest}", any(handle::<Gke>))
        .route("/compute/v1/{*rest}", get(instance_group_manager))
        // Amazon EC2's and Amazon EC2 Auto Scaling's Query endpoints: every action is a POST to
        // the root.
        .route("/", post(aws_query))
        .route("/clusters", any(handle::<Eks>))
        .route("/clusters/{*rest}", any(handle::<Eks>))
        .with_state(sb.clone())
        .merge(control)
        .merge(extra)
        .fallback(util::not_found);
    behind_faults(sb, router)
}

/// `POST /`: EC2 or Auto Scaling, by the service the request's SigV4 scope names (`eks::is_ec2`);
/// a request without a readable scope goes to Auto Scaling, which refuses it in its shape.
async fn aws_query(state: State<Sandbox>, req: ApiRequest) -> Response {
    if eks::is_ec2(&req.headers) {
        handle::<Ec2>(state, req).await
    } else {
        handle::<AutoScaling>(state, req).await
    }
}

/// `GET /_sandbox/autoscaler`: the twin's cluster-autoscaler decisions, oldest first
/// (`autoscaler/log.rs`).
async fn autoscaler_log(State(sb): State<Sandbox>) -> Response {
    let body = sb.with_world(|w, _| serde_json::json!({"decisions": w.autoscaler.decisions}));
    util::json_response(StatusCode::OK, &body)
}

/// `router` behind the sandbox's fault layer: faults armed on the sandbox apply to its requests.
pub(crate) fn behind_faults(sb: &Sandbox, router: Router) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        sb.clone(),
        fault_layer,
    ))
}

async fn fault_layer(State(sb): State<Sandbox>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with("/_sandbox/") {
        return next.run(req).await;
    }
    let latency = sb.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency.draw()).await;
    }
    let fault = sb.faults().take(req.method(), &path);
    let ec2 = path == "/" && eks::is_ec2(req.headers());
    match fault {
        Some(fault) => faults::apply(fault, req, next, |status| injected(&path, ec2, status)).await,
        None => next.run(req).await,
    }
}

/// An injected failure in the error shape of the API the path belongs to (`ec2`: the root's request
/// is for EC2, not Auto Scaling). Compute Engine paths and the Azure AD token endpoint answer in
/// ARM's shape, as they always have here.
fn injected(path: &str, ec2: bool, status: StatusCode) -> Response {
    use axum::response::IntoResponse;
    let message = format!("sandbox fault injection: {status}");
    if path.starts_with("/v1/") {
        Gke::injected(status, message).into_response()
    } else if path.starts_with("/k8s/") {
        kube::http::injected(status, message)
    } else if path == "/" && ec2 {
        Ec2::injected(status, message).into_response()
    } else if path == "/" {
        AutoScaling::injected(status, message).into_response()
    } else if path.starts_with("/clusters") {
        Eks::injected(status, message).into_response()
    } else {
        Arm::injected(status, message).into_response()
    }
}
