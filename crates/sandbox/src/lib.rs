//! Local emulators of the cloud APIs the provider calls: Azure Resource Manager agent pools (with
//! its token endpoint), GKE v1 node pools and EKS managed node groups, plus fault injection, an
//! inventory and state persistence. Served by `fracgpu-sandbox` on one loopback port; `demo` runs the
//! README's quick start against it.
//!
//! The sandbox is an independent oracle: every request and response type here is written from the
//! clouds' public API documents and never shared with the provider's clients, so a mapping bug in the
//! provider cannot pass on both sides. Operations are asynchronous like the real services: a mutation
//! puts a pool in a transitional state that settles after `Config::op_time` (zero allowed), either by
//! a timer or by the next request that looks at the world, whichever comes first.
//!
//! Routes (one axum `Router`, see [`Sandbox::router`] and `routes.rs`):
//! - `POST /{tenant}/oauth2/v2.0/token`: Azure AD client-credentials tokens (`arm/token.rs`)
//! - `/subscriptions/...`: ARM agentPools and the async operation documents (`arm/`)
//! - `/v1/projects/...`: GKE v1 clusters, nodePools and operations (`gke/`)
//! - `/clusters/...`: EKS clusters, node groups and updates (`eks/`)
//! - `/_sandbox/faults`, `/_sandbox/chaos`: fault injection (`faults.rs`); `/_sandbox/inventory`
//!   (`inventory.rs`), `/_sandbox/health`: the control plane
//! - `/k8s/{cloud}/{cluster}/...` is reserved for the Kubernetes emulator ([`kube`], built separately),
//!   mounted with [`Sandbox::router_with`] and fed pools' nodes through a [`NodeSink`].
//!
//! Every cloud is reached the same way (`api.rs`) and its operations finish the same way
//! (`operations.rs`); the modules of a cloud hold only what its public API makes different.

mod api;
mod arm;
mod catalog;
mod dates;
pub mod demo;
mod eks;
mod faults;
mod gke;
mod inventory;
pub mod kube;
mod nodes;
mod operations;
mod routes;
pub mod stack;
mod util;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use serde::{Deserialize, Serialize};

use dates::now_ms;

pub use nodes::{NodeEvent, NodeSink, PoolNodes, RecordingSink};

/// How a sandbox starts.
#[derive(Clone)]
pub struct Config {
    /// How long every create/update/delete operation takes before it settles. Default 2 s; zero allowed.
    pub op_time: Duration,
    /// Where the world is persisted (atomic writes) and restored from on start.
    pub state_file: Option<PathBuf>,
    /// Told about every pool that reaches a terminal state or is deleted.
    pub node_sink: Option<Arc<dyn NodeSink>>,
    /// Clusters of the world when no state file exists yet.
    pub clusters: Vec<ClusterSpec>,
    /// Added before every cloud and Kubernetes API answer (not the `/_sandbox` control plane), as
    /// the round trip of a real cloud: ARM, GKE and EKS answer a GET in tens to hundreds of
    /// milliseconds. Default zero.
    pub latency: Latency,
}

/// A delay added to every answer: `base` plus a uniform draw in `0..=jitter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub base: Duration,
    pub jitter: Duration,
}

impl Latency {
    pub fn is_zero(&self) -> bool {
        self.base.is_zero() && self.jitter.is_zero()
    }

    /// One request's delay.
    pub(crate) fn draw(&self) -> Duration {
        let jitter = self.jitter.as_micros() as u64;
        let extra = if jitter == 0 {
            0
        } else {
            fastrand::u64(0..=jitter)
        };
        self.base + Duration::from_micros(extra)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            op_time: Duration::from_secs(2),
            state_file: None,
            node_sink: None,
            clusters: ClusterSpec::defaults(),
            latency: Latency::default(),
        }
    }
}

impl Config {
    /// A config whose operations settle at once, for fast tests.
    pub fn instant() -> Self {
        Config {
            op_time: Duration::ZERO,
            ..Config::default()
        }
    }
}

