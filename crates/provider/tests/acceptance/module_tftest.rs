//! The fractional-gpu-pool module's own `terraform test` suite, run by the real terraform against
//! the sandbox stack through the offline provider mirror: it must pass, leave nothing behind, and
//! be able to fail (a wrong expectation, a refused input without `expect_failures`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::sandbox::RunningStack;
use crate::common::terraform::Workspace;

fn module_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("examples/modules/fractional-gpu-pool")
}

/// The names of the run blocks of a test file.
fn run_names(tftest: &str) -> Vec<String> {
    tftest
        .lines()
        .filter_map(|l| l.strip_prefix("run \""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_string)
        .collect()
}

fn workspace(stack: &RunningStack) -> Workspace {
    let ws = Workspace::with_tree(&module_dir(), "").env("FRACGPU_SANDBOX", &stack.url);
    ws.init();
    ws
}

#[test]
fn module_tests_pass_against_the_sandbox() {
    let stack = crate::common::sandbox::start_stack(Duration::ZERO);
    let ws = workspace(&stack);
    let kubeconfigs = format!("kubeconfigs={}", stack.kubeconfigs_var());
    let out = ws.run(&["test", "-no-color", "-var", &kubeconfigs]);
    assert_eq!(out.code, 0, "terraform test failed:\n{}", out.text());

    // Every run of every file ran and passed.
    let mut expected = 0;
    for file in ["clouds.tftest.hcl", "validation.tftest.hcl"] {
        let text = std::fs::read_to_string(module_dir().join("tests").join(file)).unwrap();
        let names = run_names(&text);
        assert!(names.len() >= 4, "{file}: {names:?}");
        for name in &names {
            assert!(
                out.stdout.contains(&format!("run \"{name}\"... pass")),
                "{file}: run {name} passes:\n{}",
                out.stdout
            );
        }
        expected += names.len();
    }
    assert!(
        out.stdout
            .contains(&format!("Success! {expected} passed, 0 failed.")),
        "{}",
        out.stdout
    );
    // terraform test destroys what its runs made, in the clouds and in the clusters.
    assert_eq!(stack.pools(), vec![]);
    assert!(
        stack
            .stack
            .kube
            .object(
                "aks",
                "sandbox-aks",
                "configmaps",
                "gpu-operator",
                "time-slicing-config"
            )
            .is_none(),
        "the device plugin config is gone from the AKS cluster"
    );

    // The validation file only plans and makes no cloud call: it passes without any sandbox.
    let offline = Workspace::with_tree(&module_dir(), "").env("FRACGPU_SANDBOX", "");
    offline.init();
    let out = offline.run(&["test", "-no-color", "-filter=tests/validation.tftest.hcl"]);
    assert_eq!(out.code, 0, "{}", out.text());
    assert!(out.stdout.contains("Success!"), "{}", out.stdout);
}

#[test]
fn module_tests_report_failures() {
    let stack = crate::common::sandbox::start_stack(Duration::ZERO);
    let ws = workspace(&stack);
    let kubeconfigs = format!("kubeconfigs={}", stack.kubeconfigs_var());
    let tests = module_dir().join("tests");

    // A wrong expectation in the first apply run: the assertion's message is reported, the
    // suite fails, and the pool it made is destroyed anyway.
    let clouds = std::fs::read_to_string(tests.join("clouds.tftest.hcl")).unwrap();
    let right = "output.slices_per_node == 4\n";
    assert!(clouds.contains(right));
    ws.write(
        "tests/wrong_slices.tftest.hcl",
        &clouds.replacen(right, "output.slices_per_node == 5\n", 1),
    );
    let out = ws.run(&[
        "test",
        "-no-color",
        "-filter=tests/wrong_slices.tftest.hcl",
        "-var",
        &kubeconfigs,
    ]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        out.stdout.contains("run \"aks_time_slicing\"... fail"),
        "{}",
        out.stdout
    );
    assert!(
        out.text().contains(
            "Workloads should request nvidia.com/gpu, 4 per node; got nvidia.com/gpu, 4."
        ),
        "the failed assertion's message is shown:\n{}",
        out.text()
    );
    assert!(out.stdout.contains("Failure!"), "{}", out.stdout);
    assert_eq!(stack.pools(), vec![], "a failed suite still cleans up");

    // A refused input without expect_failures: the module's validation message comes through.
    let validation = std::fs::read_to_string(tests.join("validation.tftest.hcl")).unwrap();
    let unexpected: String = validation
        .lines()
        .filter(|l| !l.trim_start().starts_with("expect_failures"))
        .map(|l| format!("{l}\n"))
        .collect();
    ws.write("tests/unexpected.tftest.hcl", &unexpected);
    let out = ws.run(&["test", "-no-color", "-filter=tests/unexpected.tftest.hcl"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        out.stdout.contains("run \"unknown_cloud\"... fail"),
        "{}",
        out.stdout
    );
    assert!(
        out.text()
            .contains(r#"var.cloud is "azure"; set it to "aks", "gke" or "eks"."#),
        "the validation message names the variable and the fix:\n{}",
        out.text()
    );
}
