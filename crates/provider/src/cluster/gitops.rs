//! The GPU operator's Helm values where a GitOps controller keeps them: an Argo CD `Application`
//! (argoproj.io/v1alpha1; the chart's values in `spec.source.helm` or in one entry of
//! `spec.sources[]`) or a Flux `HelmRelease` (helm.toolkit.fluxcd.io/v2, `spec.values`). There
//! is no release Secret to read and no helm to run: the controller renders the chart on its
//! next sync, so this module reads and rewrites the values object alone.
//!
//! What is written and why:
//! - Argo CD merges `helm.values` (a YAML string) with `helm.valuesObject`, the object taking
//!   precedence (Argo CD's docs, "Helm" user guide, and `reposerver` where both are merged):
//!   this provider writes `valuesObject` only and never rewrites the string (its comments and
//!   layout are the user's), yet reads both, since both render.
//! - Flux merges `spec.valuesFrom` in order and `spec.values` last, on top (helm-controller
//!   docs, "Values references"): this provider writes `spec.values` and reads only it, which
//!   wins over anything `valuesFrom` says for the same keys.
//! - A write is a read-modify-replace with the object's `resourceVersion`, so a concurrent
//!   change (the controller's status, a person) makes it start again instead of being lost;
//!   only the paths given change.

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::delivery::FIELD_MANAGER;
use super::values::{merge, set_value_at};
use super::{Cluster, KubeError};

/// Which GitOps object holds the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ArgoCd,
    Flux,
}

impl Kind {
    fn resource(self) -> ApiResource {
        match self {
            Kind::ArgoCd => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Application"),
                "applications",
            ),
            Kind::Flux => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"),
                "helmreleases",
            ),
        }
    }

    /// How users name the object.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::ArgoCd => "Argo CD Application",
            Kind::Flux => "Flux HelmRelease",
        }
    }
}

/// Where to find the object.
#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Argo CD with several sources: the `chart` of the one that holds the operator.
    pub chart: Option<String>,
}

/// The object as read, and the values in it.
#[derive(Clone, Debug)]
pub struct Held {
    object: DynamicObject,
    /// JSON pointer of the values object this provider edits.
    pointer: String,
    /// That values object (an empty object when absent).
    pub values: Value,
    /// What the chart is rendered with from this object: for Argo CD the `helm.values`
    /// string overlaid with `valuesObject`; for Flux `spec.values`.
    pub effective: Value,
    /// The namespace the chart is installed into: the operator's.
    pub operator_namespace: Option<String>,
    /// What manages the object itself, if anything (a parent Application, a Kustomization).
    pub managed_by: Option<String>,
}

