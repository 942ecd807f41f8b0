//! Taints a pool's nodes carry and the tolerations a pod needs to land on them. A GPU pool is tainted so
//! that pods which do not ask for a GPU stay off expensive nodes; the derived tolerations are what a
//! workload copies into its spec to be let back on.

use std::borrow::Cow;
use std::fmt;

use crate::catalog::Cloud;
use crate::error::{DomainError, Field, summary};

/// The taint a GPU pool gets when the user names none: it keeps pods that do not ask for a GPU off the
/// expensive nodes, and it is the taint the GPU operator's components tolerate out of the box.
pub(super) const DEFAULT_GPU_TAINT: Taint = Taint {
    key: Cow::Borrowed("nvidia.com/gpu"),
    value: Cow::Borrowed("Present"),
    effect: TaintEffect::NoSchedule,
};

/// The taint GKE puts on every GPU node by itself ("Run GPUs in GKE Standard node pools": GKE taints
/// GPU nodes with the key `nvidia.com/gpu` and the effect NoSchedule; the value it writes is
/// `present`). On GKE it is the default, and GKE is never asked for it: the Kubernetes API server
/// refuses a node whose taints repeat a key and effect, so a second one would keep the nodes out.
pub const GKE_GPU_TAINT: Taint = Taint {
    key: Cow::Borrowed("nvidia.com/gpu"),
    value: Cow::Borrowed("present"),
    effect: TaintEffect::NoSchedule,
};

/// The taints a pool gets when the user names none: GKE's own GPU taint on GKE, ours elsewhere.
pub(super) fn default_taints(cloud: Cloud) -> Vec<Taint> {
    match cloud {
        Cloud::Gke => vec![GKE_GPU_TAINT],
        Cloud::Aks | Cloud::Eks => vec![DEFAULT_GPU_TAINT],
    }
}

/// The taints the pool's nodes end up with: the pool's, and on GKE also GKE's own GPU taint.
pub(super) fn node_taints(cloud: Cloud, taints: &[Taint]) -> Vec<Taint> {
    let mut out = taints.to_vec();
    if cloud == Cloud::Gke && !out.contains(&GKE_GPU_TAINT) {
        out.push(GKE_GPU_TAINT);
    }
    out
}

/// The Kubernetes API server refuses a node whose taints repeat a key and effect (validateNodeTaints
/// in kubernetes/pkg/apis/core/validation: "taints must be unique by key and effect pair"), so its
/// kubelet cannot register it. One error per clash, on the pool's taints.
pub(super) fn check_unique(cloud: Cloud, taints: &[Taint]) -> Vec<DomainError> {
    let mut errors = Vec::new();
    let nodes = node_taints(cloud, taints);
    for (i, t) in taints.iter().enumerate() {
        let clash = nodes
            .iter()
            .enumerate()
            .find(|(j, o)| *j != i && o.key == t.key && o.effect == t.effect);
        let Some((j, other)) = clash else {
            continue;
        };
        if *other == GKE_GPU_TAINT && j >= taints.len() {
            errors.push(DomainError::new(
                Field::Taints,
                summary::CONFLICTING_TAINT,
                format!(
                    "GKE puts {GKE_GPU_TAINT} on every GPU node itself, and the Kubernetes API server \
                     refuses a node whose taints repeat a key and effect (taints must be unique by key \
                     and effect pair): with \"{t}\" beside it the nodes would never register. Leave \
                     taints unset (on GKE the default is GKE's own {GKE_GPU_TAINT}), list that taint \
                     exactly, or give yours another key or effect."
                ),
            ));
        } else if j > i {
            errors.push(DomainError::new(
                Field::Taints,
                summary::CONFLICTING_TAINT,
                format!(
                    "\"{t}\" and \"{other}\" have the same key and effect, and the Kubernetes API \
                     server refuses a node whose taints repeat a key and effect (taints must be unique \
                     by key and effect pair). Keep one of them."
                ),
            ));
        }
    }
    errors
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// Accepts Kubernetes' spelling (`NoSchedule`) and the GKE/EKS API spelling (`NO_SCHEDULE`).
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s.trim().replace('_', "").to_ascii_lowercase().as_str() {
            "noschedule" => Some(TaintEffect::NoSchedule),
            "prefernoschedule" => Some(TaintEffect::PreferNoSchedule),
            "noexecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Cow<'static, str>,
    /// Empty for a taint without a value.
    pub value: Cow<'static, str>,
    pub effect: TaintEffect,
}

impl Taint {
    /// Parses AKS's `key=value:Effect` (or `key:Effect`).
    pub fn parse(s: &str) -> Result<Taint, DomainError> {
        let bad = || {
            DomainError::new(
                Field::Taints,
                summary::INVALID_TAINT,
                format!(
                    "\"{s}\" is not a taint. Write key=value:Effect (or key:Effect) with Effect one of \
                     NoSchedule, PreferNoSchedule, NoExecute."
                ),
            )
        };
        let (kv, effect) = s.rsplit_once(':').ok_or_else(bad)?;
        let effect = TaintEffect::parse(effect).ok_or_else(bad)?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.trim().is_empty() {
            return Err(bad());
        }
        Ok(Taint {
            key: Cow::Owned(key.trim().to_string()),
            value: Cow::Owned(value.trim().to_string()),
            effect,
        })
    }

    /// The toleration a pod needs to land on nodes with this taint. The `nvidia.com/gpu` key is tolerated
    /// whatever its value, as NVIDIA's charts do: GKE taints GPU nodes `nvidia.com/gpu=present` (lowercase)
    /// on its own, and a pod must land there as well as on our `Present`.
    pub fn toleration(&self) -> Toleration {
        let any_value = self.value.is_empty() || self.key == DEFAULT_GPU_TAINT.key;
        Toleration {
            key: self.key.to_string(),
            operator: if any_value {
                TolerationOperator::Exists
            } else {
                TolerationOperator::Equal
            },
            value: if any_value {
                String::new()
            } else {
                self.value.to_string()
            },
            effect: self.effect,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

impl TolerationOperator {
    pub fn as_str(self) -> &'static str {
        match self {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        }
    }
}

/// A pod toleration, in Kubernetes' terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    /// Empty with `Exists`.
    pub value: String,
    pub effect: TaintEffect,
}
