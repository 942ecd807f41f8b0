//! A Kubernetes control plane for the tests, one per test (so cluster-scoped objects such as the
//! GPU operator's `cluster-policy` never meet another test's), in one of two forms behind one
//! type:
//!
//! - **real** ([`real`]): etcd and kube-apiserver from the folder `KUBEBUILDER_ASSETS` names
//!   (controller-runtime's envtest convention; etcd may also come from the PATH), started the way
//!   envtest starts them: loopback only, a CA and certificates made here, RBAC on, no kubelet, no
//!   scheduler and no controllers. No registry ships these binaries, so this tier is optional.
//! - **sandbox** ([`sandbox`]): `fracgpu-sandbox apiserver`, the project's own Kubernetes API
//!   serving one bare cluster the same way (loopback, its own CA, RBAC, no controllers), given
//!   the real server's OpenAPI documents from the fixtures.
//!
//! [`ApiServer::start`] takes the real one where `KUBEBUILDER_ASSETS` is set and the sandbox
//! otherwise, so every Kubernetes-side test runs in CI. A test that checks what only a real
//! control plane shows asks [`ApiServer::start_real`], which says the test did not run
//! ([`crate::tools::not_run`]) when there is none; [`ApiServer::start_sandbox`] is the sandbox
//! whatever is set (the differential test compares the two).

mod hooks;
mod process;
mod real;
mod sandbox;
mod serve;

use process::{ADMIN_TOKEN, tail};

pub use hooks::HookJobs;
pub use sandbox::binary as sandbox_binary;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::tools::{self, Tool};

/// Which control plane serves the API.
enum Backend {
    Real(real::Real),
    Sandbox(sandbox::Sandboxed),
    Serve(serve::Served),
}

/// A running control plane; its processes are killed and its files removed on drop.
pub struct ApiServer {
    dir: tempfile::TempDir,
    backend: Backend,
    /// `https://127.0.0.1:<port>` (and a cluster's path on `serve`).
    pub url: String,
    /// The admin's bearer token.
    token: String,
    kubectl: Option<PathBuf>,
}

/// Where the third-party test data lives: `FRACGPU_FIXTURES_DIR`, else `shared/fixtures` beside
/// the checkout (`<repo>/../shared/fixtures`). The CRDs and NVIDIA's charts are read from there,
/// never copied into the repository. None (after saying so, or failing under CI) when missing.
pub fn fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("FRACGPU_FIXTURES_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/fixtures"
            ))
            .to_path_buf()
        });
    if dir.join("PROVENANCE.md").is_file() {
        return Some(dir);
    }
    let why = format!(
        "the third-party fixtures (CRDs, NVIDIA's charts) are not at {}",
        dir.display()
    );
    if tools::in_ci() {
        panic!(
            "{why}: CI must run this test; lay out shared/fixtures beside the checkout or set \
                FRACGPU_FIXTURES_DIR"
        );
    }
    eprintln!("SKIPPED: {why}; set FRACGPU_FIXTURES_DIR (under CI=true this is a failure)");
    None
}

/// The packaged gpu-operator chart of the fixtures.
pub const GPU_OPERATOR_CHART: &str = "charts/gpu-operator-v25.10.1.tgz";

/// What a real kube-apiserver v1.34.9 serves about itself (discovery, OpenAPI), in the fixtures.
pub const KUBE_API_DOCS: &str = "kube-api-v1.34.9";

impl ApiServer {
    /// The real control plane where `KUBEBUILDER_ASSETS` names one, else the sandbox's. None
    /// when a tool or the fixtures are missing outside CI (after saying so); under CI that is a
    /// failure.
    pub fn start() -> Option<ApiServer> {
        if tools::kubebuilder_assets().is_some() {
            ApiServer::start_real()
        } else {
            ApiServer::start_sandbox()
        }
    }