fn s(v: &Value, p: &str) -> Option<String> {
    v.pointer(p)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The JSON pointer of the Argo CD source holding the chart: `spec.source`, or the one entry of
/// `spec.sources` that is a Helm chart (has `chart`, or the given one).
fn argo_source(data: &Value, chart: Option<&str>) -> Result<String, String> {
    let Some(sources) = data.pointer("/spec/sources").and_then(Value::as_array) else {
        return Ok("/spec/source".to_string());
    };
    let charts: Vec<(usize, Option<&str>)> = sources
        .iter()
        .enumerate()
        .filter(|(_, src)| src.get("chart").is_some() || src.get("helm").is_some())
        .map(|(i, src)| (i, src.get("chart").and_then(Value::as_str)))
        .collect();
    let picked: Vec<usize> = charts
        .iter()
        .filter(|(_, c)| chart.is_none_or(|want| *c == Some(want)))
        .map(|(i, _)| *i)
        .collect();
    match picked.as_slice() {
        [i] => Ok(format!("/spec/sources/{i}")),
        [] => Err(match chart {
            Some(want) => format!("no entry of spec.sources has chart {want:?}"),
            None => "no entry of spec.sources is a Helm chart".to_string(),
        }),
        _ => Err(format!(
            "{} entries of spec.sources are Helm charts ({}); set argocd.chart to the operator's",
            picked.len(),
            charts
                .iter()
                .map(|(_, c)| format!("{:?}", c.unwrap_or("?")))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What manages the object, from the marks the controllers leave: Argo CD's tracking label
/// `app.kubernetes.io/instance` or annotation `argocd.argoproj.io/tracking-id` (Argo CD's
/// "Resource Tracking" docs), Flux's `kustomize.toolkit.fluxcd.io/name` labels, or an owner.
fn managed_by(obj: &DynamicObject) -> Option<String> {
    let m = &obj.metadata;
    let label = |k: &str| m.labels.as_ref().and_then(|l| l.get(k)).cloned();
    let annotation = |k: &str| m.annotations.as_ref().and_then(|a| a.get(k)).cloned();
    if let Some(id) = annotation("argocd.argoproj.io/tracking-id") {
        return Some(format!(
            "the Argo CD Application that tracks it ({id}, annotation \
                argocd.argoproj.io/tracking-id)"
        ));
    }
    if let Some(app) = label("app.kubernetes.io/instance") {
        return Some(format!(
            "the Argo CD Application {app:?} (label app.kubernetes.io/instance)"
        ));
    }
    if let Some(k) = label("kustomize.toolkit.fluxcd.io/name") {
        let ns = label("kustomize.toolkit.fluxcd.io/namespace").unwrap_or_default();
        return Some(format!(
            "the Flux Kustomization {ns}/{k} (label kustomize.toolkit.fluxcd.io/name)"
        ));
    }
    let owner = m.owner_references.as_ref()?.first()?;
    Some(format!("its owner, the {} {:?}", owner.kind, owner.name))
}

impl Held {
    fn of(kind: Kind, object: DynamicObject, chart: Option<&str>) -> Result<Held, KubeError> {
        let data = serde_json::to_value(&object)
            .map_err(|e| KubeError::Config(format!("{}: {e}", kind.noun())))?;
        let (pointer, effective, operator_namespace) = match kind {
            Kind::ArgoCd => {
                let source = argo_source(&data, chart)
                    .map_err(|e| KubeError::Config(format!("the Argo CD Application: {e}")))?;
                let string: Value = match s(&data, &format!("{source}/helm/values")) {
                    Some(text) => serde_saphyr::from_str(&text).map_err(|e| {
                        KubeError::Config(format!(
                            "the Argo CD Application's {source}/helm/values is not YAML: {e}"
                        ))
                    })?,
                    None => json!({}),
                };
                let object = data
                    .pointer(&format!("{source}/helm/valuesObject"))
                    .cloned()
                    .unwrap_or(json!({}));
                let mut effective = if string.is_object() {
                    string
                } else {
                    json!({})
                };
                merge(&mut effective, &object);
                (
                    format!("{source}/helm/valuesObject"),
                    effective,
                    s(&data, "/spec/destination/namespace"),
                )
            }
            Kind::Flux => {
                let values = data.pointer("/spec/values").cloned().unwrap_or(json!({}));
                (
                    "/spec/values".to_string(),
                    values,
                    s(&data, "/spec/targetNamespace").or_else(|| s(&data, "/metadata/namespace")),
                )
            }
        };
        let values = data
            .pointer(&pointer)
            .filter(|v| v.is_object())
            .cloned()
            .unwrap_or(json!({}));
        Ok(Held {
            managed_by: managed_by(&object),
            object,
            pointer,
            values,
            effective,
            operator_namespace,
        })
    }
}

impl Cluster {
    fn holder_api(&self, h: &Holder) -> Api<DynamicObject> {
        Api::namespaced_with(self.client(), &h.namespace, &h.kind.resource())
    }

    /// The object and its values; None when it does not exist. A missing CRD (Argo CD or Flux
    /// not installed) is a 404 too, and reads the same way.
    pub async fn read_holder(&self, h: &Holder) -> Result<Option<Held>, KubeError> {
        let got = self
            .holder_api(h)
            .get_opt(&h.name)
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e));
        let obj = match got {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(None),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        Held::of(h.kind, obj, h.chart.as_deref()).map(Some)
    }

    /// Every object of `kind` in every namespace, with its values; none where the kind is not
    /// served (Argo CD or Flux not installed). An Argo CD Application whose chart source cannot
    /// be told apart (several Helm sources) is left out: nothing names which one.
    pub async fn list_holders(&self, kind: Kind) -> Result<Vec<(Holder, Held)>, KubeError> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &kind.resource());
        let list = match api.list(&Default::default()).await {
            Ok(l) => l,
            Err(e) => {
                let e = KubeError::from_kube(&self.target, e);
                return if e.is_not_found() {
                    Ok(Vec::new())
                } else {
                    Err(e)
                };
            }
        };
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| {
                let holder = Holder {
                    kind,
                    namespace: o.metadata.namespace.clone()?,
                    name: o.metadata.name.clone()?,
                    chart: None,
                };
                Some((holder, Held::of(kind, o, None).ok()?))
            })
            .collect())
    }

    /// Sets (Some) or removes (None) each dotted path of the values object and replaces the
    /// object with its `resourceVersion`; a conflict (someone wrote in between) reads it again,
    /// up to three times.
    pub async fn write_holder_values(
        &self,
        h: &Holder,
        changes: &[(String, Option<Value>)],
    ) -> Result<Held, KubeError> {
        let mut last = None;
        for _ in 0..3 {
            let Some(held) = self.read_holder(h).await? else {
                return Err(KubeError::Api {
                    code: 404,
                    reason: "NotFound".into(),
                    message: format!(
                        "the {} {}/{} does not exist",
                        h.kind.noun(),
                        h.namespace,
                        h.name
                    ),
                });
            };
            let mut values = held.values.clone();
            for (path, v) in changes {
                set_value_at(&mut values, path, v.clone());
            }
            let mut data = serde_json::to_value(&held.object)
                .map_err(|e| KubeError::Config(format!("{}: {e}", h.kind.noun())))?;
            set_pointer(&mut data, &held.pointer, values);
            let obj: DynamicObject = serde_json::from_value(data)
                .map_err(|e| KubeError::Config(format!("{}: {e}", h.kind.noun())))?;
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PostParams::default()
            };
            match self.holder_api(h).replace(&h.name, &params, &obj).await {
                Ok(written) => return Held::of(h.kind, written, h.chart.as_deref()),
                Err(e) => match KubeError::from_kube(&self.target, e) {
                    e @ KubeError::Api { code: 409, .. } => last = Some(e),
                    e => return Err(e),
                },
            }
        }
        Err(last.unwrap_or_else(|| KubeError::Config("conflict".into())))
    }
}

