//! The real control plane: etcd and kube-apiserver (and, for the tests that ask,
//! kube-controller-manager) from `KUBEBUILDER_ASSETS`, started as envtest starts them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;

use super::process::{ADMIN_TOKEN, free_port, tail, wait_ready};
use crate::tools::{self, Tool};

/// etcd, kube-apiserver and the controller manager, each killed on drop.
pub(super) struct Real {
    etcd: Child,
    apiserver: Option<Child>,
    apiserver_bin: PathBuf,
    etcd_url: String,
    port: u16,
    controller_manager: Option<Child>,
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

fn log(dir: &Path, name: &str) -> Stdio {
    std::fs::File::create(dir.join(name))
        .map(Stdio::from)
        .expect("a log file")
}

impl Real {
    /// Starts etcd and kube-apiserver in `dir` and waits until the server is ready: the control
    /// plane and its URL. A free port found here can be taken by another process before the
    /// server binds it (tests run side by side): such an attempt is made again on other ports.
    pub(super) fn start(dir: &Path, etcd: &Path, apiserver: &Path) -> (Real, String) {
        write_pki(dir);
        let mut last = String::new();
        for _ in 0..5 {
            match Real::try_start(dir, etcd, apiserver) {
                Ok(r) => return r,
                Err(e) if e.contains("address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("kube-apiserver found no free port in 5 attempts: {last}")
    }

    fn try_start(dir: &Path, etcd_bin: &Path, apiserver: &Path) -> Result<(Real, String), String> {
        let (client, peer) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let data = dir.join("etcd");
        let _ = std::fs::remove_dir_all(&data);
        let etcd = Command::new(etcd_bin)
            .args([
                "--data-dir",
                &data.display().to_string(),
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
            .stdout(log(dir, "etcd.log"))
            .stderr(log(dir, "etcd.err.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", etcd_bin.display()));
        let port = free_port();
        let mut real = Real {
            etcd,
            apiserver: None,
            apiserver_bin: apiserver.to_path_buf(),
            etcd_url,
            port,
            controller_manager: None,
        };
        real.start_apiserver(dir)?;
        Ok((real, format!("https://127.0.0.1:{port}")))
    }

    pub(super) fn start_apiserver(&mut self, d: &Path) -> Result<(), String> {
        assert!(
            self.apiserver.is_none(),
            "kube-apiserver is already running"
        );
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
        let url = format!("https://127.0.0.1:{}", self.port);
        let (apiserver, etcd) = (&mut self.apiserver, &mut self.etcd);
        let exited = || {
            if let Some(Some(status)) = apiserver.as_mut().map(|c| c.try_wait().ok().flatten()) {
                *apiserver = None;
                return Some(format!(
                    "kube-apiserver exited ({status}) before it was ready:\n{}",
                    tail(&d.join("kube-apiserver.log"))
                ));
            }
            if let Ok(Some(status)) = etcd.try_wait() {
                let log = std::fs::read_to_string(d.join("etcd.err.log")).unwrap_or_default();
                return Some(format!("etcd exited ({status}):\n{log}"));
            }
            None
        };
        wait_ready(d, &url, Duration::from_secs(60), exited)
    }

    /// Kills kube-apiserver (SIGKILL, as a crash would), leaving etcd and its data.
    pub(super) fn kill_apiserver(&mut self) {
        if let Some(mut c) = self.apiserver.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts kube-controller-manager with `controllers`, the admin's kubeconfig, no leader
    /// election and no serving port; None after saying the test did not run when
    /// `KUBEBUILDER_ASSETS` holds none.
    pub(super) fn start_controller_manager(
        &mut self,
        d: &Path,
        kubeconfig: &Path,
        controllers: &str,
    ) -> Option<()> {
        assert!(
            self.controller_manager.is_none(),
            "kube-controller-manager is already running"
        );
        let bin = tools::control_plane(Tool::KubeControllerManager)?;
        let kc = kubeconfig.display().to_string();
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
}

impl Drop for Real {
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
