//! Every example under examples/ is applied, planned empty and destroyed by the real terraform,
//! so no example in the docs can rot. Modules (examples/modules/*) are not root configurations:
//! they are applied through the examples that call them and by their own `terraform test`
//! (tests/acceptance/module_tftest.rs).

use std::path::{Path, PathBuf};

use crate::common::sandbox::RunningStack;
use crate::common::terraform::Workspace;

/// Directories under examples/ that hold a root configuration.
fn example_dirs(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    // Modules are not root configurations; actions need terraform 1.14 or later, and
    // tests/acceptance/actions.rs runs their examples with terraform 1.15; the Karpenter pool
    // needs Karpenter's CRDs, which the sandbox does not serve, and
    // tests/acceptance/karpenter_nodepool.rs runs its example on a control plane (`testkit::apiserver`);
    // the standalone device plugin's needs a cluster without the operator and the chart
    // installed, which tests/acceptance/device_plugin_config_standalone.rs makes.
    if dir == root.join("modules")
        || dir == root.join("actions")
        || dir == root.join("resources/fracgpu_karpenter_nodepool")
        || dir == root.join("standalone-device-plugin")
    {
        return;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    if entries
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "tf"))
    {
        out.push(dir.to_path_buf());
    }
    for p in entries.into_iter().filter(|p| p.is_dir()) {
        example_dirs(root, &p, out);
    }
}

/// What an example promises beyond applying cleanly, checked on the sandbox's clusters.
fn check_outcome(example: &str, ws: &Workspace, stack: &RunningStack) {
    if example != "multi-cluster" {
        return;
    }
    let pools = &ws.output_json()["pools"]["value"];
    for cloud in ["aks", "gke", "eks"] {
        let pool = &pools[cloud];
        let resource = pool["resource_name"].as_str().unwrap();
        let slices = pool["slices_per_node"].as_u64().unwrap();
        assert_eq!((resource, slices), ("nvidia.com/gpu", 4), "{cloud}: {pool}");
        let nodes = stack.nodes(cloud, &format!("sandbox-{cloud}"), "t4shared");
        assert_eq!(nodes.len(), 2, "{cloud}: node_count = 2 makes two nodes");
        for node in &nodes {
            let name = node["metadata"]["name"].as_str().unwrap_or("?");
            for (k, v) in pool["node_selector"].as_object().unwrap() {
                assert_eq!(
                    &node["metadata"]["labels"][k], v,
                    "{cloud} node {name}: label {k} of the pool's node_selector"
                );
            }
            // On AKS and EKS only the device plugin config the module delivered turns one T4
            // into four; on GKE the cloud's own sharing does.
            assert_eq!(
                node["status"]["allocatable"][resource],
                slices.to_string(),
                "{cloud} node {name} advertises the shared GPU: {}",
                node["status"]["allocatable"]
            );
        }
    }
}

#[test]
fn every_example_applies_plans_empty_and_destroys() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples");
    let mut dirs = Vec::new();
    example_dirs(&root, &root, &mut dirs);
    assert!(dirs.len() >= 7, "examples found: {dirs:?}");
    assert!(
        dirs.iter().all(|d| !d.starts_with(root.join("modules"))),
        "a module is not applied as a root configuration: {dirs:?}"
    );
    // Examples talk to clouds and clusters: here, to the sandbox stack, through the same
    // environment variable a user would set. Examples that need a cluster read its kubeconfig from
    // `var.kubeconfig`; examples spanning clusters read one per cloud from `var.kubeconfigs`.
    let stack = crate::common::sandbox::start_stack(std::time::Duration::ZERO);
    let kubeconfig = stack.kubeconfig("aks", "sandbox-aks").display().to_string();
    let kubeconfigs = stack.kubeconfigs_var();
    for dir in dirs {
        let rel = dir
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // A copy of the whole tree, so that `../modules/...` sources resolve.
        let ws = Workspace::with_tree(&root, &rel)
            .env("FRACGPU_SANDBOX", &stack.url)
            .env("TF_VAR_kubeconfig", &kubeconfig)
            .env("TF_VAR_kubeconfigs", &kubeconfigs);
        ws.init();
        ws.apply();
        check_outcome(&rel, &ws, &stack);
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(
            code,
            0,
            "{rel}: the plan after apply is not empty:\n{}",
            plan.text()
        );
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        assert_eq!(
            stack.pools(),
            vec![],
            "{rel}: destroy leaves nothing behind"
        );
    }
}

/// Examples are what users copy: they are in `terraform fmt`'s canonical layout, tests included.
#[test]
fn every_example_is_terraform_fmt_clean() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples");
    let out = std::process::Command::new(crate::common::terraform::terraform())
        .args(["fmt", "-check", "-recursive", "-list=true", "-no-color"])
        .arg(&root)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("terraform runs");
    assert!(
        out.status.success(),
        "not `terraform fmt` clean (run `terraform fmt -recursive examples`):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
