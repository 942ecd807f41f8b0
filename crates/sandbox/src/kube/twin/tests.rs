//! What nodes advertise for each device plugin config, MIG layout and cloud, checked against the
//! device plugin's and GKE's documented behaviour.

use std::collections::BTreeMap;

use super::advertise::advertise;
use super::config_manager::{PluginInputs, Readers};
use super::device_config::{DpConfig, parse_config};
use super::labels::{CONFIG_LABEL, MIG_CONFIG_LABEL};
use super::mig_manager::{MigManager, mig_fails, mig_manager, operator_mig_label};
use super::node::NodeTwin;

fn twin(cloud: &str) -> NodeTwin {
    NodeTwin {
        cloud: cloud.into(),
        pool: "gpu".into(),
        gpu_product: Some("NVIDIA-A100-80GB-PCIe".into()),
        gpus: 1,
        gpu_memory_mib: 81920,
        mig_profile: None,
        mig_instances_per_gpu: 0,
        gke_sharing: None,
        pool_labels: BTreeMap::new(),
        loaded: PluginInputs {
            mig_strategy: "single".into(),
            ..Default::default()
        },
        seen_mig_label: None,
        host_device_plugin: false,
        user_data: None,
        mig_capable: None,
        mig_refused: None,
        readers: Readers::default(),
        held: BTreeMap::new(),
    }
}

/// `t` with its operands' pods started on a node with these labels, from what `t.loaded` holds.
fn started(t: &NodeTwin, labels: &BTreeMap<String, String>) -> NodeTwin {
    let mut t = t.clone();
    let inputs = t.loaded.clone();
    let label = labels.get(CONFIG_LABEL).map(String::as_str);
    t.readers.plugin.start(label, &inputs);
    t.readers.gfd.start(label, &inputs);
    t
}

#[test]
fn the_mig_manager_fails_a_change_under_gpu_users_until_the_label_changes() {
    let mm = MigManager {
        enabled: true,
        default_config: "all-disabled".into(),
        ..MigManager::default()
    };
    let at = |c: &str| BTreeMap::from([(MIG_CONFIG_LABEL.to_string(), c.to_string())]);
    let mut t = twin("eks");
    t.seen_mig_label = Some("all-disabled".into());
    assert!(
        !mig_fails(&mut t, &at("all-disabled"), &mm, true),
        "no change, nothing to fail"
    );
    assert!(
        mig_fails(&mut t, &at("all-1g.10gb"), &mm, true),
        "a change under a GPU user"
    );
    assert!(
        mig_fails(&mut t, &at("all-1g.10gb"), &mm, false),
        "not retried once the pods left"
    );
    assert!(
        !mig_fails(&mut t, &at("all-2g.20gb"), &mm, false),
        "a new label is tried again"
    );
    let off = MigManager::default();
    assert!(
        !mig_fails(&mut t, &at("all-3g.40gb"), &off, true),
        "no MIG manager, no failure"
    );
}

const TS10: &str = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n";

#[test]
fn parses_and_rejects() {
    let c = parse_config(TS10).unwrap();
    assert_eq!(
        c.sharing.unwrap().resources,
        vec![("nvidia.com/gpu".to_string(), 10)]
    );
    assert!(parse_config("version: v2").is_err());
    assert!(parse_config("sharing:\n  timeSlicing:\n    resources: []\n").is_err());
    assert!(
        parse_config(
            "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 1\n"
        )
        .is_err()
    );
    assert!(parse_config("sharing:\n  mps:\n    resources:\n    - name: nvidia.com/mig-1g.5gb\n      replicas: 2\n").is_err());
    assert!(parse_config("flags:\n  migStrategy: weird\n").is_err());
    // v0.20.0's allocation policy: its two values pass, another stops the plugin.
    let policy = |p: &str| {
        parse_config(&format!(
            "flags:\n  plugin:\n    sharedDevicesAllocationPolicy: {p}\n"
        ))
    };
    assert!(policy("packed").is_ok() && policy("distributed").is_ok());
    assert!(
        policy("spread")
            .unwrap_err()
            .contains("shared-devices-allocation-policy")
    );
    assert!(parse_config(": : :\n- [").is_err());
    assert!(parse_config("sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: some\n").is_err());
    let both = "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n  mps:\n    resources:\n    - name: gpu\n      replicas: 4\n";
    assert_eq!(parse_config(both).unwrap().sharing.unwrap().strategy, "mps");
    assert_eq!(parse_config("").unwrap(), DpConfig::default());
    let short = parse_config(
        "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 3\n",
    )
    .unwrap();
    assert_eq!(short.sharing.unwrap().resources[0].0, "nvidia.com/gpu");
}