    /// A real control plane, for what only one can show. None, after saying the test did not
    /// run, when `KUBEBUILDER_ASSETS` names none; None when etcd is missing outside CI (after
    /// saying so), under CI that is a failure.
    pub fn start_real() -> Option<ApiServer> {
        let apiserver = tools::control_plane(Tool::KubeApiserver)?;
        let etcd = tools::require(Tool::Etcd)?;
        let kubectl = tools::find(Tool::Kubectl).ok();
        let dir = tempdir();
        let (backend, url) = real::Real::start(dir.path(), &etcd, &apiserver);
        Some(ApiServer {
            dir,
            backend: Backend::Real(backend),
            url,
            token: ADMIN_TOKEN.into(),
            kubectl,
        })
    }

    /// The sandbox's Kubernetes API, whatever `KUBEBUILDER_ASSETS` says. None when the fixtures
    /// are missing outside CI (after saying so).
    pub fn start_sandbox() -> Option<ApiServer> {
        let fixtures = fixtures()?;
        let kubectl = tools::find(Tool::Kubectl).ok();
        let dir = tempdir();
        let (backend, url) =
            sandbox::Sandboxed::start(dir.path(), ADMIN_TOKEN, &fixtures.join(KUBE_API_DOCS));
        Some(ApiServer {
            dir,
            backend: Backend::Sandbox(backend),
            url,
            token: ADMIN_TOKEN.into(),
            kubectl,
        })
    }

    /// The first cluster (AKS) of `fracgpu-sandbox serve --without-gpu-operator`: a cluster with
    /// the twin's controllers (nodes, the job controller) and no GPU operator, as a user's cluster
    /// before the platform team installs NVIDIA's chart. Its admin is the one the kubeconfig that
    /// serve writes names; it cannot be restarted apart from the rest of serve.
    pub fn start_serve() -> ApiServer {
        let kubectl = tools::find(Tool::Kubectl).ok();
        let dir = tempdir();
        let (backend, url, token) = serve::Served::start(dir.path());
        ApiServer {
            dir,
            backend: Backend::Serve(backend),
            url,
            token,
            kubectl,
        }
    }

    /// Whether this is a real kube-apiserver (else the sandbox's).
    pub fn is_real(&self) -> bool {
        matches!(self.backend, Backend::Real(_))
    }

    /// Whether the twin's controllers run there (serve's clusters: the job controller completes
    /// Jobs), unlike a bare control plane.
    pub fn runs_controllers(&self) -> bool {
        matches!(self.backend, Backend::Serve(_))
    }

