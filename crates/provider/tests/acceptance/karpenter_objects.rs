//! The Karpenter objects the provider renders for a shared GPU pool (`karpenter_nodepool::render`),
//! applied to a control plane (`testkit::apiserver`) that serves the real Karpenter CRDs (AWS provider v1.14.1,
//! Azure provider v1.14.2, from the shared fixtures): every object is accepted under strict field
//! validation, nothing the provider set is pruned or changed by the server's defaulting, and
//! applying the same objects again changes nothing. This is what a plan after apply relies on.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::tools::{self, Tool};
use fracgpu::resources::karpenter_nodepool::provisioner::{
    AksClass, AmiFamily, Aws, Ec2Class, Nap, NodeClass, Provisioner,
};
use fracgpu::resources::karpenter_nodepool::render::{Budget, Disruption, KarpenterPool, render};
use gpu::{MigStrategy, SharingMode};
use serde_json::Value;
use testkit::apiserver::{self, ApiServer};

const CRDS: &[&str] = &[
    "karpenter.sh_nodepools.yaml",
    "karpenter.sh_nodeoverlays.yaml",
    "karpenter.k8s.aws_ec2nodeclasses.yaml",
    "karpenter.azure.com_aksnodeclasses.yaml",
];

/// Every value of `want` is in `got` at the same place (objects may gain defaulted fields).
fn contains(got: &Value, want: &Value, at: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k} was pruned; the server kept {got}"));
                contains(gv, wv, &format!("{at}.{k}"));
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{at}: {got} vs {want}");
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                contains(gv, wv, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(got, want, "{at}"),
    }
}

fn tags() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "karpenter.sh/discovery".to_string(),
        "sandbox-eks".to_string(),
    )])
}

fn pools() -> Vec<KarpenterPool> {
    let base = |name: &str, gpu: &str, counts: Vec<u32>, sharing, provisioner| KarpenterPool {
        name: name.into(),
        provisioner,
        gpu: gpu::gpu_model(gpu).unwrap(),
        gpu_counts: counts,
        sharing,
        labels: BTreeMap::from([("team".to_string(), "inference".to_string())]),
        taints: None,
        capacity_types: vec!["on-demand".into(), "spot".into()],
        limit_gpus: Some(16),
        disruption: Some(Disruption {
            consolidation_policy: "WhenEmptyOrUnderutilized".into(),
            consolidate_after: "5m".into(),
            budgets: vec![Budget {
                nodes: "10%".into(),
                schedule: None,
                duration: None,
            }],
        }),
        weight: Some(10),
        overlays_read: true,
        config_name: None,
    };
    let ec2 = |family| -> Arc<dyn Provisioner> {
        Arc::new(Aws(NodeClass::Made(Ec2Class {
            role: "KarpenterNodeRole-sandbox".into(),
            subnet_tags: tags(),
            security_group_tags: tags(),
            ami_family: family,
            ami_version: "latest".into(),
        })))
    };
    vec![
        base(
            "t4-sliced",
            "T4",
            vec![1, 4],
            SharingMode::TimeSlicing {
                replicas: 10,
                rename_by_default: true,
                fail_requests_greater_than_one: false,
            },
            ec2(AmiFamily::Al2023),
        ),
        base(
            "a100-mig",
            "A100-80GB",
            vec![8],
            SharingMode::Mig {
                profile: "1g.10gb".into(),
                strategy: MigStrategy::Single,
                gke_sharing: None,
            },
            ec2(AmiFamily::Bottlerocket),
        ),
        base(
            "l4-mps",
            "L4",
            vec![1],
            SharingMode::mps(4),
            Arc::new(Aws(NodeClass::Existing("default".into()))),
        ),
        base(
            "t4-nap",
            "T4",
            vec![1, 4],
            SharingMode::TimeSlicing {
                replicas: 4,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
            },
            Arc::new(Nap(NodeClass::Made(AksClass {
                image_family: "Ubuntu2204".into(),
            }))),
        ),
    ]
}

fn apply(server: &ApiServer, obj: &Value) -> Value {
    let out = server.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=terraform-provider-fracgpu",
            "--validate=strict",
            "-o",
            "json",
            "-f",
            "-",
        ],
        &obj.to_string(),
    );
    serde_json::from_str(&out).expect("kubectl prints the object")
}