/// A cluster of the world. Node pools live inside clusters; clusters themselves are fixed.
/// In a `--clusters` file: `[{"cloud": "aks", "resource_group": "rg", "name": "c"},
/// {"cloud": "gke", "project": "p", "location": "europe-west4", "name": "c"},
/// {"cloud": "eks", "region": "eu-west-1", "name": "c"}]` (AKS subscription and location default to
/// the sandbox subscription and eastus). A GKE location that is a region makes a regional cluster
/// in three zones (`<region>-a`, `-b`, `-c`), one that is a zone a zonal cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cloud", rename_all = "lowercase")]
pub enum ClusterSpec {
    Aks {
        subscription: String,
        resource_group: String,
        name: String,
        location: String,
    },
    Gke {
        project: String,
        location: String,
        name: String,
    },
    Eks {
        region: String,
        name: String,
        /// The cluster's "Managed node groups per cluster" quota (L-6D54EA21) when it has been
        /// raised through Service Quotas; 30, EKS's default, when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodegroup_quota: Option<usize>,
    },
}

impl ClusterSpec {
    /// The default world of the README and the acceptance tests.
    pub fn defaults() -> Vec<ClusterSpec> {
        vec![
            ClusterSpec::Aks {
                subscription: DEFAULT_SUBSCRIPTION.into(),
                resource_group: "sandbox-rg".into(),
                name: "sandbox-aks".into(),
                location: "eastus".into(),
            },
            ClusterSpec::Gke {
                project: "sandbox-project".into(),
                location: "us-central1".into(),
                name: "sandbox-gke".into(),
            },
            ClusterSpec::Eks {
                region: "us-east-1".into(),
                name: "sandbox-eks".into(),
                nodegroup_quota: None,
            },
        ]
    }

    /// The default world with the EKS cluster's node group quota raised to `quota`, as Service
    /// Quotas allows, for worlds of more node groups than EKS's default of 30.
    pub fn defaults_with_nodegroup_quota(quota: usize) -> Vec<ClusterSpec> {
        let mut clusters = ClusterSpec::defaults();
        for c in &mut clusters {
            if let ClusterSpec::Eks {
                nodegroup_quota, ..
            } = c
            {
                *nodegroup_quota = Some(quota);
            }
        }
        clusters
    }
}

pub const DEFAULT_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
/// The fake AWS account id of every ARN the sandbox makes.
pub(crate) const AWS_ACCOUNT: &str = "123456789012";

/// Everything the emulators hold. Serialized as the `--state` file.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct World {
    /// Public, unlike the other clouds, because the provider's tests reach into it through
    /// [`Sandbox::with_world`]: the tokens Azure AD issued, and pools removed behind Terraform's back.
    pub aks: arm::AksWorld,
    pub(crate) gke: gke::GkeWorld,
    pub(crate) eks: eks::EksWorld,
    /// Counter for operation ids, so they stay unique across restarts.
    pub(crate) next_id: u64,
    /// Pools made per "cloud/cluster/name" (accepted creates, not retries answered with the same
    /// pool), so a test can prove that no create was duplicated.
    #[serde(default)]
    pub(crate) creates: std::collections::BTreeMap<String, u64>,
    /// Create requests that reached a cluster, per "cloud/cluster/name", whatever the answer
    /// (accepted, refused by a quota, a conflict, an idempotent replay): with `creates`, it shows
    /// how often a client retried.
    #[serde(default)]
    pub(crate) create_requests: std::collections::BTreeMap<String, u64>,
    /// Requests a cluster refused because of other operations in flight, per
    /// "cloud/cluster/status" (GKE's RESOURCE_EXHAUSTED quota and FAILED_PRECONDITION "operation in
    /// progress"), so a test can prove that a client waited its turn instead of being refused.
    #[serde(default)]
    pub(crate) refused: std::collections::BTreeMap<String, u64>,
}

