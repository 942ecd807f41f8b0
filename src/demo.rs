//! `fracgpu-sandbox demo`: the README's first command. Builds the provider if needed, lays it out
//! as a local filesystem mirror, and runs an example through the real terraform binary, printing
//! progress and what a user wants to see.

use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct DemoError(pub String);

fn step(msg: &str) {
    eprintln!("==> {msg}");
}

/// The provider binary next to this one, built with cargo when it is missing or older.
fn provider_binary() -> Result<PathBuf, DemoError> {
    let me =
        std::env::current_exe().map_err(|e| DemoError(format!("cannot locate myself: {e}")))?;
    let dir = me
        .parent()
        .ok_or_else(|| DemoError("executable has no directory".into()))?;
    let provider = dir.join("terraform-provider-fracgpu");
    let stale = match (std::fs::metadata(&provider), std::fs::metadata(&me)) {
        (Ok(p), Ok(m)) => p.modified().ok() < m.modified().ok(),
        _ => true,
    };
    if stale {
        step("building terraform-provider-fracgpu");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = dir.ends_with("release");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--bin", "terraform-provider-fracgpu"]);
        if release {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .map_err(|e| DemoError(format!("could not run cargo: {e}")))?;
        if !status.success() {
            return Err(DemoError(
                "building the provider failed (see cargo's output above)".into(),
            ));
        }
    }
    Ok(provider)
}

fn terraform(dir: &Path, cli_config: &Path, args: &[&str]) -> Result<String, DemoError> {
    let out = Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", cli_config)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .map_err(|e| {
            DemoError(format!(
                "could not run terraform ({e}); install Terraform >= 1.8 and put it on the PATH"
            ))
        })?;
    if !out.status.success() {
        return Err(DemoError(format!(
            "terraform {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes the mirror layout and a CLI config that installs the provider from it, offline.
pub fn local_mirror(root: &Path, provider: &Path) -> Result<PathBuf, DemoError> {
    let io = |e: std::io::Error| DemoError(format!("preparing the provider mirror: {e}"));
    let arch = if cfg!(target_arch = "aarch64") {
        "linux_arm64"
    } else {
        "linux_amd64"
    };
    let pkg = root.join(format!(
        "mirror/registry.terraform.io/fracgpu/fracgpu/{VERSION}/{arch}"
    ));
    std::fs::create_dir_all(&pkg).map_err(io)?;
    let target = pkg.join(format!("terraform-provider-fracgpu_v{VERSION}"));
    let _ = std::fs::remove_file(&target);
    std::fs::copy(provider, &target).map_err(io)?;
    let cli = root.join("terraformrc");
    std::fs::write(
        &cli,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = {:?}\n    include = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n}}\n",
            root.join("mirror").display().to_string()
        ),
    )
    .map_err(io)?;
    Ok(cli)
}

pub fn run() -> Result<(), DemoError> {
    let provider = provider_binary()?;
    let root = std::env::temp_dir().join(format!("fracgpu-demo-{}", std::process::id()));
    let work = root.join("work");
    std::fs::create_dir_all(&work).map_err(|e| DemoError(e.to_string()))?;
    let cli = local_mirror(&root, &provider)?;
    std::fs::write(
        work.join("main.tf"),
        include_str!("../examples/data-sources/fracgpu_machine_type/data-source.tf"),
    )
    .map_err(|e| DemoError(e.to_string()))?;

    step("terraform init (offline, from a local provider mirror)");
    terraform(&work, &cli, &["init", "-input=false", "-no-color"])?;
    step("terraform apply: look up the A100 machine types of AKS, GKE and EKS");
    terraform(
        &work,
        &cli,
        &["apply", "-auto-approve", "-input=false", "-no-color"],
    )?;
    let out = terraform(&work, &cli, &["output", "-json", "machines"])?;
    let machines: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| DemoError(e.to_string()))?;

    println!(
        "\n{:<6} {:<26} {:<32} MIG profiles",
        "cloud", "machine type", "GPUs"
    );
    for (cloud, m) in machines.as_object().into_iter().flatten() {
        let profiles: Vec<&str> = m["mig_profiles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .collect();
        println!(
            "{:<6} {:<26} {:<32} {}",
            cloud,
            m["machine_type"].as_str().unwrap_or(""),
            m["gpu"].as_str().unwrap_or(""),
            profiles.join(", ")
        );
    }
    step("a second plan shows no changes");
    let plan = terraform(&work, &cli, &["plan", "-no-color", "-input=false"])?;
    if !plan.contains("No changes") {
        return Err(DemoError(format!("the second plan was not empty:\n{plan}")));
    }
    let _ = std::fs::remove_dir_all(&root);
    step("done; the workspace was removed");
    Ok(())
}