/// Puts `v` at a JSON pointer, making the objects on the way.
fn set_pointer(data: &mut Value, pointer: &str, v: Value) {
    let mut at = data;
    let keys: Vec<&str> = pointer.split('/').skip(1).collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    for k in parents {
        at = match at {
            Value::Array(a) => match k.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(next) => next,
                None => return,
            },
            other => {
                if !other.is_object() {
                    *other = json!({});
                }
                other
                    .as_object_mut()
                    .map(|m| m.entry(k.to_string()).or_insert(json!({})))
                    .expect("an object")
            }
        };
    }
    if let Some(m) = at.as_object_mut() {
        m.insert(last.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_source_is_found_among_several() {
        let one = json!({"spec": {"source": {"chart": "gpu-operator"}}});
        assert_eq!(argo_source(&one, None).unwrap(), "/spec/source");
        let many = json!({"spec": {"sources": [
            {"repoURL": "https://git.example/values.git", "ref": "values"},
            {"chart": "gpu-operator", "helm": {}},
            {"chart": "other"},
        ]}});
        assert!(
            argo_source(&many, None)
                .unwrap_err()
                .contains("argocd.chart")
        );
        assert_eq!(
            argo_source(&many, Some("gpu-operator")).unwrap(),
            "/spec/sources/1"
        );
        assert!(argo_source(&many, Some("nope")).is_err());
    }

    #[test]
    fn values_go_under_their_pointer() {
        let mut d = json!({"spec": {"sources": [{"chart": "x"}, {"chart": "y"}]}});
        set_pointer(&mut d, "/spec/sources/1/helm/valuesObject", json!({"a": 1}));
        assert_eq!(d["spec"]["sources"][1]["helm"]["valuesObject"]["a"], 1);
        assert!(d["spec"]["sources"][0].get("helm").is_none());
    }
}
