//! The pool's work on its cluster: write, read back, delete, each request answered by a
//! diagnostic that names where the cluster access is set.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::cluster::delivery::FIELD_MANAGER;
use crate::cluster::{self as k, Cluster, KubeError};
use crate::operation::{Backoff, Check, Cut, Interrupted, OpCtx, Start, poll_until};
use tfplugin::{AttrPath, Diagnostic};

use super::model::{Args, DECLARATION, Desired, key, pretty, project};
use super::provisioner::node_class::NODE_POOL;
use super::resource::KarpenterNodePool;

/// How often a delete looks whether Karpenter's finalizer let an object go.
const GONE_POLL: Duration = Duration::from_millis(500);

pub(super) fn kube_diagnostic(what: &str, access: Option<&str>, e: &KubeError) -> Diagnostic {
    let check = match access {
        Some(a) => format!("check {}", AttrPath::parse(a)),
        None => "check the provider's `kubernetes` block (or KUBECONFIG, ~/.kube/config)".into(),
    };
    let d = Diagnostic::error(
        "Kubernetes API error",
        format!("Could not {what}: {e}. If the cluster is up, {check}."),
    );
    match access {
        Some(a) => d.at(AttrPath::parse(a)),
        None => d,
    }
}

/// Whether an object carries the label every object the provider makes has.
fn ours(live: &J) -> bool {
    live.pointer("/metadata/labels/app.kubernetes.io~1managed-by")
        .and_then(J::as_str)
        == Some(FIELD_MANAGER)
}

/// A NodePool to look up by name.
pub(super) fn node_pool_ref(name: &str) -> J {
    json!({"apiVersion": NODE_POOL.api_version, "kind": NODE_POOL.kind, "metadata": {"name": name}})
}

impl KarpenterNodePool {
    pub(super) async fn connect(&self, args: Option<&Args>) -> Result<Cluster, Diagnostic> {
        let own = args
            .and_then(|a| a.kubernetes.as_ref())
            .map(|k| k.settings())
            .unwrap_or_default();
        k::connect(&own.or(&self.state.settings().kubernetes))
            .await
            .map_err(|e| kube_diagnostic("connect to the cluster", args.and_then(Args::access), &e))
    }
}

/// Writes a new pool. A NodePool of that name, or another object of the pool's names that the
/// provider did not make, is refused: server-side apply would take it over silently. Objects
/// the provider made for a pool of this name (left by a delete cut short) are taken back.
/// `written` is set once the first write is sent.
pub(super) async fn create(
    c: &Cluster,
    args: &Args,
    desired: &Desired,
    written: &std::sync::atomic::AtomicBool,
) -> Result<(), Diagnostic> {
    let access = args.access();
    for obj in desired.owned() {
        let live = c
            .karpenter_object(&obj)
            .await
            .map_err(|e| kube_diagnostic("read the cluster's Karpenter objects", access, &e))?;
        let Some(live) = live else { continue };
        let name = key(&obj);
        if obj["kind"] == "NodePool" {
            return Err(Diagnostic::error(
                "NodePool already exists",
                format!(
                    "The cluster has a {name} already. Import it (`terraform import \
                    <address> {}`) if this provider made it, or choose another name.",
                    desired.pool.name
                ),
            )
            .at(AttrPath::attr("name")));
        }
        if !ours(&live) {
            return Err(Diagnostic::error(
                "Object already exists",
                format!(
                    "The pool makes {name}, but the cluster has one that this provider did not \
                    make (it lacks the label app.kubernetes.io/managed-by={FIELD_MANAGER}). \
                    Delete it, or choose another name."
                ),
            )
            .at(AttrPath::attr("name")));
        }
    }
    written.store(true, std::sync::atomic::Ordering::Relaxed);
    c.apply_karpenter(&desired.to_write(args))
        .await
        .map_err(|e| kube_diagnostic("write the pool's Karpenter objects", access, &e))
}

/// Writes the new objects, then deletes those the old declaration made and the new one does not
/// (an overlay of a GPU count no longer allowed, a node class no longer made).
pub(super) async fn update(
    c: &Cluster,
    args: &Args,
    desired: &Desired,
    old: Option<&Desired>,
) -> Result<(), Diagnostic> {
    let access = args.access();
    c.apply_karpenter(&desired.to_write(args))
        .await
        .map_err(|e| kube_diagnostic("write the pool's Karpenter objects", access, &e))?;
    let keep: BTreeSet<String> = desired.owned().iter().map(key).collect();
    let stale: Vec<J> = old
        .map(Desired::owned)
        .unwrap_or_default()
        .into_iter()
        .filter(|o| !keep.contains(&key(o)))
        .collect();
    c.delete_karpenter(&stale)
        .await
        .map_err(|e| kube_diagnostic("delete the pool's old objects", access, &e))
}

