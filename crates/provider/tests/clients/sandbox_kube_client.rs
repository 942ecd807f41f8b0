//! The kube crate (the client the provider uses) against the sandbox's Kubernetes API over HTTPS.

use ::sandbox::kube::{KubeApi, PoolNodes};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

async fn serve() -> (Arc<KubeApi>, String) {
    let api = KubeApi::new();
    api.add_cluster("aks", "sandbox-aks");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("https://{}", listener.local_addr().expect("addr"));
    tokio::spawn(api.clone().serve_tls(listener));
    (api, base)
}

async fn client(api: &KubeApi, base: &str) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&api.kubeconfig("aks", "sandbox-aks", base))
        .expect("kubeconfig parses");
    let cfg = Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(cfg).expect("client")
}

fn pool() -> PoolNodes {
    PoolNodes {
        instances: Vec::new(),
        cloud: "aks",
        cluster: "sandbox-aks".into(),
        pool: "gpua100".into(),
        node_count: 1,
        zones: vec![],
        labels: BTreeMap::from([(
            "nvidia.com/device-plugin.config".to_string(),
            "time-sliced-10".to_string(),
        )]),
        taints: vec![],
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus_per_node: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        os_image: None,
    }
}

fn gpus(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .allocatable
        .as_ref()?
        .get("nvidia.com/gpu")
        .map(|q| q.0.clone())
}

const TS10: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n";

