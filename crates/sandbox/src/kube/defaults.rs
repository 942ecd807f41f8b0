//! What the API server's code defaults in a built-in kind's object (beside what its OpenAPI
//! schema gives): here a Pod's container requests. As kube-apiserver v1.34 does
//! (kubernetes/pkg/apis/core/v1/defaults.go, `SetDefaults_Pod`), a resource a container limits
//! but does not request is requested at its limit, in `containers` and `initContainers` alike: a
//! pod that only limits `nvidia.com/gpu` requests it too, which is where the scheduler and
//! cluster-autoscaler read it (a real v1.34 server was seen doing so).

use serde_json::Value;

use super::kinds::{self, Kind};

/// Defaults `obj` of `kind` in place.
pub(crate) fn apply(kind: Kind, obj: &mut Value) {
    if kind != kinds::PODS {
        return;
    }
    for list in ["containers", "initContainers"] {
        let Some(containers) = obj
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers {
            let Some(limits) = c
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .filter(|l| !l.is_empty())
                .cloned()
            else {
                continue;
            };
            let resources = &mut c["resources"];
            if !resources["requests"].is_object() {
                resources["requests"] = Value::Object(Default::default());
            }
            let requests = resources["requests"].as_object_mut().expect("an object");
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_limited_resource_is_requested_at_its_limit() {
        let mut pod = json!({"spec": {
        "initContainers": [{"resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}],
        "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "1", "memory": "2Gi"}, "requests": {"memory": "1Gi"}}},
            {"resources": {}},
        ]}});
        apply(kinds::PODS, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"memory": "1Gi", "nvidia.com/gpu": "1"})
        );
        assert_eq!(pod["spec"]["containers"][1]["resources"], json!({}));
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let mut cm = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}}}]}});
        apply(kinds::CONFIGMAPS, &mut cm);
        assert!(
            cm.pointer("/spec/containers/0/resources/requests")
                .is_none()
        );
    }
}