impl World {
    pub(crate) fn new(clusters: &[ClusterSpec]) -> World {
        let mut w = World::default();
        w.ensure_clusters(clusters);
        w
    }

    /// Add the clusters that the world does not have yet (a restored world keeps its own pools).
    pub(crate) fn ensure_clusters(&mut self, clusters: &[ClusterSpec]) {
        for c in clusters {
            match c {
                ClusterSpec::Aks {
                    subscription,
                    resource_group,
                    name,
                    location,
                } => {
                    if !self.aks.has_cluster(subscription, resource_group, name) {
                        self.aks
                            .add_cluster(subscription, resource_group, name, location)
                    }
                }
                ClusterSpec::Gke {
                    project,
                    location,
                    name,
                } => {
                    if !self
                        .gke
                        .clusters
                        .contains_key(&format!("{project}/{location}/{name}"))
                    {
                        self.gke.add_cluster(project, location, name)
                    }
                }
                ClusterSpec::Eks {
                    region,
                    name,
                    nodegroup_quota,
                } => {
                    if !self.eks.clusters.contains_key(&format!("{region}/{name}")) {
                        self.eks.add_cluster(region, name, *nodegroup_quota)
                    }
                }
            }
        }
    }

    /// Counts a create that made a pool (see [`World::creates`]).
    pub(crate) fn count_create(&mut self, cloud: &str, cluster: &str, pool: &str) {
        *self
            .creates
            .entry(format!("{cloud}/{cluster}/{pool}"))
            .or_insert(0) += 1;
    }

    /// Counts a create request (see [`World::create_requests`]).
    pub(crate) fn count_create_request(&mut self, cloud: &str, cluster: &str, pool: &str) {
        *self
            .create_requests
            .entry(format!("{cloud}/{cluster}/{pool}"))
            .or_insert(0) += 1;
    }

    /// Counts a refusal (see [`World::refused`]).
    pub(crate) fn count_refused(&mut self, cloud: &str, cluster: &str, status: &str) {
        *self
            .refused
            .entry(format!("{cloud}/{cluster}/{status}"))
            .or_insert(0) += 1;
    }

    /// The nodes of every pool that has nodes now: created and not failed at creation (pools being
    /// updated or deleted still have their nodes).
    pub(crate) fn current_nodes(&self) -> Vec<PoolNodes> {
        let mut out = Vec::new();
        for c in self.aks.clusters.values() {
            for p in c.pools.values().filter(|p| {
                matches!(
                    p.provisioning_state.as_str(),
                    "Succeeded" | "Updating" | "Deleting"
                )
            }) {
                out.push(arm::pool_nodes(&c.name, p));
            }
        }
        for c in self.gke.clusters.values() {
            for p in c.pools.values().filter(|p| {
                matches!(
                    p.status.as_str(),
                    "RUNNING" | "RECONCILING" | "STOPPING" | "RUNNING_WITH_ERROR"
                )
            }) {
                out.push(gke::pool_nodes(&c.name, &c.zones(), p));
            }
        }
        for c in self.eks.clusters.values() {
            for p in c.nodegroups.values().filter(|p| {
                matches!(
                    p.status.as_str(),
                    "ACTIVE" | "UPDATING" | "DELETING" | "DEGRADED" | "DELETE_FAILED"
                )
            }) {
                out.push(eks::pool_nodes(&c.name, p));
            }
        }
        out
    }