#[tokio::test]
async fn kube_client_drives_the_device_plugin_config_flow() {
    let (api, base) = serve().await;
    api.pool_changed(&pool());
    let client = client(&api, &base).await;

    // Discovery finds the ClusterPolicy resource.
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    assert!(discovery.groups().any(|g| g.name() == "nvidia.com"));
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy"))
        .expect("ClusterPolicy is served");
    assert_eq!(ar.plural, "clusterpolicies");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);

    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels("agentpool=gpua100"))
        .await
        .expect("list nodes");
    assert_eq!(list.items.len(), 1);
    let name = list.items[0].metadata.name.clone().expect("name");
    assert_eq!(gpus(&list.items[0]).as_deref(), Some("1"));

    // The provider's flow: ConfigMap by server-side apply, ClusterPolicy pointer by apply, daemonset restart.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gpu-operator");
    let pp = PatchParams::apply("fracgpu").force();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-slicing-config"}, "data": {"time-sliced-10": TS10}});
    let applied = cms
        .patch("time-slicing-config", &pp, &Patch::Apply(&cm))
        .await
        .expect("apply ConfigMap");
    assert_eq!(
        applied
            .data
            .as_ref()
            .and_then(|d| d.get("time-sliced-10"))
            .map(String::as_str),
        Some(TS10)
    );
    let cps: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy"),
            "clusterpolicies",
        ),
    );
    let ptr = json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "time-sliced-10"}}}});
    let cp = cps
        .patch("cluster-policy", &pp, &Patch::Apply(&ptr))
        .await
        .expect("apply ClusterPolicy");
    assert_eq!(
        cp.data["spec"]["devicePlugin"]["config"]["name"],
        "time-slicing-config"
    );
    assert_eq!(cp.data["spec"]["mig"]["strategy"], "single");
    // The operator renders the newly named ConfigMap into its operands' pod templates (a
    // volume of that name: gpu-operator `handleDevicePluginConfig`), which rolls their pods.
    assert_eq!(
        gpus(&nodes.get(&name).await.expect("node")).as_deref(),
        Some("10"),
        "the operator's roll"
    );
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "gpu-operator");
    dss.restart("nvidia-device-plugin-daemonset")
        .await
        .expect("restart");
    let node = nodes.get(&name).await.expect("node");
    assert_eq!(gpus(&node).as_deref(), Some("10"));
    assert_eq!(
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("nvidia.com/gpu.replicas"))
            .map(String::as_str),
        Some("10")
    );

    // A hand edit (another manager) then a non-forced apply: 409 naming the other manager.
    cms.patch(
        "time-slicing-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"time-sliced-10": "hand"}})),
    )
    .await
    .expect("merge patch");
    let cm2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-slicing-config"}, "data": {"time-sliced-10": TS10.replace("10", "5")}});
    let err = cms
        .patch(
            "time-slicing-config",
            &PatchParams::apply("fracgpu"),
            &Patch::Apply(&cm2),
        )
        .await
        .expect_err("conflict");
    let text = format!("{err:?}");
    assert!(text.contains("409") && text.contains("Conflict"), "{text}");

    // Optimistic concurrency on replace.
    let mut current = cms.get("time-slicing-config").await.expect("get");
    let mut stale = current.clone();
    current
        .data
        .get_or_insert_default()
        .insert("x".into(), "1".into());
    cms.replace("time-slicing-config", &PostParams::default(), &current)
        .await
        .expect("replace");
    stale
        .data
        .get_or_insert_default()
        .insert("y".into(), "1".into());
    let err = cms
        .replace("time-slicing-config", &PostParams::default(), &stale)
        .await
        .expect_err("stale");
    assert!(format!("{err:?}").contains("409"), "{err:?}");

    // get_opt maps 404 to None; Status errors decode; deletes answer.
    assert!(cms.get_opt("missing").await.expect("get_opt").is_none());
    let err = cms.get("missing").await.expect_err("404");
    let text = format!("{err:?}");
    assert!(text.contains("NotFound") && text.contains("404"), "{text}");
    let bad = ConfigMap {
        metadata: kube::core::ObjectMeta {
            name: Some("Bad_Name".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = cms
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid");
    assert!(format!("{err:?}").contains("422"), "{err:?}");
    cms.delete("time-slicing-config", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        cms.get_opt("time-slicing-config")
            .await
            .expect("get_opt")
            .is_none()
    );

    // A Helm release Secret round-trips its bytes.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "gpu-operator");
    let mut s = Secret::default();
    s.metadata.name = Some("sh.helm.release.v1.gpu-operator.v1".into());
    s.metadata.labels = Some(BTreeMap::from([
        ("owner".to_string(), "helm".to_string()),
        ("status".to_string(), "deployed".to_string()),
    ]));
    s.type_ = Some("helm.sh/release.v1".into());
    s.data = Some(BTreeMap::from([(
        "release".to_string(),
        k8s_openapi::ByteString(b"H4sI\x00payload".to_vec()),
    )]));
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("create secret");
    let got = secrets
        .list(&ListParams::default().labels("owner=helm,status=deployed"))
        .await
        .expect("list secrets");
    assert_eq!(got.items.len(), 1);
    assert_eq!(
        got.items[0]
            .data
            .as_ref()
            .and_then(|d| d.get("release"))
            .map(|b| b.0.clone()),
        Some(b"H4sI\x00payload".to_vec())
    );

    // A watch from the list's resourceVersion sees the next change.
    let rv = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = Box::pin(
        cms.watch(&kube::api::WatchParams::default().timeout(5), &rv)
            .await
            .expect("watch"),
    );
    let mut w = ConfigMap::default();
    w.metadata.name = Some("watched".into());
    cms.create(&PostParams::default(), &w)
        .await
        .expect("create");
    let ev = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio_stream::StreamExt::next(&mut stream),
    )
    .await
    .expect("an event in time");
    match ev {
        Some(Ok(kube::api::WatchEvent::Added(cm))) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("watched"))
        }
        other => panic!("expected ADDED, got {other:?}"),
    }

    // Without the token, the server says Unauthorized.
    let kc = api
        .kubeconfig("aks", "sandbox-aks", &base)
        .replace(&api.token("aks", "sandbox-aks").expect("token"), "wrong");
    let cfg = Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&kc).expect("yaml"),
        &Default::default(),
    )
    .await
    .expect("config");
    let anon: Api<Node> = Api::all(Client::try_from(cfg).expect("client"));
    let err = anon.list(&ListParams::default()).await.expect_err("401");
    assert!(format!("{err:?}").contains("401"), "{err:?}");
}
