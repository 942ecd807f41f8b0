//! Driving the real terraform binary against the freshly built provider, offline: the provider
//! is laid out as a filesystem mirror, a CLI config points terraform at it, and every command
//! runs with CHECKPOINT_DISABLE=1 in a workspace of its own.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// stdout and stderr together, the way a user reads them.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// Asserts a plan that updates in place (never replaces) and sets each of `attrs` where the
    /// state had none (`+ attr = ...`), as the first plan after an import does for what the
    /// cluster does not keep.
    pub fn assert_sets_in_place(&self, attrs: &[&str]) {
        let out = &self.stdout;
        assert!(
            out.contains("will be updated in-place") && !out.contains("must be replaced"),
            "{out}"
        );
        for attr in attrs {
            assert!(
                out.lines()
                    .any(|l| l.trim_start().starts_with(&format!("+ {attr} "))),
                "{attr} in {out}"
            );
        }
    }
}

/// Terraform's output with its line wrapping undone, for matching phrases of a diagnostic.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub struct Workspace {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    cli_config: PathBuf,
    env: Vec<(String, String)>,
    /// The terraform this workspace runs (see [`Workspace::with_terraform`]).
    terraform: String,
}

fn platform() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "linux_arm64",
        _ => "linux_amd64",
    }
}

/// Lays out the provider binary as HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/terraform-provider-TYPE_vVERSION.
pub fn mirror(root: &Path) -> PathBuf {
    let mirror = root.join("mirror");
    let pkg = mirror.join(format!(
        "registry.terraform.io/fracgpu/fracgpu/{VERSION}/{}",
        platform()
    ));
    std::fs::create_dir_all(&pkg).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_terraform-provider-fracgpu"),
        pkg.join(format!("terraform-provider-fracgpu_v{VERSION}")),
    )
    .unwrap();
    mirror
}

/// Copies a directory tree, leaving out what terraform leaves behind in a working directory.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let name = entry.file_name();
        let n = name.to_string_lossy();
        if n == ".terraform" || n == ".terraform.lock.hcl" || n.starts_with("terraform.tfstate") {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}

impl Workspace {
    /// A workspace holding a copy of the tree at `src`, working in its subdirectory `rel`, so
    /// that relative module sources (`../modules/x`) resolve as they do in the repository.
    pub fn with_tree(src: &Path, rel: &str) -> Workspace {
        let ws = Workspace::new("");
        std::fs::remove_file(ws.dir.join("main.tf")).unwrap();
        let tree = ws.dir.join("tree");
        copy_tree(src, &tree);
        Workspace {
            dir: tree.join(rel),
            ..ws
        }
    }

    /// A workspace that installs this crate's provider from a mirror of the build.
    pub fn new(main_tf: &str) -> Workspace {
        Workspace::with_cli_config(main_tf, |root| {
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path = {:?}\n    include = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/fracgpu/fracgpu\"]\n  }}\n}}\n",
                mirror(root).display().to_string()
            )
        })
    }

    /// A workspace whose CLI config installs providers only from the given filesystem mirror (any
    /// layout terraform reads), with no direct access to any registry.
    pub fn with_mirror(main_tf: &str, mirror: &Path) -> Workspace {
        Workspace::with_cli_config(main_tf, |_| {
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path = {:?}\n  }}\n}}\n",
                mirror.display().to_string()
            )
        })
    }

    /// A fresh directory holding `main.tf`, with the CLI config `cli_config` writes for the
    /// workspace's root directory.
    fn with_cli_config(main_tf: &str, cli_config: impl FnOnce(&Path) -> String) -> Workspace {
        let root = tempfile::tempdir().unwrap();
        let config_path = root.path().join("terraformrc");
        std::fs::write(&config_path, cli_config(root.path())).unwrap();
        let dir = root.path().join("work");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.tf"), main_tf).unwrap();
        Workspace {
            dir,
            cli_config: config_path,
            env: Vec::new(),
            _root: root,
            terraform: terraform(),
        }
    }

    /// Runs another terraform (e.g. 1.15 from `scripts/test-tools`) in this workspace.
    pub fn with_terraform(mut self, terraform: &Path) -> Workspace {
        self.terraform = terraform.display().to_string();
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Workspace {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn write(&self, name: &str, content: &str) {
        std::fs::write(self.dir.join(name), content).unwrap();
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// Runs a command with extra environment variables for this run only.
    pub fn run_with(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        self.run_program_with(&self.terraform, args, extra_env)
    }

    /// Runs any program (e.g. a script that calls terraform) in the workspace with terraform's
    /// environment: the offline provider mirror, no checkpoint calls, the workspace's variables.
    pub fn run_program(&self, program: &str, args: &[&str]) -> Output {
        self.run_program_with(program, args, &[])
    }

    fn run_program_with(&self, program: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        let mut cmd = self.program_command(program, args);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("could not run {program}: {e}"));
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The command [`Workspace::run`] runs, for a test that must watch the process (e.g. the
    /// provider it starts) while it runs.
    pub fn command(&self, args: &[&str]) -> Command {
        self.program_command(&self.terraform, args)
    }

    fn program_command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("TERRAFORM", &self.terraform)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("NO_COLOR", "1")
            .env_remove("TF_LOG");
        // FRACGPU_TF_LOG=debug shows terraform's and the provider's logs in a failing test's output.
        if let Ok(level) = std::env::var("FRACGPU_TF_LOG") {
            cmd.env("TF_LOG", level);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs a command that must succeed; on failure the test fails with terraform's output.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert_eq!(
            out.code,
            0,
            "terraform {} failed:\n{}",
            args.join(" "),
            out.text()
        );
        out
    }

    pub fn init(&self) -> Output {
        self.ok(&["init", "-no-color", "-input=false"])
    }

    pub fn apply(&self) -> Output {
        self.ok(&["apply", "-no-color", "-auto-approve", "-input=false"])
    }

    /// `terraform plan -detailed-exitcode`: 0 no changes, 2 changes, 1 error.
    pub fn plan_exit_code(&self) -> (i32, Output) {
        let out = self.run(&["plan", "-no-color", "-detailed-exitcode", "-input=false"]);
        (out.code, out)
    }

    pub fn show_json(&self) -> serde_json::Value {
        let out = self.ok(&["show", "-json", "-no-color"]);
        serde_json::from_str(&out.stdout).expect("terraform show -json prints JSON")
    }

    pub fn output_json(&self) -> serde_json::Value {
        let out = self.ok(&["output", "-json", "-no-color"]);
        serde_json::from_str(&out.stdout).expect("terraform output -json prints JSON")
    }
}

/// The terraform binary: TERRAFORM if set, else the one on the PATH.
pub fn terraform() -> String {
    std::env::var("TERRAFORM").unwrap_or_else(|_| "terraform".into())
}

/// The terraform configuration header naming this provider.
pub const REQUIRED_PROVIDERS: &str =
    "terraform {\n  required_providers {\n    fracgpu = { source = \"fracgpu/fracgpu\" }\n  }\n}\n";
