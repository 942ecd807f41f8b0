//! A cluster's Karpenter objects through its API: server-side apply of the objects a shared GPU
//! pool is made of (rendered by `resources::karpenter_nodepool`, whose provisioners say their
//! kinds), reading them back for drift, listing and deleting them, and whether the Karpenter
//! controller reads NodeOverlays at all (its `NodeOverlay` feature gate, off by default). Any
//! provisioner's objects go through here alike: nothing here knows a cloud.
//!
//! The gate is read where Karpenter reads it: the controller's `--feature-gates` argument, whose
//! default is the environment variable `FEATURE_GATES` (kubernetes-sigs/karpenter
//! pkg/operator/options/options.go), a comma-separated `Name=bool` list that the Helm charts
//! write into the environment (aws/karpenter-provider-aws and Azure/karpenter-provider-azure
//! charts/karpenter/templates/deployment.yaml), on a Deployment labelled
//! `app.kubernetes.io/name=karpenter` (the charts' selector labels). Managed Karpenter (EKS Auto
//! Mode, AKS node auto-provisioning) runs outside the cluster, so there the gate cannot be read
//! and the answer is [`OverlayGate::Unknown`].

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::delivery::{Cluster, FIELD_MANAGER};
use super::error::KubeError;

/// Whether the cluster's Karpenter reads NodeOverlays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlayGate {
    On,
    /// The gate is off; the Deployment that says so, as `namespace/name`.
    Off(String),
    /// No Karpenter Deployment could be read (managed Karpenter, or no permission to list).
    Unknown,
}

/// The feature gates a container runs Karpenter with: its `--feature-gates` argument
/// (`--feature-gates=X`, `-feature-gates=X`, or the value after the flag) when given, else the
/// flag's default, the `FEATURE_GATES` environment variable.
fn feature_gates(c: &k8s_openapi::api::core::v1::Container) -> Option<String> {
    let args = c.args.as_deref().unwrap_or_default();
    for (i, a) in args.iter().enumerate() {
        if !a.starts_with('-') {
            continue;
        }
        let flag = a.trim_start_matches('-');
        if let Some(v) = flag.strip_prefix("feature-gates=") {
            return Some(v.to_string());
        }
        if flag == "feature-gates" {
            return args.get(i + 1).cloned();
        }
    }
    c.env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|e| e.name == "FEATURE_GATES")
        .and_then(|e| e.value.clone())
}

/// Whether a gates list turns NodeOverlay on (off unless it says `NodeOverlay=true`).
fn node_overlay_on(gates: &str) -> bool {
    gates.split(',').any(|kv| {
        kv.split_once('=').is_some_and(|(k, v)| {
            k.trim() == "NodeOverlay" && v.trim().eq_ignore_ascii_case("true")
        })
    })
}

