//! The provider's logs reach terraform's log with their levels: terraform parses each JSON line
//! the provider writes to stderr and re-logs it under the provider's name at the line's level.
//! A line terraform could not parse would show up as raw JSON text instead.

use std::time::Duration;

use crate::common::terraform::{Output, REQUIRED_PROVIDERS, Workspace};

fn config(url: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
}}

resource "fracgpu_nodepool" "p" {{
  name         = "logged"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  time_slicing {{ replicas = 4 }}
}}
"#
    )
}

/// Lines terraform logged for the provider at `level` (e.g. "INFO").
fn provider_lines<'a>(out: &'a Output, level: &str) -> Vec<&'a str> {
    let tag = format!("[{level}]");
    out.stderr
        .lines()
        .filter(|l| l.contains(&tag) && l.contains("provider.terraform-provider-fracgpu"))
        .collect()
}

fn assert_all_parsed(out: &Output) {
    let raw: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("\"@level\"") || l.contains("\"@message\""))
        .collect();
    assert!(
        raw.is_empty(),
        "terraform could not parse these provider lines: {raw:#?}"
    );
}

#[test]
fn tf_log_debug_shows_the_provider_lines_at_their_levels() {
    let sb = crate::common::sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url)).env("TF_LOG", "debug");
    ws.init();
    let apply = ws.apply();
    assert_all_parsed(&apply);
    let info = provider_lines(&apply, "INFO");
    let created = info
        .iter()
        .find(|l| l.contains("creating node pool"))
        .unwrap_or_else(|| panic!("no INFO line for the create in:\n{}", apply.stderr));
    // The event's fields and module travel as key=value pairs.
    assert!(created.contains("cloud=aks"), "{created}");
    assert!(created.contains("pool=logged"), "{created}");
    assert!(
        created.contains("@module=fracgpu.resources.nodepool"),
        "{created}"
    );
    assert!(
        info.iter()
            .any(|l| l.contains("node pool created") && l.contains("elapsed_ms=")),
        "{info:#?}"
    );

    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    assert_all_parsed(&plan);
    assert!(
        provider_lines(&plan, "DEBUG")
            .iter()
            .any(|l| l.contains("reading node pool")),
        "no DEBUG line for the refresh in:\n{}",
        plan.stderr
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

#[test]
fn tf_log_provider_selects_the_provider_alone_and_its_level_filters() {
    let sb = crate::common::sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url));
    ws.init();

    // Without TF_LOG terraform logs nothing of ours.
    let quiet = ws.apply();
    assert!(
        provider_lines(&quiet, "INFO").is_empty(),
        "{}",
        quiet.stderr
    );

    // TF_LOG_PROVIDER=info: our info lines, none of our debug lines, none of terraform's own.
    let destroy = ws.run_with(
        &["destroy", "-auto-approve", "-no-color", "-input=false"],
        &[("TF_LOG_PROVIDER", "info")],
    );
    assert_eq!(destroy.code, 0, "{}", destroy.text());
    assert_all_parsed(&destroy);
    assert!(
        provider_lines(&destroy, "INFO")
            .iter()
            .any(|l| l.contains("deleting node pool")),
        "{}",
        destroy.stderr
    );
    assert!(
        provider_lines(&destroy, "DEBUG").is_empty(),
        "{}",
        destroy.stderr
    );
    assert!(
        !destroy.stderr.contains("Terraform version"),
        "core logs are off when only TF_LOG_PROVIDER is set:\n{}",
        destroy.stderr
    );

    // TF_LOG=warn: terraform's log is on, and our info lines are not even written.
    let apply = ws.run_with(
        &["apply", "-auto-approve", "-no-color", "-input=false"],
        &[("TF_LOG", "warn")],
    );
    assert_eq!(apply.code, 0, "{}", apply.text());
    assert!(
        !apply.stderr.contains("creating node pool"),
        "{}",
        apply.stderr
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
