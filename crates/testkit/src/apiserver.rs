//! A real Kubernetes control plane for the tests, where one is given: etcd and kube-apiserver from
//! the folder `KUBEBUILDER_ASSETS` names (controller-runtime's envtest convention; etcd may also
//! come from the PATH), started the way envtest starts them: loopback only, a CA and certificates
//! made here, RBAC on, no kubelet, no scheduler and no controllers. A test gets a server of its
//! own (start to ready is 3-4 s), so cluster-scoped objects such as the GPU operator's
//! `cluster-policy` never meet another test's. The project was last run against v1.34.9.
//!
//! No registry ships these binaries, so this tier is optional: without `KUBEBUILDER_ASSETS`,
//! [`ApiServer::start`] says the test was not run ([`crate::tools::not_run`]) and returns None.
//!
//! What a kubelet and the job controller would do is missing; [`HookJobs`] does the one part of
//! it the Helm tests need (completing Helm's hook Jobs) and nothing more.
//!
//! `scripts/test-tools` puts etcd on the PATH (Debian's `etcd-server`); under CI a missing etcd
//! fails the test, as any missing registry tool does.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::tools::{self, Tool};

/// The static token of the admin user (group `system:masters`), from the token file.
const ADMIN_TOKEN: &str = "fracgpu-test-admin";