#[test]
fn time_slicing_and_rename() {
    let mut t = twin("aks");
    t.loaded.config_name = "cfg".into();
    t.loaded.configmap = Some(BTreeMap::from([("ts".to_string(), TS10.to_string())]));
    let ts = BTreeMap::from([(CONFIG_LABEL.to_string(), "ts".to_string())]);
    let a = advertise(&started(&t, &ts), &ts, &on()).unwrap();
    assert_eq!(a.resources["nvidia.com/gpu"], 10);
    assert_eq!(
        a.labels["nvidia.com/gpu.product"],
        "NVIDIA-A100-80GB-PCIe-SHARED"
    );
    let renamed = TS10.replace(
        "timeSlicing:\n",
        "timeSlicing:\n    renameByDefault: true\n",
    );
    t.loaded.configmap = Some(BTreeMap::from([("ts".to_string(), renamed)]));
    let a = advertise(&started(&t, &ts), &ts, &on()).unwrap();
    assert_eq!(a.resources.get("nvidia.com/gpu"), None);
    assert_eq!(a.resources["nvidia.com/gpu.shared"], 10);
    assert_eq!(a.labels["nvidia.com/gpu.product"], "NVIDIA-A100-80GB-PCIe");
    assert_eq!(a.labels["nvidia.com/gpu.sharing-strategy"], "time-slicing");
}

/// The MIG manager as the GPU operator chart sets it up.
fn on() -> MigManager {
    MigManager {
        enabled: true,
        default_config: "all-disabled".into(),
        ..MigManager::default()
    }
}

#[test]
fn the_operator_disables_mig_on_nodes_that_name_no_mig_config() {
    let mut t = twin("aks");
    t.mig_profile = Some("1g.10gb".into());
    t.mig_instances_per_gpu = 7;
    let none = BTreeMap::new();
    assert_eq!(operator_mig_label(&t, &none, &on()), Some("all-disabled"));
    assert_eq!(operator_mig_label(&t, &none, &MigManager::default()), None);
    let disabled = BTreeMap::from([(MIG_CONFIG_LABEL.to_string(), "all-disabled".to_string())]);
    assert_eq!(mig_manager(&t, &disabled, &on()), (None, Some("success")));
    let own = BTreeMap::from([(MIG_CONFIG_LABEL.to_string(), "all-1g.10gb".to_string())]);
    assert_eq!(operator_mig_label(&t, &own, &on()), None);
    assert_eq!(
        mig_manager(&t, &own, &on()),
        (Some(("1g.10gb".into(), 7)), Some("success"))
    );
    let mut t4 = twin("aks");
    t4.gpu_product = Some("Tesla-T4".into());
    assert_eq!(
        operator_mig_label(&t4, &none, &on()),
        None,
        "not MIG-capable"
    );
}

#[test]
fn mig_strategies() {
    let mut t = twin("aks");
    t.gpus = 2;
    t.mig_profile = Some("1g.10gb".into());
    t.mig_instances_per_gpu = 7;
    assert_eq!(
        advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on())
            .unwrap()
            .resources["nvidia.com/gpu"],
        14
    );
    t.loaded.mig_strategy = "mixed".into();
    let a = advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on()).unwrap();
    assert_eq!(a.resources["nvidia.com/mig-1g.10gb"], 14);
    assert!(!a.resources.contains_key("nvidia.com/gpu"));
    let mut e = twin("eks");
    let labels = BTreeMap::from([(MIG_CONFIG_LABEL.to_string(), "all-3g.40gb".to_string())]);
    assert_eq!(
        mig_manager(&e, &labels, &on()),
        (Some(("3g.40gb".into(), 2)), Some("success"))
    );
    assert_eq!(
        advertise(&started(&e, &labels), &labels, &on())
            .unwrap()
            .resources["nvidia.com/gpu"],
        2
    );
    e.gpu_product = Some("Tesla-T4".into());
    e.gpu_memory_mib = 15360;
    assert_eq!(mig_manager(&e, &labels, &on()), (None, Some("failed")));
}

