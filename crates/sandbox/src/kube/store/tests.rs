//! The store's write path without HTTP: server-side apply ownership and conflicts, generation and
//! resourceVersion, the device plugin restart, and arbitrary bodies that must never panic.

use super::managed::managed_entries;
use super::nodes::node_names;
use super::*;
use crate::kube::patch::PatchType;
use crate::nodes::gke_group_id;

fn ctx(m: &str) -> WriteCtx<'_> {
    WriteCtx {
        manager: m,
        apply: None,
        validation: super::Validation::Warn,
        patch: false,
        subresource: None,
    }
}

fn cp_apply(spec: Value) -> Value {
    json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": CLUSTER_POLICY}, "spec": spec})
}

#[test]
fn apply_owns_removes_and_prunes() {
    let mut c = Cluster::new("aks", "t");
    let p = kinds::CLUSTERPOLICIES;
    let v = c
        .apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"devicePlugin": {"config": {"name": "cm", "default": "all"}}})),
            "fracgpu",
            false,
        )
        .unwrap();
    assert_eq!(
        v["spec"]["devicePlugin"]["config"],
        json!({"name": "cm", "default": "all"})
    );
    assert_eq!(v["spec"]["devicePlugin"]["enabled"], true);
    let mine = managed_entries(&v)
        .into_iter()
        .find(|e| e.manager == "fracgpu")
        .unwrap();
    assert_eq!(mine.operation, "Apply");
    assert_eq!(mine.fields.len(), 2);
    // Applying an empty configuration gives the fields up: removed, and the empty map with them.
    let v = c
        .apply(p, "", CLUSTER_POLICY, cp_apply(json!({})), "fracgpu", false)
        .unwrap();
    assert!(v["spec"]["devicePlugin"].get("config").is_none(), "{v}");
    assert_eq!(
        v["spec"]["devicePlugin"]["enabled"], true,
        "helm's fields stay"
    );
    assert!(managed_entries(&v).iter().all(|e| e.manager != "fracgpu"));
}

#[test]
fn updates_steal_fields_and_apply_conflicts_until_forced() {
    let mut c = Cluster::new("aks", "t");
    let p = kinds::CLUSTERPOLICIES;
    c.apply(
        p,
        "",
        CLUSTER_POLICY,
        cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
        "fracgpu",
        false,
    )
    .unwrap();
    c.patch(
        p,
        "",
        CLUSTER_POLICY,
        PatchType::Merge,
        &json!({"spec": {"devicePlugin": {"config": {"name": "other"}}}}),
        &ctx("kubectl-patch"),
    )
    .unwrap();
    let same = c.apply(
        p,
        "",
        CLUSTER_POLICY,
        cp_apply(json!({"devicePlugin": {"config": {"name": "other"}}})),
        "fracgpu",
        false,
    );
    assert!(same.is_ok(), "same value: shared ownership, no conflict");
    let e = c
        .apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
            "fracgpu",
            false,
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    assert!(
        e.message.contains("\"kubectl-patch\"")
            && e.message.contains(".spec.devicePlugin.config.name"),
        "{}",
        e.message
    );
    let v = c
        .apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"devicePlugin": {"config": {"name": "cm"}}})),
            "fracgpu",
            true,
        )
        .unwrap();
    assert_eq!(v["spec"]["devicePlugin"]["config"]["name"], "cm");
    let theirs = managed_entries(&v)
        .into_iter()
        .find(|e| e.manager == "kubectl-patch");
    assert!(theirs.is_none_or(|e| !e.fields.contains(&vec![
        "spec".to_string(),
        "devicePlugin".into(),
        "config".into(),
        "name".into()
    ])));
}

#[test]
fn conflicts_name_update_managers_with_version_and_appliers_alone() {
    // As printManager (k8s.io/apimachinery, pkg/util/managedfields/internal/conflict.go)
    // writes them: `"m" using v1 at <time>` for an update, `"m"` for an apply.
    let mut c = Cluster::new("aks", "t");
    let p = kinds::CLUSTERPOLICIES;
    c.apply(
        p,
        "",
        CLUSTER_POLICY,
        cp_apply(json!({"mig": {"strategy": "mixed"}})),
        "helm",
        true,
    )
    .unwrap();
    let e = c
        .apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"mig": {"strategy": "none"}})),
            "fracgpu",
            false,
        )
        .unwrap_err();
    assert!(
        e.message
            .ends_with("conflict with \"helm\": .spec.mig.strategy"),
        "{}",
        e.message
    );
    c.patch(
        p,
        "",
        CLUSTER_POLICY,
        PatchType::Merge,
        &json!({"spec": {"mig": {"strategy": "single"}}}),
        &ctx("kubectl-patch"),
    )
    .unwrap();
    let e = c
        .apply(
            p,
            "",
            CLUSTER_POLICY,
            cp_apply(json!({"mig": {"strategy": "none"}})),
            "fracgpu",
            false,
        )
        .unwrap_err();
    assert!(
        // kube-apiserver v1.34 names no time (the differential test compares this message).
        e.message
            .ends_with("conflict with \"kubectl-patch\" using nvidia.com/v1: .spec.mig.strategy"),
        "{}",
        e.message
    );
}