/// The API resource of a Karpenter object, from its apiVersion and kind; None for an object
/// of no API group (the core group serves no Karpenter kind). Karpenter's CRDs, its own and each
/// provider's, are made by controller-gen, whose plural is the kind in lower case in the English
/// plural (`NodePool` -> `nodepools`, any `<X>NodeClass` -> `<x>nodeclasses`): the rule kube's
/// `ApiResource::from_gvk` follows.
fn resource_of(obj: &Value) -> Option<ApiResource> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let (group, version) = api_version.split_once('/')?;
    Some(ApiResource::from_gvk(&GroupVersionKind::gvk(
        group, version, kind,
    )))
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Cluster {
    fn karpenter_api(&self, obj: &Value) -> Result<Api<DynamicObject>, KubeError> {
        let r = resource_of(obj).ok_or_else(|| KubeError::BadResponse {
            target: self.target.clone(),
            cause: format!("not a Karpenter object: {obj}"),
        })?;
        Ok(Api::all_with(self.client(), &r))
    }

    /// Creates or updates the objects (all cluster-scoped), in order: the node class before the
    /// NodePool that names it. Fields this manager set before and no longer sets are removed by
    /// the API server; conflicts with another manager are taken, since the provider owns these
    /// objects whole.
    pub async fn apply_karpenter(&self, objects: &[Value]) -> Result<(), KubeError> {
        let mut params = PatchParams::apply(FIELD_MANAGER);
        params.force = true;
        for obj in objects {
            self.karpenter_api(obj)?
                .patch(&name_of(obj), &params, &Patch::Apply(obj))
                .await
                .map_err(|e| KubeError::from_kube(&self.target, e))?;
        }
        Ok(())
    }

    /// The object as the cluster holds it now, None when it does not exist. `like` gives its
    /// apiVersion, kind and name.
    pub async fn karpenter_object(&self, like: &Value) -> Result<Option<Value>, KubeError> {
        let got = self
            .karpenter_api(like)?
            .get_opt(&name_of(like))
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        Ok(got.map(|o| serde_json::to_value(o).unwrap_or_default()))
    }

    /// Every object of the cluster of `kind`'s apiVersion and kind, ordered by name; None where
    /// the cluster serves no such objects (no Karpenter installed).
    pub async fn karpenter_objects(&self, kind: &Value) -> Result<Option<Vec<Value>>, KubeError> {
        let got = match self.karpenter_api(kind)?.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => match KubeError::from_kube(&self.target, e) {
                e if e.is_not_found() => return Ok(None),
                e => return Err(e),
            },
        };
        let mut objects: Vec<Value> = got
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .collect();
        objects.sort_by_key(name_of);
        Ok(Some(objects))
    }

    /// Deletes the objects, the NodePool first (so Karpenter stops launching before its node
    /// class goes); a missing one is already gone.
    pub async fn delete_karpenter(&self, objects: &[Value]) -> Result<(), KubeError> {
        for obj in objects.iter().rev() {
            match self
                .karpenter_api(obj)?
                .delete(&name_of(obj), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) => match KubeError::from_kube(&self.target, e) {
                    e if e.is_not_found() => {}
                    e => return Err(e),
                },
            }
        }
        Ok(())
    }

    /// Whether the cluster's Karpenter controller reads NodeOverlays.
    pub async fn overlay_gate(&self) -> OverlayGate {
        let api: Api<Deployment> = Api::all(self.client());
        let Ok(list) = api
            .list(&ListParams::default().labels("app.kubernetes.io/name=karpenter"))
            .await
        else {
            return OverlayGate::Unknown;
        };
        let mut seen = None;
        for d in list.items {
            let on = d
                .spec
                .template
                .spec
                .into_iter()
                .flat_map(|s| s.containers)
                .filter_map(|c| feature_gates(&c))
                .any(|g| node_overlay_on(&g));
            if on {
                return OverlayGate::On;
            }
            seen = Some(format!(
                "{}/{}",
                d.metadata.namespace.unwrap_or_default(),
                d.metadata.name.unwrap_or_default()
            ));
        }
        seen.map_or(OverlayGate::Unknown, OverlayGate::Off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, EnvVar};

    fn container(args: &[&str], env: Option<&str>) -> Container {
        Container {
            name: "controller".into(),
            args: Some(args.iter().map(|a| a.to_string()).collect()),
            env: env.map(|v| {
                vec![EnvVar {
                    name: "FEATURE_GATES".into(),
                    value: Some(v.into()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn kinds_are_served_under_controller_gen_plurals() {
        let plural = |api_version: &str, kind: &str| {
            resource_of(&serde_json::json!({"apiVersion": api_version, "kind": kind}))
                .map(|r| r.plural)
        };
        assert_eq!(
            plural("karpenter.sh/v1", "NodePool").as_deref(),
            Some("nodepools")
        );
        assert_eq!(
            plural("karpenter.sh/v1alpha1", "NodeOverlay").as_deref(),
            Some("nodeoverlays")
        );
        assert_eq!(
            plural("karpenter.example.com/v1", "XYZNodeClass").as_deref(),
            Some("xyznodeclasses")
        );
        assert_eq!(
            plural("v1", "Namespace"),
            None,
            "no Karpenter kind is in the core group"
        );
    }

    #[test]
    fn the_argument_wins_over_the_environment() {
        let gates = |args: &[&str], env| feature_gates(&container(args, env));
        assert_eq!(
            gates(&[], Some("NodeOverlay=true")).as_deref(),
            Some("NodeOverlay=true")
        );
        assert_eq!(
            gates(
                &["--feature-gates=NodeOverlay=false"],
                Some("NodeOverlay=true")
            )
            .as_deref(),
            Some("NodeOverlay=false")
        );
        assert_eq!(
            gates(&["-feature-gates", "NodeOverlay=true"], None).as_deref(),
            Some("NodeOverlay=true")
        );
        assert_eq!(gates(&["--log-level=debug"], None), None);
        assert!(node_overlay_on(
            "SpotToSpotConsolidation=true, NodeOverlay=True"
        ));
        assert!(!node_overlay_on("NodeOverlay=false"));
        assert!(!node_overlay_on("NodeOverlayX=true"));
    }
}