/// What the cluster holds of each object, by `Kind/name`; None when the NodePool is gone.
pub(super) async fn observe(
    c: &Cluster,
    args: &Args,
    desired: &Desired,
) -> Result<Option<BTreeMap<String, String>>, Diagnostic> {
    let mut out = BTreeMap::new();
    for obj in desired.owned() {
        let live = c
            .karpenter_object(&obj)
            .await
            .map_err(|e| kube_diagnostic("read the pool's Karpenter objects", args.access(), &e))?;
        match live {
            Some(live) => {
                out.insert(key(&obj), pretty(&project(&live, &obj)));
            }
            None if obj["kind"] == "NodePool" => return Ok(None),
            None => {}
        }
    }
    Ok(Some(out))
}

/// The NodePool of that name as the cluster holds it.
pub(super) async fn node_pool(c: &Cluster, name: &str) -> Result<Option<J>, KubeError> {
    c.karpenter_object(&node_pool_ref(name)).await
}

/// Every NodePool of the cluster, ordered by name; None where it serves none (no Karpenter).
pub(super) async fn node_pools(c: &Cluster) -> Result<Option<Vec<J>>, KubeError> {
    c.karpenter_objects(&json!({"apiVersion": NODE_POOL.api_version, "kind": NODE_POOL.kind}))
        .await
}

/// The declaration a NodePool carries, None when it has none.
pub(super) fn declared(live: &J) -> Option<&str> {
    live.pointer(&format!(
        "/metadata/annotations/{}",
        DECLARATION.replace('/', "~1")
    ))
    .and_then(J::as_str)
}

/// Deletes the objects, the NodePool first, each waited for until gone: Karpenter's
/// finalizers drain and terminate the pool's nodes before they let the NodePool go, and its
/// node class waits for them too. The waits end at `ctx`'s deadline or terraform's stop.
pub(super) async fn delete(
    c: &Cluster,
    objects: &[J],
    access: Option<&str>,
    ctx: &OpCtx,
) -> Result<(), Waited> {
    let (pool, rest): (Vec<J>, Vec<J>) = objects
        .iter()
        .cloned()
        .partition(|o| o["kind"] == "NodePool");
    for group in [pool, rest] {
        c.delete_karpenter(&group).await.map_err(|e| {
            Waited::Failed(kube_diagnostic(
                "delete the pool's Karpenter objects",
                access,
                &e,
            ))
        })?;
        for obj in &group {
            let what = format!("{} {} to be gone", obj["kind"], obj["metadata"]["name"]);
            let gone = poll_until(
                ctx,
                Backoff::every(GONE_POLL),
                what,
                Start::Now,
                |_| async {
                    match c.karpenter_object(obj).await {
                        Ok(None) => Ok(Check::Done(())),
                        Ok(Some(_)) => Ok(Check::Pending {
                            retry_after: None,
                            waiting_for: None,
                        }),
                        Err(e) => Err(Waited::Failed(kube_diagnostic(
                            "see whether the pool's objects are gone",
                            access,
                            &e,
                        ))),
                    }
                },
            );
            gone.await?;
        }
    }
    Ok(())
}

/// How a delete ended, when not with every object gone: an error of the cluster's, or its
/// wait cut short by the deadline or terraform's stop.
pub(super) enum Waited {
    Failed(Diagnostic),
    Cut(Cut),
}

impl From<Interrupted> for Waited {
    fn from(i: Interrupted) -> Waited {
        Waited::Cut(match i {
            Interrupted::Timeout { .. } => Cut::Timeout,
            Interrupted::Stopped => Cut::Stop,
        })
    }
}

/// The objects a state names, from its `objects` map: what a delete must remove when the
/// declaration no longer renders (a catalog entry withdrawn since it was written).
pub(super) fn objects_of_state(objects: &BTreeMap<String, String>, name: &str) -> Vec<J> {
    let mut out: Vec<J> = objects
        .values()
        .filter_map(|text| serde_json::from_str::<J>(text).ok())
        .filter(|o| o.get("apiVersion").is_some() && o.get("kind").is_some())
        .collect();
    if !out.iter().any(|o| o["kind"] == "NodePool") {
        out.push(node_pool_ref(name));
    }
    out
}
