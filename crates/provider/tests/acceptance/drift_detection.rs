//! Drift detection in CI: the very script the example workflow calls (examples/ci/drift-check.sh)
//! run against the real terraform and the sandbox over HTTP, on examples/multi-cluster. It must
//! say "no drift" and exit 0 on a clean plan, "drift" and exit 2 after a change made through
//! the cloud's API behind terraform's back, and "error" and exit 1 when the plan cannot be made.

use std::path::Path;
use std::time::Duration;

use crate::common::sandbox::{self, RunningStack};
use crate::common::terraform::{Output, Workspace};

const SUB: &str = "00000000-0000-0000-0000-000000000000";

fn script() -> String {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("examples/ci/drift-check.sh")
        .display()
        .to_string()
}

/// Sets the node count of an AKS pool through the ARM API, as `az aks nodepool scale` would.
fn scale_aks_pool_out_of_band(stack: &RunningStack, pool: &str, count: u64) {
    let url = format!(
        "{}/subscriptions/{SUB}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/{pool}?api-version=2025-10-01",
        stack.url
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let token: serde_json::Value = http
            .post(format!("{}/{SUB}/oauth2/v2.0/token", stack.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&client_id=ops&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let bearer = format!("Bearer {}", token["access_token"].as_str().expect("token"));
        let mut doc: serde_json::Value = http
            .get(&url)
            .header("authorization", &bearer)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        doc["properties"]["count"] = count.into();
        let put = http
            .put(&url)
            .header("authorization", &bearer)
            .json(&doc)
            .send()
            .await
            .unwrap();
        assert!(
            put.status().is_success(),
            "out-of-band PUT: {}",
            put.text().await.unwrap()
        );
    });
    stack.stack.sandbox.settle();
}

fn check(ws: &Workspace) -> Output {
    ws.run_program(&script(), &["."])
}

#[test]
fn drift_check_script_tells_clean_drift_and_error_apart() {
    let stack = sandbox::start_stack(Duration::ZERO);
    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples");
    let summary = tempfile::NamedTempFile::new().unwrap();
    // As in the workflow: the sandbox from the environment, annotations for GitHub Actions.
    let ws = Workspace::with_tree(&examples, "multi-cluster")
        .env("FRACGPU_SANDBOX", &stack.url)
        .env("TF_VAR_kubeconfigs", &stack.kubeconfigs_var())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary.path().display().to_string());
    ws.init();
    ws.apply();

    // Clean: exit 0 and says so.
    let out = check(&ws);
    assert_eq!(out.code, 0, "{}", out.text());
    assert!(
        out.stdout
            .contains("NO DRIFT in .: the infrastructure matches the configuration."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("::notice title=No drift::"),
        "{}",
        out.stdout
    );

    // Someone scales the AKS pool by hand: exit 2, naming the pool and the way back.
    scale_aks_pool_out_of_band(&stack, "t4shared", 3);
    let out = check(&ws);
    assert_eq!(out.code, 2, "{}", out.text());
    assert!(
        out.stdout
            .contains("DRIFT in .: the infrastructure no longer matches the configuration."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            r#"  - module.t4_shared["aks"].fracgpu_nodepool.this will be updated in-place"#
        ),
        "the message names the drifted pool:\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("Plan: 0 to add, 1 to change, 0 to destroy."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("::error title=Drift detected::"),
        "{}",
        out.stdout
    );
    let written = std::fs::read_to_string(summary.path()).unwrap();
    assert!(
        written.contains("### Drift detected") && written.contains(r#"module.t4_shared["aks"]"#),
        "job summary: {written}"
    );
    // The plan only looked: the pool keeps its out-of-band size until someone applies.
    assert_eq!(
        stack.stack.sandbox.inventory()["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["cloud"] == "aks")
            .unwrap()["resource"]["properties"]["count"],
        3
    );

    // The EKS API fails every read: exit 1, with the provider's diagnostic in the message.
    sandbox::inject(
        &stack.url,
        serde_json::json!({"match": {"method": "GET", "path_contains": "/node-groups/t4shared"}, "count": 1000, "kind": "500"}),
    );
    let out = check(&ws);
    sandbox::control("DELETE", &format!("{}/_sandbox/faults", stack.url), None);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        out.stdout
            .contains("ERROR in .: terraform plan failed (exit 1), so drift is unknown."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  - Error: Cloud API error"),
        "the message quotes terraform's error:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("::error title=Drift check failed::"),
        "{}",
        out.stdout
    );

    // What the drift message advises: apply, and the check is clean again.
    ws.apply();
    let out = check(&ws);
    assert_eq!(out.code, 0, "{}", out.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

/// The example workflow is valid YAML whose jobs end in the script, and it starts the sandbox
/// with flags the real `fracgpu-sandbox` accepts.
#[test]
fn workflow_calls_the_script_and_starts_the_sandbox_with_real_flags() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let text = std::fs::read_to_string(root.join("examples/ci/drift-detection.yml")).unwrap();
    let workflow: serde_json::Value = serde_saphyr::from_str(&text).expect("valid YAML");
    let runs = |job: &str| -> Vec<String> {
        workflow["jobs"][job]["steps"]
            .as_array()
            .unwrap_or_else(|| panic!("job {job} has steps"))
            .iter()
            .filter_map(|s| s["run"].as_str().map(str::to_string))
            .collect()
    };
    for job in ["sandbox", "clouds"] {
        let last = runs(job).pop().unwrap();
        assert!(
            last.starts_with("examples/ci/drift-check.sh "),
            "{job} ends with the drift check: {last}"
        );
    }
    let serve = runs("sandbox")
        .into_iter()
        .find(|r| r.contains("fracgpu-sandbox -- serve"))
        .expect("the sandbox job starts fracgpu-sandbox");
    let usage = std::process::Command::new(crate::common::sandbox::binary())
        .arg("--help")
        .output()
        .unwrap();
    let usage = String::from_utf8_lossy(&usage.stderr).into_owned();
    let flags: Vec<&str> = serve
        .split_whitespace()
        .filter(|w| w.starts_with("--") && *w != "--")
        .filter(|w| !w.starts_with("--release") && !w.starts_with("--bin"))
        .collect();
    assert!(flags.len() >= 3, "{flags:?}");
    for flag in flags {
        assert!(
            usage.contains(&format!("[{flag} ")),
            "fracgpu-sandbox knows {flag}: {usage}"
        );
    }
}