    fn pending_deadlines(&self) -> Vec<u64> {
        use operations::Due;
        let mut d: Vec<u64> = self
            .aks
            .pending
            .iter()
            .map(Due::deadline)
            .chain(self.gke.pending.iter().map(Due::deadline))
            .chain(self.eks.pending.iter().map(Due::deadline))
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// Finish every operation whose time has come. Returns whether anything changed.
    fn settle(&mut self, now: u64, events: &mut Vec<NodeEvent>) -> bool {
        let a = operations::settle(&mut self.aks, now, events);
        let g = operations::settle(&mut self.gke, now, events);
        let e = operations::settle(&mut self.eks, now, events);
        a | g | e
    }
}

/// The per-request context a handler gets with the locked world.
pub struct Ctx {
    pub(crate) now: u64,
    pub(crate) op_ms: u64,
    /// The next matching mutation must end Failed (fault injection).
    pub(crate) fail_operation: bool,
    events: Vec<NodeEvent>,
    mutated: bool,
    wake_at: Option<u64>,
    next_id: u64,
}

impl Ctx {
    /// Record that the world changed (persist after the request) and that an operation is due at `deadline`.
    pub(crate) fn schedule(&mut self, deadline: u64) {
        self.mutated = true;
        self.wake_at = Some(self.wake_at.map_or(deadline, |w| w.min(deadline)));
    }
    pub(crate) fn mutated(&mut self) {
        self.mutated = true;
    }
    pub(crate) fn deadline(&self) -> u64 {
        self.now + self.op_ms
    }
    /// A fresh, unique id for an operation or update.
    pub(crate) fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

struct Inner {
    world: Mutex<World>,
    op_ms: u64,
    latency: Mutex<Latency>,
    sink: Option<Arc<dyn NodeSink>>,
    faults: faults::SharedFaults,
    state_file: Option<PathBuf>,
    /// Version of the last snapshot written, so an older snapshot never overwrites a newer one.
    written: Mutex<u64>,
    version: AtomicU64,
}

/// A handle on a running sandbox's shared world.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub enum SandboxError {
    Io(PathBuf, std::io::Error),
    Corrupt(PathBuf, serde_json::Error),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            SandboxError::Corrupt(p, e) => {
                write!(f, "{}: not a sandbox state file: {e}", p.display())
            }
        }
    }
}

impl std::error::Error for SandboxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SandboxError::Io(_, e) => Some(e),
            SandboxError::Corrupt(_, e) => Some(e),
        }
    }
}

impl Sandbox {
    /// Build the world, restoring it from `config.state_file` when that file exists.
    pub fn open(config: Config) -> Result<Sandbox, SandboxError> {
        let restored = config.state_file.as_ref().is_some_and(|p| p.exists());
        let world = match &config.state_file {
            Some(p) if p.exists() => {
                let text = std::fs::read(p).map_err(|e| SandboxError::Io(p.clone(), e))?;
                let mut w: World = serde_json::from_slice(&text)
                    .map_err(|e| SandboxError::Corrupt(p.clone(), e))?;
                w.ensure_clusters(&config.clusters);
                w
            }
            _ => World::new(&config.clusters),
        };
        let sb = Sandbox {
            inner: Arc::new(Inner {
                world: Mutex::new(world),
                op_ms: config.op_time.as_millis() as u64,
                latency: Mutex::new(config.latency),
                sink: config.node_sink,
                faults: faults::SharedFaults::default(),
                state_file: config.state_file,
                written: Mutex::new(0),
                version: AtomicU64::new(0),
            }),
        };
        // Operations that were in flight when the previous process stopped finish now if their time
        // has passed; the others get timers (when a runtime is running) or settle on the next request.
        let deadlines = sb.with_world(|w, _| w.pending_deadlines());
        for d in deadlines {
            sb.wake_at(d);
        }
        // A restored world's nodes are told to the sink again: it may be new (an in-memory twin).
        if restored {
            sb.replay_nodes();
        }
        Ok(sb)
    }

    pub fn router(&self) -> Router {
        self.router_with(Router::new())
    }

    /// The sandbox's routes plus `extra` (e.g. the Kubernetes emulator under `/k8s/...`), all behind
    /// the fault-injection layer so faults can target any API.
    pub fn router_with(&self, extra: Router) -> Router {
        routes::router(self, extra)
    }

    pub fn op_time(&self) -> Duration {
        Duration::from_millis(self.inner.op_ms)
    }