/// A running etcd and kube-apiserver; both are killed and their files removed on drop.
pub struct ApiServer {
    dir: tempfile::TempDir,
    etcd: Child,
    apiserver: Option<Child>,
    apiserver_bin: PathBuf,
    etcd_url: String,
    port: u16,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    kubectl: Option<PathBuf>,
    controller_manager: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn pem(label: &str, der: &[u8]) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The CA, the serving certificate for 127.0.0.1/localhost and the service-account signing key,
/// written into `dir` as PEM files.
fn write_pki(dir: &Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.distinguished_name
        .push(DnType::CommonName, "fracgpu-test-kubernetes-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("serving key");
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("serving params");
    leaf.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = leaf.signed_by(&key, &issuer).expect("serving certificate");
    // kube-apiserver signs service-account tokens with ES256 as well as RS256: a P-256 key
    // (PKCS#8) signs, its public half (SubjectPublicKeyInfo) verifies.
    let sa = KeyPair::generate().expect("service-account key");
    let write = |name: &str, text: String| std::fs::write(dir.join(name), text).expect(name);
    write("ca.crt", pem("CERTIFICATE", ca_cert.der()));
    write("server.crt", pem("CERTIFICATE", cert.der()));
    write("server.key", pem("PRIVATE KEY", &key.serialize_der()));
    write("sa.key", pem("PRIVATE KEY", &sa.serialize_der()));
    write(
        "sa.pub",
        pem(
            "PUBLIC KEY",
            &rcgen::PublicKeyData::subject_public_key_info(&sa),
        ),
    );
    write(
        "tokens.csv",
        format!("{ADMIN_TOKEN},fracgpu-test-admin,fracgpu-test-admin,system:masters\n"),
    );
}

/// Where the third-party test data lives: `FRACGPU_FIXTURES_DIR`, else `shared/fixtures` beside
/// the checkout (`<repo>/../shared/fixtures`). The CRDs and NVIDIA's chart are read from there,
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
        "the third-party fixtures (CRDs, NVIDIA's gpu-operator chart) are not at {}",
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

impl ApiServer {
    /// Starts etcd and kube-apiserver and waits until `/readyz` answers 200. None, after saying
    /// the test did not run, when `KUBEBUILDER_ASSETS` names no control plane; None when etcd is
    /// missing outside CI (after saying so), under CI that is a failure.
    pub fn start() -> Option<ApiServer> {
        let apiserver_bin = tools::control_plane(Tool::KubeApiserver)?;
        let etcd_bin = tools::require(Tool::Etcd)?;
        let kubectl = tools::find(Tool::Kubectl).ok();
        // A free port found here can be taken by another process before the server binds it
        // (tests run side by side): such an attempt is made again on other ports.
        let mut last = String::new();
        for _ in 0..5 {
            match ApiServer::try_start(&etcd_bin, &apiserver_bin, kubectl.clone()) {
                Ok(server) => return Some(server),
                Err(e) if e.contains("address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("kube-apiserver found no free port in 5 attempts: {last}")
    }

    fn try_start(
        etcd_bin: &Path,
        apiserver_bin: &Path,
        kubectl: Option<PathBuf>,
    ) -> Result<ApiServer, String> {
        let dir = tempfile::Builder::new()
            .prefix("fracgpu-apiserver-")
            .tempdir()
            .expect("a temporary directory");
        write_pki(dir.path());
        let (client, peer) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = |name: &str| {
            std::fs::File::create(dir.path().join(name))
                .map(Stdio::from)
                .expect("a log file")
        };
        let etcd = Command::new(etcd_bin)
            .args([
                "--data-dir",
                &dir.path().join("etcd").display().to_string(),
                "--listen-client-urls",
                &etcd_url,
                "--advertise-client-urls",
                &etcd_url,
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
                "--initial-cluster",
                &format!("default={peer_url}"),
                "--unsafe-no-fsync",
            ])
            .stdin(Stdio::null())
            .stdout(log("etcd.log"))
            .stderr(log("etcd.err.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", etcd_bin.display()));
        let port = free_port();
        let mut server = ApiServer {
            dir,
            etcd,
            apiserver: None,
            apiserver_bin: apiserver_bin.to_path_buf(),
            etcd_url,
            port,
            url: format!("https://127.0.0.1:{port}"),
            kubectl,
            controller_manager: None,
        };
        server.try_start_apiserver()?;
        Ok(server)
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
    pub fn admin_token(&self) -> &'static str {
        ADMIN_TOKEN
    }

    /// (Re)starts kube-apiserver on the same port and etcd, and waits until it is ready.
    pub fn start_apiserver(&mut self) {
        if let Err(e) = self.try_start_apiserver() {
            panic!("{e}");
        }
    }

    fn try_start_apiserver(&mut self) -> Result<(), String> {
        assert!(
            self.apiserver.is_none(),
            "kube-apiserver is already running"
        );
        let d = self.dir.path();
        let p = |f: &str| d.join(f).display().to_string();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("kube-apiserver.log"))
            .expect("a log file");
        let child = Command::new(&self.apiserver_bin)
            .args([
                format!("--etcd-servers={}", self.etcd_url),
                "--advertise-address=127.0.0.1".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", self.port),
                format!("--cert-dir={}", p("certs")),
                format!("--tls-cert-file={}", p("server.crt")),
                format!("--tls-private-key-file={}", p("server.key")),
                format!("--client-ca-file={}", p("ca.crt")),
                format!("--token-auth-file={}", p("tokens.csv")),
                format!("--service-account-issuer=https://127.0.0.1:{}", self.port),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                "--authorization-mode=RBAC".into(),
                "--disable-admission-plugins=ServiceAccount".into(),
                "--allow-privileged=true".into(),
                "--endpoint-reconciler-type=none".into(),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map(Stdio::from).expect("a log file"))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", self.apiserver_bin.display()));
        self.apiserver = Some(child);
        self.wait_ready(Duration::from_secs(60))
    }

    /// Kills kube-apiserver (SIGKILL, as a crash would), leaving etcd and its data.
    pub fn kill_apiserver(&mut self) {
        if let Some(mut c) = self.apiserver.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let (ok, out, _) = self.curl(&["/readyz"]);
            if ok && out.trim() == "ok" {
                return Ok(());
            }
            if let Some(Some(status)) = self.apiserver.as_mut().map(|c| c.try_wait().ok().flatten())
            {
                self.apiserver = None;
                return Err(format!(
                    "kube-apiserver exited ({status}) before it was ready:\n{}",
                    self.log_tail()
                ));
            }
            if let Ok(Some(status)) = self.etcd.try_wait() {
                let log = std::fs::read_to_string(self.dir.path().join("etcd.err.log"))
                    .unwrap_or_default();
                return Err(format!("etcd exited ({status}):\n{log}"));
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "kube-apiserver not ready after {limit:?}:\n{}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A GET with curl as the admin: (2xx, body, stderr).
    fn curl(&self, path: &[&str]) -> (bool, String, String) {
        let ca = self.dir.path().join("ca.crt");
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "5", "--cacert"])
            .arg(&ca)
            .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
            .arg(format!("{}{}", self.url, path.concat()))
            .output()
            .expect("curl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The last lines of the apiserver's log, for a failure message.
    pub fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
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

    /// Starts kube-controller-manager with the given controllers (e.g.
    /// `daemonset,replicaset,disruption`), the admin's kubeconfig, no leader election and no
    /// serving port. None, after saying the test did not run, when `KUBEBUILDER_ASSETS` holds
    /// none. Its log is `kube-controller-manager.log` in [`ApiServer::dir`]; it stops with the
    /// server.
    pub fn start_controller_manager(&mut self, controllers: &str) -> Option<()> {
        assert!(
            self.controller_manager.is_none(),
            "kube-controller-manager is already running"
        );
        let bin = tools::control_plane(Tool::KubeControllerManager)?;
        let d = self.dir.path();
        let kc = self.kubeconfig().display().to_string();
        let log = std::fs::File::create(d.join("kube-controller-manager.log")).expect("a log file");
        let child = Command::new(&bin)
            .args([
                format!("--kubeconfig={kc}"),
                format!("--authentication-kubeconfig={kc}"),
                format!("--authorization-kubeconfig={kc}"),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                format!("--controllers={controllers}"),
                format!(
                    "--service-account-private-key-file={}",
                    d.join("sa.key").display()
                ),
                format!("--root-ca-file={}", d.join("ca.crt").display()),
                "--use-service-account-credentials=false".into(),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map(Stdio::from).expect("a log file"))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", bin.display()));
        self.controller_manager = Some(child);
        Some(())
    }

    /// The end of kube-controller-manager's log, for a failing test's message.
    pub fn controller_manager_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("kube-controller-manager.log"))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig_for("admin", ADMIN_TOKEN)
    }

    fn kubectl_bin(&self) -> &Path {
        self.kubectl
            .as_deref()
            .expect("kubectl (scripts/test-tools installs it)")
    }

    /// kubectl as the admin, with `KUBECONFIG` pointing nowhere.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let kc = self.kubeconfig();
        Command::new(self.kubectl_bin())
            .arg("--kubeconfig")
            .arg(&kc)
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("kubectl runs")
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl with `input` on its stdin (`-f -`); must succeed.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        use std::io::Write as _;
        let kc = self.kubeconfig();
        let mut child = Command::new(self.kubectl_bin())
            .arg("--kubeconfig")
            .arg(&kc)
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
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
        let out = child.wait_with_output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
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
        HookJobs::start(self)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.controller_manager.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.kill_apiserver();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}

/// Plays the kubelet and the job controller for Helm hook Jobs, and for nothing else: no
/// kubelet runs here, so a hook Job (the gpu-operator chart's pre-upgrade `upgrade-crd` Job, on
/// every `helm upgrade`) would stay active and helm would wait for it until its timeout. This
/// marks every Job annotated `helm.sh/hook` as succeeded through the status subresource, with
/// the conditions the job controller sets on success (`SuccessCriteriaMet`, then `Complete`,
/// which the API server of 1.33 and later requires together). While [`HookJobs::pause`] is on,
/// hooks are left running, to test a hook that never finishes. Stops when dropped.
pub struct HookJobs {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HookJobs {
    fn start(server: &ApiServer) -> HookJobs {
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let (url, ca) = (server.url.clone(), server.ca_pem());
        let (s, p, n) = (stop.clone(), paused.clone(), completed.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(complete_hooks(url, ca, s, p, n));
        });
        HookJobs {
            stop,
            paused,
            completed,
            thread: Some(thread),
        }
    }

    /// Leaves hook Jobs running (true) or completes them again (false).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// How many hook Jobs it has completed.
    pub fn completed(&self) -> usize {
        self.completed.load(Ordering::SeqCst)
    }
}

impl Drop for HookJobs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn complete_hooks(
    url: String,
    ca: String,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
) {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("CA"))
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    let auth = format!("Bearer {ADMIN_TOKEN}");
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(150)).await;
        if paused.load(Ordering::SeqCst) {
            continue;
        }
        // The server may be down for a while (a test kills and restarts it).
        let Ok(resp) = client
            .get(format!("{url}/apis/batch/v1/jobs"))
            .header("Authorization", &auth)
            .send()
            .await
        else {
            continue;
        };
        let Ok(list) = resp.json::<serde_json::Value>().await else {
            continue;
        };
        for job in list["items"].as_array().into_iter().flatten() {
            let meta = &job["metadata"];
            let is_hook = meta["annotations"].get("helm.sh/hook").is_some();
            let done = job["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Complete" || c["type"] == "Failed");
            if !is_hook || done {
                continue;
            }
            // The Job's own creation time serves for every timestamp: the API server checks only
            // that they are set and that completion does not come before the start.
            let now = meta["creationTimestamp"].clone();
            let cond = |t: &str| {
                serde_json::json!({"type": t, "status": "True", "lastProbeTime": now,
                    "lastTransitionTime": now, "reason": "CompletedByTest",
                    "message": "completed by the test harness (no kubelet runs here)"})
            };
            let body = serde_json::json!({"status": {
                "startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0,
                "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
            }});
            let (ns, name) = (
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default(),
            );
            let ok = client
                .patch(format!(
                    "{url}/apis/batch/v1/namespaces/{ns}/jobs/{name}/status"
                ))
                .header("Authorization", &auth)
                .header("Content-Type", "application/merge-patch+json")
                .body(body.to_string())
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                completed.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