#[test]
fn mixed_mig_time_sliced_and_config_selection() {
    let mut t = twin("aks");
    t.mig_profile = Some("3g.40gb".into());
    t.mig_instances_per_gpu = 2;
    t.loaded = PluginInputs {
        config_name: "cfg".into(),
        fallbacks: vec!["empty".into()],
        config_default: String::new(),
        mig_strategy: "mixed".into(),
        configmap: Some(BTreeMap::from([
            ("default".to_string(), String::new()),
            ("mig-ts".to_string(), "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-3g.40gb\n      replicas: 3\n".to_string()),
        ])),
        plugin_version: None,
    };
    // No label and no ClusterPolicy default: the operator's FALLBACK_STRATEGIES=empty links
    // /dev/null, the empty config (a key named "default" is not looked for).
    let a = advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on()).unwrap();
    assert_eq!(
        a.resources,
        BTreeMap::from([("nvidia.com/mig-3g.40gb".to_string(), 2)])
    );
    let label = BTreeMap::from([(CONFIG_LABEL.to_string(), "mig-ts".to_string())]);
    let a = advertise(&started(&t, &label), &label, &on()).unwrap();
    assert_eq!(
        a.resources,
        BTreeMap::from([("nvidia.com/mig-3g.40gb".to_string(), 6)])
    );
    assert_eq!(a.labels["nvidia.com/mig-3g.40gb.replicas"], "3");
    // A label naming no key: the pod never starts, the node serves no GPU.
    let missing = BTreeMap::from([(CONFIG_LABEL.to_string(), "gone".to_string())]);
    assert_eq!(
        advertise(&started(&t, &missing), &missing, &on()).unwrap_err(),
        "config-manager-init: specified config gone does not exist"
    );
    // A ClusterPolicy default that exists serves a node with no label.
    t.loaded.config_default = "mig-ts".into();
    let a = advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on()).unwrap();
    assert_eq!(a.resources["nvidia.com/mig-3g.40gb"], 6);
    t.loaded.config_default = String::new();
    // MPS on MIG devices is refused.
    t.loaded.configmap = Some(BTreeMap::from([(
        "m".to_string(),
        "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
            .to_string(),
    )]));
    let m = BTreeMap::from([(CONFIG_LABEL.to_string(), "m".to_string())]);
    assert!(
        advertise(&started(&t, &m), &m, &on())
            .unwrap_err()
            .contains("MPS")
    );
    // A missing ConfigMap: refused (the plugin pod cannot mount it).
    t.loaded.configmap = None;
    assert!(
        advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on())
            .unwrap_err()
            .contains("not found")
    );
}

#[test]
fn gke_math() {
    let mut t = twin("gke");
    t.gpus = 2;
    t.gke_sharing = Some(("TIME_SHARING".into(), 5));
    assert_eq!(
        advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on())
            .unwrap()
            .resources["nvidia.com/gpu"],
        10
    );
    t.mig_profile = Some("1g.10gb".into());
    t.mig_instances_per_gpu = 7;
    assert_eq!(
        advertise(&started(&t, &BTreeMap::new()), &BTreeMap::new(), &on())
            .unwrap()
            .resources["nvidia.com/gpu"],
        70
    );
}

/// The kubelet's admission on a node whose NVIDIA plugin runs strict MPS x4, and on a
/// Bottlerocket node, whose host plugin reads no such config: two slices are refused on the
/// one and handed out in order on the other.
#[test]
fn the_kubelet_refuses_two_mps_slices_only_where_nvidias_plugin_says_so() {
    use super::config_manager::Reader;
    use super::kubelet::{Admission, admit};
    use serde_json::json;
    let mut t = twin("aks");
    t.readers.plugin = Reader {
        linked: Some("mps".into()),
        loaded: Some(
            "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
                .into(),
        ),
        ..Reader::default()
    };
    let room = BTreeMap::from([("nvidia.com/gpu".to_string(), 4)]);
    let pod = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}});
    match admit("n", &t, &room, &pod, &[]) {
        Admission::Reject(reason, message) => {
            assert_eq!(reason, "UnexpectedAdmissionError");
            assert!(message.contains("found 2"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    t.host_device_plugin = true;
    match admit("n", &t, &room, &pod, &[]) {
        Admission::Admit(held) => assert_eq!(held[0].devices, ["GPU-n-0", "GPU-n-1"]),
        other => panic!("{other:?}"),
    }
}
