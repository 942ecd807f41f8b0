//! Which configs the cluster's device plugins read, and which delivery writes each: what
//! `terraform query` lists, and how an import by identity (which names the ConfigMap alone)
//! learns the delivery its import ID would have named. Each delivery says what it finds
//! (`Lifecycle::discover`); here is how the findings of all meet, one per ConfigMap, which the
//! registry's `found` does.

use super::super::diagnostics::kube_diagnostic;
use crate::cluster::KubeError;
use tfplugin::Diagnostics;

/// A device plugin config some delivery writes, as the cluster shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Found {
    /// The ConfigMap's namespace and name.
    pub namespace: String,
    pub name: String,
    /// The delivery, by its name.
    pub delivery: &'static str,
    /// The import ID that names it with its delivery and object.
    pub import_id: String,
    /// What points the plugin at it: "the Helm release gpu-operator/gpu-operator".
    pub through: String,
    /// Whether the object itself says so (an Application's values, our field manager's
    /// pointer), rather than a guess from who made the ClusterPolicy.
    pub certain: bool,
}

/// One finding per ConfigMap, the certain over the guessed, then the first found; by
/// namespace and name.
pub(super) fn one_per_configmap(all: Vec<Found>) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for f in all {
        match out
            .iter_mut()
            .find(|o| o.namespace == f.namespace && o.name == f.name)
        {
            Some(o) if f.certain && !o.certain => *o = f,
            Some(_) => {}
            None => out.push(f),
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// A delivery's findings, or what kept it from looking: a Kubernetes error that is not about
/// the cluster at large (a kind it may not list) becomes a warning and the others go on.
pub(super) fn kept(
    delivery: &str,
    got: Result<Vec<Found>, KubeError>,
    diags: &mut Diagnostics,
) -> Result<Vec<Found>, ()> {
    match got {
        Ok(found) => Ok(found),
        Err(e @ (KubeError::Unreachable { .. } | KubeError::Config(_))) => {
            diags.push(kube_diagnostic("look for device plugin configs", None, &e));
            Err(())
        }
        Err(e) => {
            diags.push(tfplugin::Diagnostic::warning(
                "Some device plugin configs may be missing",
                format!(
                    "Looking for the configs delivery \"{delivery}\" writes failed ({e}), so \
                    those are not listed. The provider's identity needs to list what that \
                    delivery reads (see the least-privilege rules of the deliveries guide)."
                ),
            ));
            Ok(Vec::new())
        }
    }
}

/// What the cluster at large says: none where there is no such object.
pub(super) fn none_if_missing<T: Default>(got: Result<T, KubeError>) -> Result<T, KubeError> {
    match got {
        Err(KubeError::MissingCrd | KubeError::MissingClusterPolicy(_)) => Ok(T::default()),
        Err(e) if e.is_not_found() => Ok(T::default()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(ns: &str, name: &str, delivery: &'static str, certain: bool) -> Found {
        Found {
            namespace: ns.into(),
            name: name.into(),
            delivery,
            import_id: format!("{delivery}:{ns}/{name}"),
            through: String::new(),
            certain,
        }
    }

    #[test]
    fn a_configmap_is_found_once_and_the_object_that_says_so_wins() {
        let all = vec![
            f("gpu-operator", "ts", "helm", false),
            f("gpu-operator", "ts", "flux", true),
            f("gpu-operator", "ts", "argocd", true),
            f("a", "b", "cluster_policy", false),
        ];
        let one = one_per_configmap(all);
        let got: Vec<(&str, &str)> = one.iter().map(|f| (f.name.as_str(), f.delivery)).collect();
        assert_eq!(got, [("b", "cluster_policy"), ("ts", "flux")]);
    }
}
