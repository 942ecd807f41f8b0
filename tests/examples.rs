//! Every example under examples/ is applied, planned empty and destroyed by the real terraform,
//! so no example in the docs can rot.

mod common;

use std::path::{Path, PathBuf};

use common::terraform::Workspace;

/// Directories under examples/ that hold a configuration.
fn example_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
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
        example_dirs(&p, out);
    }
}

#[test]
fn every_example_applies_plans_empty_and_destroys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut dirs = Vec::new();
    example_dirs(&root, &mut dirs);
    assert!(dirs.len() >= 6, "examples found: {dirs:?}");
    // Resource examples talk to clouds: here, to the sandbox, through the same environment
    // variable a user would set.
    let sb = common::sandbox::start(std::time::Duration::ZERO);
    // Examples that need a cluster read its kubeconfig from `var.kubeconfig`.
    let stack = common::sandbox::start_stack(std::time::Duration::ZERO);
    let kubeconfig = stack.kubeconfig("aks", "sandbox-aks").display().to_string();
    for dir in dirs {
        let ws = Workspace::new("")
            .env("FRACGPU_SANDBOX", &sb.url)
            .env("TF_VAR_kubeconfig", &kubeconfig);
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tf") {
                ws.write(&name, &std::fs::read_to_string(entry.path()).unwrap());
            }
        }
        ws.init();
        ws.apply();
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(
            code,
            0,
            "{}: the plan after apply is not empty:\n{}",
            dir.display(),
            plan.text()
        );
        ws.ok(&["destroy", "-auto-approve", "-no-color"]);
        assert_eq!(
            sb.pools(),
            vec![],
            "{}: destroy leaves nothing behind",
            dir.display()
        );
    }
}