/// A control plane with the Karpenter CRDs; None when a tool or the fixtures are missing
/// outside CI (after saying so).
pub(crate) fn karpenter_server() -> Option<ApiServer> {
    tools::require(Tool::Kubectl)?;
    let fixtures = apiserver::fixtures()?;
    let server = ApiServer::start()?;
    server.install_crds(&fixtures, CRDS);
    Some(server)
}

#[test]
fn rendered_objects_are_accepted_whole_and_stable() {
    let Some(server) = karpenter_server() else {
        return;
    };
    for pool in pools() {
        let r = render(&pool).unwrap_or_else(|e| panic!("{}: {e:?}", pool.name));
        let mut objects: Vec<Value> = r.node_class.into_iter().collect();
        objects.push(r.node_pool);
        objects.extend(r.overlays);
        for obj in &objects {
            let what = apiserver_name(obj);
            let first = apply(&server, obj);
            contains(&first, obj, &what);
            let again = apply(&server, obj);
            assert_eq!(
                first["metadata"]["resourceVersion"], again["metadata"]["resourceVersion"],
                "{what}: a second apply of the same object changed it"
            );
        }
    }
    // The overlays' capacities are what Karpenter will read: slices, with no whole GPU left
    // where the resource is renamed.
    let overlay: Value = serde_json::from_str(&server.kubectl_ok(&[
        "get",
        "nodeoverlays.karpenter.sh",
        "t4-sliced-gpu4",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(overlay["spec"]["capacity"]["nvidia.com/gpu.shared"], "40");
    assert_eq!(overlay["spec"]["capacity"]["nvidia.com/gpu"], "0");
}

pub(crate) const KARPENTER: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "karpenter", "namespace": "kube-system",
    "labels": {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}},
  "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "karpenter"}},
    "template": {"metadata": {"labels": {"app.kubernetes.io/name": "karpenter"}},
      "spec": {"containers": [{"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.14.1",
        "env": [{"name": "FEATURE_GATES",
          "value": "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=ON_OR_OFF,StaticCapacity=false"}]}]}}}}"#;

/// The provider's own client: apply, read back, change, delete, and the NodeOverlay gate read
/// from a Karpenter Deployment as its Helm chart writes it.
#[test]
fn the_client_applies_reads_and_deletes_them_and_reads_the_gate() {
    use fracgpu::cluster::karpenter_api::OverlayGate;
    use fracgpu::cluster::{KubernetesSettings, connect};
    let Some(server) = karpenter_server() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt
        .block_on(connect(&KubernetesSettings {
            config_path: Some(server.kubeconfig().display().to_string()),
            ..Default::default()
        }))
        .expect("connects");
    let mut pool = pools().remove(0);
    let objects = |pool: &KarpenterPool| {
        let r = render(pool).unwrap();
        let mut o: Vec<Value> = r.node_class.into_iter().collect();
        o.push(r.node_pool);
        o.extend(r.overlays);
        o
    };
    let first = objects(&pool);
    rt.block_on(cluster.apply_karpenter(&first))
        .expect("applied");
    for obj in &first {
        let got = rt
            .block_on(cluster.karpenter_object(obj))
            .unwrap()
            .expect("exists");
        contains(&got, obj, &apiserver_name(obj));
    }
    // Fewer replicas: the overlays change in place.
    pool.sharing = SharingMode::TimeSlicing {
        replicas: 4,
        rename_by_default: true,
        fail_requests_greater_than_one: false,
    };
    let second = objects(&pool);
    rt.block_on(cluster.apply_karpenter(&second))
        .expect("applied");
    let overlay = rt
        .block_on(cluster.karpenter_object(second.last().unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(overlay["spec"]["capacity"]["nvidia.com/gpu.shared"], "16");
    rt.block_on(cluster.delete_karpenter(&second))
        .expect("deleted");
    for obj in &second {
        assert!(
            rt.block_on(cluster.karpenter_object(obj))
                .unwrap()
                .is_none()
        );
    }
    // Deleting what is gone is not an error.
    rt.block_on(cluster.delete_karpenter(&second))
        .expect("idempotent");

    assert_eq!(rt.block_on(cluster.overlay_gate()), OverlayGate::Unknown);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "false"),
    );
    assert_eq!(
        rt.block_on(cluster.overlay_gate()),
        OverlayGate::Off("kube-system/karpenter".into())
    );
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &KARPENTER.replace("ON_OR_OFF", "true"),
    );
    assert_eq!(rt.block_on(cluster.overlay_gate()), OverlayGate::On);
}

fn apiserver_name(obj: &Value) -> String {
    format!(
        "{} {}",
        obj["kind"].as_str().unwrap_or_default(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    )
}
