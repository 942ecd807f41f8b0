//! The whole sandbox stack: with `--state`, the clusters' Kubernetes objects survive a restart
//! like the cloud world does.

use std::time::Duration;

use sandbox::Config;
use sandbox::stack::Stack;
use testkit::tools::{self, Tool};

#[test]
fn kubernetes_objects_survive_a_restart() {
    let Some(kubectl) = tools::require(Tool::Kubectl) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("world.json");
    let config = || Config {
        op_time: Duration::ZERO,
        state_file: Some(state.clone()),
        ..Config::default()
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stack = rt.block_on(Stack::start(config(), 0)).unwrap();
    let kubeconfigs = stack.write_kubeconfigs(&dir.path().join("kube")).unwrap();
    let (_, _, aks) = kubeconfigs.iter().find(|(c, _, _)| c == "aks").unwrap();
    let out = std::process::Command::new(&kubectl)
        .args([
            "--kubeconfig",
            aks.to_str().unwrap(),
            "create",
            "configmap",
            "kept",
            "-n",
            "gpu-operator",
            "--from-literal=k=v",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The snapshot is written after the change, off the request path.
    let kube_state = state.with_extension("kube.json");
    let t = std::time::Instant::now();
    while !std::fs::read_to_string(&kube_state)
        .unwrap_or_default()
        .contains("kept")
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "kubernetes state written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stack);
    drop(rt);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stack = rt.block_on(Stack::start(config(), 0)).unwrap();
    let cm = stack
        .kube
        .object("aks", "sandbox-aks", "configmaps", "gpu-operator", "kept")
        .expect("restored");
    assert_eq!(cm["data"]["k"], "v");
    // The operator objects are not duplicated on restore.
    assert!(
        stack
            .kube
            .object(
                "aks",
                "sandbox-aks",
                "clusterpolicies.nvidia.com",
                "",
                "cluster-policy"
            )
            .is_some()
    );
}
