//! A handle on a running sandbox's shared world: it opens the world (restoring the state file),
//! locks it for each request after settling what fell due, and afterwards tells the node sink,
//! arms timers and persists. The HTTP side (routes.rs) and the inventory use the handle and add
//! their own methods to it there, so the handle knows no route.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::config::{Config, Latency, PodBuffers};
use crate::context::Ctx;
use crate::dates::now_ms;
use crate::faults;
use crate::nodes::{NodeEvent, NodeSink};
use crate::persist::{SandboxError, read_world, write_atomic};
use crate::world::World;

struct Inner {
    world: Mutex<World>,
    op_ms: u64,
    pod_buffers: PodBuffers,
    autoscalers: bool,
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

/// A handle that does not keep the sandbox alive, for what the sandbox itself holds (its node
/// sink's hooks), so that the two do not keep each other forever.
#[derive(Clone)]
pub struct WeakSandbox(std::sync::Weak<Inner>);

impl WeakSandbox {
    pub fn upgrade(&self) -> Option<Sandbox> {
        self.0.upgrade().map(|inner| Sandbox { inner })
    }
}

impl Sandbox {
    /// Build the world, restoring it from `config.state_file` when that file exists.
    pub fn open(config: Config) -> Result<Sandbox, SandboxError> {
        let restored = config.state_file.as_ref().is_some_and(|p| p.exists());
        let world = match &config.state_file {
            Some(p) if p.exists() => {
                let mut w = read_world(p)?;
                w.ensure_clusters(&config.clusters);
                w
            }
            _ => World::new(&config.clusters),
        };
        let sb = Sandbox {
            inner: Arc::new(Inner {
                world: Mutex::new(world),
                op_ms: config.op_time.as_millis() as u64,
                pod_buffers: config.pod_buffers,
                autoscalers: config.autoscalers,
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

    pub fn downgrade(&self) -> WeakSandbox {
        WeakSandbox(Arc::downgrade(&self.inner))
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
        self.with_world_inner(fail_operation, false, f)
    }

    /// Let the twin's cluster-autoscalers look at every cluster now (after settling what fell
    /// due): the Kubernetes API calls it after each write, so that pending pods grow pools as soon
    /// as they are created.
    pub fn autoscale(&self) {
        self.with_world_inner(false, true, |_, _| ());
    }

    fn with_world_inner<R>(
        &self,
        fail_operation: bool,
        force_autoscale: bool,
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
            // The twin's cluster-autoscalers look at what changed: a pool that settled or was
            // retagged, or (asked by the Kubernetes API's write hook) new pending pods.
            if let Some(sink) = &self.inner.sink
                && self.inner.autoscalers
                && (force_autoscale || ctx.mutated || !ctx.events.is_empty())
            {
                crate::autoscaler::run(&mut w, &mut ctx, sink.as_ref(), &self.inner.pod_buffers);
            }
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
            // What fell due settles, and the autoscalers look again: a timer may be the end of
            // their wait for more pods.
            sb.autoscale();
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

    pub(crate) fn faults(&self) -> MutexGuard<'_, faults::Faults> {
        faults::lock(&self.inner.faults)
    }

    pub(crate) fn shared_faults(&self) -> faults::SharedFaults {
        self.inner.faults.clone()
    }
}