    pub fn latency(&self) -> Latency {
        *self.inner.latency.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the delay of the answers from now on (a benchmark compares latencies on one world).
    pub fn set_latency(&self, latency: Latency) {
        *self.inner.latency.lock().unwrap_or_else(|e| e.into_inner()) = latency;
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        // A panic while holding the lock must not take the whole sandbox down.
        self.inner.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on the locked world after settling due operations; afterwards deliver node events,
    /// arm timers for new operations and persist the world if it changed.
    pub fn with_world<R>(&self, f: impl FnOnce(&mut World, &mut Ctx) -> R) -> R {
        self.with_world_opts(false, f)
    }

    pub(crate) fn with_world_opts<R>(
        &self,
        fail_operation: bool,
        f: impl FnOnce(&mut World, &mut Ctx) -> R,
    ) -> R {
        let (r, events, wake_at, snapshot) = {
            let mut w = self.lock();
            let now = now_ms();
            let mut ctx = Ctx {
                now,
                op_ms: self.inner.op_ms,
                fail_operation,
                events: Vec::new(),
                mutated: false,
                wake_at: None,
                next_id: w.next_id,
            };
            ctx.mutated |= w.settle(now, &mut ctx.events);
            let r = f(&mut w, &mut ctx);
            w.next_id = w.next_id.max(ctx.next_id);
            let snapshot = if ctx.mutated && self.inner.state_file.is_some() {
                let v = self.inner.version.fetch_add(1, Ordering::SeqCst) + 1;
                serde_json::to_vec_pretty(&*w).ok().map(|s| (v, s))
            } else {
                None
            };
            (r, ctx.events, ctx.wake_at, snapshot)
        };
        if let Some(sink) = &self.inner.sink {
            for ev in &events {
                match ev {
                    NodeEvent::Changed(n) => sink.pool_changed(n),
                    NodeEvent::Deleted {
                        cloud,
                        cluster,
                        pool,
                    } => sink.pool_deleted(cloud, cluster, pool),
                }
            }
        }
        if let Some(at) = wake_at {
            self.wake_at(at);
        }
        if let (Some((v, bytes)), Some(path)) = (snapshot, &self.inner.state_file) {
            let mut written = self.inner.written.lock().unwrap_or_else(|e| e.into_inner());
            if v > *written {
                if let Err(e) = write_atomic(path, &bytes) {
                    eprintln!(
                        "fracgpu-sandbox: cannot write state {}: {e}",
                        path.display()
                    );
                }
                *written = v;
            }
        }
        r
    }

    fn wake_at(&self, at: u64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let sb = self.clone();
        rt.spawn(async move {
            let now = now_ms();
            if at > now {
                tokio::time::sleep(Duration::from_millis(at - now)).await;
            }
            sb.with_world(|_, _| ());
        });
    }

    /// Tell the node sink about every pool that has nodes now (as `pool_changed`), e.g. after the
    /// world was restored from a state file. Returns how many pools were reported.
    pub fn replay_nodes(&self) -> usize {
        let nodes = self.with_world(|w, _| w.current_nodes());
        if let Some(sink) = &self.inner.sink {
            for n in &nodes {
                sink.pool_changed(n);
            }
        }
        nodes.len()
    }

    /// Settle due operations now (tests use it to avoid waiting for a timer task).
    pub fn settle(&self) {
        self.with_world(|_, _| ());
    }

    /// Every cluster and pool of every cloud in a stable JSON shape (see `/_sandbox/inventory`).
    pub fn inventory(&self) -> serde_json::Value {
        self.with_world(|w, _| inventory::inventory_of(w))
    }

    pub(crate) fn faults(&self) -> MutexGuard<'_, faults::Faults> {
        faults::lock(&self.inner.faults)
    }

    pub(crate) fn shared_faults(&self) -> faults::SharedFaults {
        self.inner.faults.clone()
    }
}

/// Write `bytes` to `path` so that a reader (or a crash) sees either the old or the new file, never a
/// torn one: write a temporary file beside it, flush it to disk, then rename over the target.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