    /// What serves the API, for messages: `kube-apiserver` or `the sandbox`.
    pub fn what(&self) -> &'static str {
        match self.backend {
            Backend::Real(_) => "kube-apiserver",
            Backend::Sandbox(_) => "the sandbox's Kubernetes API",
            Backend::Serve(_) => "a cluster of fracgpu-sandbox serve",
        }
    }

    /// The folder holding the certificates, logs and kubeconfigs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA certificate (PEM) that verifies the server.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ca.crt")).expect("ca.crt")
    }

    /// The admin's bearer token (group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.token
    }

    /// (Re)starts the API server on the same port and storage, and waits until it is ready.
    pub fn start_apiserver(&mut self) {
        let dir = self.dir.path().to_path_buf();
        let started = match &mut self.backend {
            Backend::Real(r) => r.start_apiserver(&dir),
            Backend::Sandbox(s) => s.start_apiserver(&dir),
            Backend::Serve(_) => Err("a cluster of serve does not restart on its own".into()),
        };
        if let Err(e) = started {
            panic!("{e}");
        }
    }

    /// Kills the API server (SIGKILL, as a crash would), leaving its storage (etcd, or the
    /// sandbox's state file, written before each write is answered).
    pub fn kill_apiserver(&mut self) {
        match &mut self.backend {
            Backend::Real(r) => r.kill_apiserver(),
            Backend::Sandbox(s) => s.kill_apiserver(),
            // The whole of serve goes: its clusters share one process.
            Backend::Serve(s) => s.kill(),
        }
    }

    /// The last lines of the API server's log, for a failure message.
    pub fn log_tail(&self) -> String {
        tail(&self.dir.path().join("kube-apiserver.log"))
    }

    /// Starts kube-controller-manager with the given controllers (e.g.
    /// `daemonset,replicaset,disruption`). None, after saying the test did not run, on the
    /// sandbox (its controllers are not these) or when `KUBEBUILDER_ASSETS` holds none. Its log
    /// is `kube-controller-manager.log` in [`ApiServer::dir`]; it stops with the server.
    pub fn start_controller_manager(&mut self, controllers: &str) -> Option<()> {
        let kubeconfig = self.kubeconfig();
        match &mut self.backend {
            Backend::Real(r) => {
                r.start_controller_manager(self.dir.path(), &kubeconfig, controllers)
            }
            Backend::Sandbox(_) | Backend::Serve(_) => {
                tools::not_run(&format!(
                    "not run: the real {controllers} controllers need a real control plane \
                        (set KUBEBUILDER_ASSETS)"
                ));
                None
            }
        }
    }

    /// The end of kube-controller-manager's log, for a failing test's message.
    pub fn controller_manager_log_tail(&self) -> String {
        tail(&self.dir.path().join("kube-controller-manager.log"))
    }

    /// A kubeconfig for `token` (written once per name): the admin's by [`ApiServer::kubeconfig`],
    /// a ServiceAccount's from [`ApiServer::service_account_token`].
    pub fn kubeconfig_for(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        let kc = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {
                "server": self.url,
                "certificate-authority": self.dir.path().join("ca.crt").display().to_string(),
            }}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "test", "user": name}}],
            "current-context": name,
        });
        // Written once, then only read: helm and kubectl read it while a test asks for it again.
        let text = kc.to_string();
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            let part = path.with_extension("part");
            std::fs::write(&part, &text).expect("kubeconfig written");
            std::fs::rename(&part, &path).expect("kubeconfig in place");
        }
        path
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig_for("admin", &self.token)
    }

    fn kubectl_bin(&self) -> &Path {
        self.kubectl
            .as_deref()
            .expect("kubectl (scripts/test-tools installs it)")
    }

    fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.kubectl_bin());
        c.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig");
        c
    }

    /// kubectl as the admin, with `KUBECONFIG` pointing nowhere.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args).output().expect("kubectl runs")
    }

    fn must(&self, args: &[&str], out: Output) -> String {
        assert!(
            out.status.success(),
            "kubectl {} on {}: {}",
            args.join(" "),
            self.what(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.must(args, self.kubectl(args))
    }

    /// kubectl with `input` on its stdin (`-f -`), whatever it answers.
    pub fn kubectl_input(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write as _;
        let mut child = self
            .kubectl_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("kubectl reads stdin");
        child.wait_with_output().expect("kubectl runs")
    }

    /// kubectl with `input` on its stdin (`-f -`); must succeed.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        self.must(args, self.kubectl_input(args, input))
    }

    /// Applies CRDs of the fixtures (file names under `crds/`, e.g.
    /// `argoproj.io_applications.yaml`) with server-side apply and waits until each is
    /// Established.
    pub fn install_crds(&self, fixtures: &Path, files: &[&str]) {
        let mut args = vec!["apply".to_string(), "--server-side".to_string()];
        for f in files {
            args.push("-f".into());
            args.push(fixtures.join("crds").join(f).display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.kubectl_ok(&args);
        // `kubectl wait` can read a CRD before it has any condition and fail at once
        // (PROVENANCE.md of the fixtures); the loop tries again.
        let start = Instant::now();
        loop {
            let out = self.kubectl(&[
                "wait",
                "--for",
                "condition=established",
                "crd",
                "--all",
                "--timeout=20s",
            ]);
            if out.status.success() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "CRDs not established: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Creates a ServiceAccount and returns a token for it (the TokenRequest API, as
    /// `kubectl create token` asks it), for tests that run as a least-privileged identity.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let _ = self.kubectl(&["create", "serviceaccount", "-n", namespace, name]);
        self.kubectl_ok(&["create", "token", "-n", namespace, name, "--duration=2h"])
            .trim()
            .to_string()
    }

    /// Starts the stand-in that completes Helm's hook Jobs (see [`HookJobs`]).
    pub fn complete_hook_jobs(&self) -> HookJobs {
        HookJobs::start(self.url.clone(), self.ca_pem(), self.token.clone())
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("fracgpu-apiserver-")
        .tempdir()
        .expect("a temporary directory")
}
