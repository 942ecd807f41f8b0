//! A node's drain before its GPUs are repartitioned: evictions, which PodDisruptionBudgets can
//! refuse for a while (tried again every [`RETRY`]), then a wait until the evicted pods have
//! ended. The error is a diagnostic's summary and detail; the turn adds what became of the cordon.

use std::sync::{Mutex, PoisonError};

use super::turn::{RETRY, Turn, interrupted};
use crate::actions::request::{Halted, call};
use crate::cluster::drain::{Eviction, NodeView, PodRef};
use crate::operation::{Backoff, Check, Interrupted, OpCtx, Start, poll_until};

/// Why a drain did not finish: a diagnostic's summary and detail.
type Unfinished = (&'static str, String);

impl Turn<'_> {
    /// Evicts the node's pods until they are gone.
    pub(super) async fn drain(&self, node: &NodeView, ctx: &OpCtx) -> Result<(), Unfinished> {
        let name = node.name.as_str();
        let plan = call(ctx, "list the pods", self.c.drain_plan(name))
            .await
            .map_err(|h| halted(name, "list the pods", h))?;
        let mut evict = plan.evict.clone();
        if !plan.unowned.is_empty() {
            if !self.force {
                return Err((
                    "Pods without a controller",
                    format!(
                        "Node {name} runs pods no controller owns, which an eviction would \
                        delete for good: {}. Move them, or set force = true to evict them \
                        anyway.",
                        join(&plan.unowned)
                    ),
                ));
            }
            evict.extend(plan.unowned.iter().cloned());
        }
        self.evict(name, &evict, ctx).await?;
        let mut wait: Vec<PodRef> = evict;
        wait.extend(plan.terminating.iter().cloned());
        self.until_ended(name, &wait, ctx).await?;
        let n = wait.len();
        let pods = if n == 1 { "pod" } else { "pods" };
        self.say(name, format!("drained ({n} {pods} gone)")).await;
        Ok(())
    }

    /// Evicts `pods`, trying those a PodDisruptionBudget refused again every [`RETRY`] and
    /// telling terraform each new reason for a refusal.
    async fn evict(&self, name: &str, pods: &[PodRef], ctx: &OpCtx) -> Result<(), Unfinished> {
        // The pods still refused, and the last refusal's reason; then the reason last told.
        let refused = Mutex::new((pods.to_vec(), String::new()));
        let told = Mutex::new(String::new());
        let evicted = poll_until(
            ctx,
            Backoff::every(RETRY),
            "evictions".to_string(),
            Start::Now,
            |_| {
                let (refused, told) = (&refused, &told);
                async move {
                    let pending = lock(refused).0.clone();
                    let mut still = Vec::new();
                    let mut why = String::new();
                    for p in pending {
                        match call(ctx, "evict", self.c.evict(&p)).await {
                            Ok(Eviction::Done) => self.say(name, format!("evicted {p}")).await,
                            Ok(Eviction::Refused(m)) => {
                                why = m;
                                still.push(p);
                            }
                            Err(h) => {
                                return Ok(Check::Done(Err(halted(
                                    name,
                                    &format!("evict {p}"),
                                    h,
                                ))));
                            }
                        }
                    }
                    if still.is_empty() {
                        return Ok(Check::Done(Ok(())));
                    }
                    let new_reason = {
                        let mut told = lock(told);
                        let new = *told != why;
                        if new {
                            told.clone_from(&why);
                        }
                        new
                    };
                    if new_reason {
                        let what = format!("eviction of {} refused for now: {why}", join(&still));
                        self.say(name, what).await;
                    }
                    *lock(refused) = (still, why);
                    Ok::<_, Interrupted>(Check::Pending {
                        retry_after: None,
                        waiting_for: None,
                    })
                }
            },
        )
        .await;
        evicted.unwrap_or_else(|i| {
            let (pending, why) = &*lock(&refused);
            Err(interrupted(
                i,
                format!(
                    "Node {name} could not be drained: the eviction of {} was refused \
                    ({why}). A PodDisruptionBudget allows no disruption now: wait until \
                    its pods are healthy elsewhere, or raise node_timeout.",
                    join(pending)
                ),
            ))
        })
    }

    /// Waits until the evicted (and already terminating) pods have ended, looking every
    /// [`RETRY`].
    async fn until_ended(
        &self,
        name: &str,
        pods: &[PodRef],
        ctx: &OpCtx,
    ) -> Result<(), Unfinished> {
        // The pods the last look still found.
        let left = Mutex::new(Vec::new());
        let ended = poll_until(
            ctx,
            Backoff::every(RETRY),
            "evicted pods to end".to_string(),
            Start::Now,
            |_| {
                let left = &left;
                async move {
                    let what = "read the evicted pods";
                    Ok::<_, Interrupted>(
                        match call(ctx, what, self.c.pods_still_there(pods)).await {
                            Err(h) => Check::Done(Err(halted(name, what, h))),
                            Ok(still) if still.is_empty() => Check::Done(Ok(())),
                            Ok(still) => {
                                *lock(left) = still;
                                Check::Pending {
                                    retry_after: None,
                                    waiting_for: None,
                                }
                            }
                        },
                    )
                }
            },
        )
        .await;
        ended.unwrap_or_else(|i| {
            Err(interrupted(
                i,
                format!(
                    "Node {name} could not be drained: these pods were evicted but have \
                    not ended: {} (their termination grace period, or a finalizer).",
                    join(&lock(&left))
                ),
            ))
        })
    }
}

/// A request of the drain that did not succeed.
fn halted(name: &str, what: &str, h: Halted) -> Unfinished {
    match h {
        Halted::Kube(e) => (
            "Kubernetes API error",
            format!("Could not {what} on node {name}: {e}."),
        ),
        Halted::Interrupted(i) => interrupted(
            i,
            format!("Node {name} could not be drained: the request to {what} did not finish."),
        ),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each holder writes a whole value: a panic cannot leave one half-written.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn join(pods: &[PodRef]) -> String {
    pods.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