#[test]
fn generation_resource_version_and_restart() {
    let mut c = Cluster::new("eks", "t");
    let ds = c
        .get(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
        .unwrap();
    let g = ds["metadata"]["generation"].as_i64().unwrap();
    let rv0 = c.rv;
    let v = c
        .patch(
            kinds::DAEMONSETS,
            OPERATOR_NS,
            DEVICE_PLUGIN_DS,
            PatchType::Merge,
            &json!({"metadata": {"labels": {"x": "y"}}}),
            &ctx("t"),
        )
        .unwrap();
    assert_eq!(
        v["metadata"]["generation"].as_i64(),
        Some(g),
        "labels are not spec"
    );
    assert!(c.rv > rv0);
    let v = c.patch(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS, PatchType::Strategic,
        &json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}), &ctx("t")).unwrap();
    assert_eq!(v["metadata"]["generation"].as_i64(), Some(g + 1));
    let ds = c
        .get(kinds::DAEMONSETS, OPERATOR_NS, DEVICE_PLUGIN_DS)
        .unwrap();
    assert_eq!(ds["status"]["observedGeneration"].as_i64(), Some(g + 1));
    // Status through the main resource is ignored.
    let v = c
        .patch(
            kinds::DAEMONSETS,
            OPERATOR_NS,
            DEVICE_PLUGIN_DS,
            PatchType::Merge,
            &json!({"status": {"numberReady": 99}}),
            &ctx("t"),
        )
        .unwrap();
    assert_ne!(v["status"]["numberReady"], 99);
}

#[test]
fn bare_cluster_has_no_operator() {
    let c = Cluster::without_operator("aks", "bare");
    assert!(!c.crd_present());
    assert!(c.get(kinds::NAMESPACES, "", OPERATOR_NS).is_err());
    assert!(c.get(kinds::NAMESPACES, "", "default").is_ok());
    assert!(c.get(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY).is_err());
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z./-]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("data".to_string()),
                    Just("labels".to_string()),
                    Just("name".to_string()),
                    Just("status".to_string()),
                    Just("template".to_string()),
                    "[a-z.$/]{1,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Whatever arrives, every verb answers (Ok or a Status error) and the twin keeps working.
    #[test]
    fn arbitrary_bodies_never_panic(body in arb_json(), patch in arb_json()) {
        let mut c = Cluster::new("eks", "fuzz");
        let pool = crate::kube::PoolNodes {
            instances: Vec::new(),
            cloud: "eks", cluster: "fuzz".into(), pool: "ng".into(), node_count: 1, zones: vec![], labels: BTreeMap::new(), taints: vec![],
            gpu_product: Some("NVIDIA-A100-SXM4-40GB".into()), gpus_per_node: 8, gpu_memory_mib: 40960,
            mig_profile: None, mig_instances_per_gpu: 0, gke_sharing: None, os_image: None,
        };
        c.pool_changed(&pool);
        let node = node_names("eks", "fuzz", "ng", 1, &[]).remove(0);
        let served: Vec<Kind> = c.served().collect();
        for kind in served {
            let ns = if kind.namespaced { OPERATOR_NS } else { "" };
            let name = match kind {
                k if k == kinds::NODES => node.as_str(),
                k if k == kinds::DAEMONSETS => DEVICE_PLUGIN_DS,
                k if k == kinds::CLUSTERPOLICIES => CLUSTER_POLICY,
                _ => "x",
            };
            let _ = c.create(kind, ns, body.clone(), &ctx("fuzz"));
            let _ = c.replace(kind, ns, name, body.clone(), &ctx("fuzz"));
            for t in [PatchType::Merge, PatchType::Json, PatchType::Strategic] {
                let _ = c.patch(kind, ns, name, t, &patch, &ctx("fuzz"));
            }
            let _ = c.apply(kind, ns, name, patch.clone(), "fuzz", false);
            let _ = c.apply(kind, ns, name, body.clone(), "fuzz", true);
        }
        c.pool_changed(&pool);
        proptest::prop_assert!(c.get(kinds::NODES, "", &node).is_ok() || c.twins.is_empty());
    }
}

#[test]
fn node_names_look_like_the_clouds() {
    let aks = node_names("aks", "c", "gpu", 2, &[]);
    assert!(
        aks[0].starts_with("aks-gpu-")
            && aks[0].ends_with("-vmss000000")
            && aks[1].ends_with("-vmss000001"),
        "{aks:?}"
    );
    let zones = ["us-central1-a", "us-central1-b"].map(String::from);
    let gke = node_names("gke", "sandbox-gke", "pool", 2, &zones);
    assert!(
        gke[0].starts_with("gke-sandbox-gke-pool-")
            && gke[0].len() == "gke-sandbox-gke-pool-".len() + 13,
        "{gke:?}"
    );
    // Each zone's nodes carry the id of that zone's instance group.
    let group = |n: &str| n["gke-sandbox-gke-pool-".len()..][..8].to_string();
    assert_eq!(
        group(&gke[0]),
        gke_group_id("sandbox-gke", "pool", "us-central1-a")
    );
    assert_ne!(group(&gke[0]), group(&gke[1]));
    let eks = node_names("eks", "c", "ng", 300, &[]);
    assert!(eks[0].starts_with("ip-10-") && eks[0].ends_with(".ec2.internal"));
    let unique: BTreeSet<&String> = eks.iter().collect();
    assert_eq!(unique.len(), 300);
    assert_eq!(node_names("aks", "c", "gpu", 2, &[]), aks, "stable");
}
