//! Who may talk to a running provider: only the terraform process that started it. A client
//! without terraform's certificate, with another self-signed P-521 certificate, or speaking plain
//! HTTP/2 is refused during the TLS handshake, whether it is this test process or another program
//! (curl) on the unix socket or the TCP fallback; and other users cannot even reach the unix socket.
//!
//! "No RPC ran" is proven by a side effect: every refused client asks for
//! `GRPCController/Shutdown`, and the provider is still serving afterwards. The same curl request
//! with terraform's certificate then does shut it down, so the attack is a real one.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::plugin::{
    Auth, ClientCert, Handshake, Plugin, client_cert, connect, start_logging_to,
};
use base64::Engine;
use pb::provider_client::ProviderClient;
use tfplugin::server::proto::plugin::{Empty, grpc_controller_client::GrpcControllerClient};
use tfplugin::server::proto::tfplugin6 as pb;

/// The provider as terraform starts it, with its stderr kept in a file (the refusals are logged
/// there).
struct Provider {
    plugin: Plugin,
    stderr: PathBuf,
}

impl Provider {
    fn start(client: &ClientCert, dir: &Path, env: &[(&str, &str)]) -> Provider {
        let stderr = dir.join("provider.stderr");
        let log = std::fs::File::create(&stderr).unwrap();
        Provider {
            plugin: start_logging_to(client, env, log.into()),
            stderr,
        }
    }

    fn running(&mut self) -> bool {
        self.plugin.child.try_wait().unwrap().is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until the provider's log holds `n` refusals (they are written by the accept task).
    fn wait_for_refusals(&self, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.matches("refused a connection").count() >= n || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the process ends within terraform's 2 s grace after Shutdown.
    fn exits_soon(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if !self.running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What curl got for `POST /plugin.GRPCController/Shutdown`: its exit code and the response
/// headers it printed (a gRPC answer carries `grpc-status`).
struct CurlResult {
    code: i32,
    headers: String,
    stderr: String,
}

/// Files curl needs: a gRPC frame for `Empty`, the server certificate (to verify the provider as
/// terraform does), and a client identity.
struct CurlFiles {
    dir: tempfile::TempDir,
}

impl CurlFiles {
    fn new(h: &Handshake) -> CurlFiles {
        let dir = tempfile::tempdir().unwrap();
        // Uncompressed flag + length 0: the protobuf Empty message.
        std::fs::write(dir.path().join("empty.grpc"), [0u8; 5]).unwrap();
        std::fs::write(
            dir.path().join("server.pem"),
            pem("CERTIFICATE", &h.server_cert_der),
        )
        .unwrap();
        // Readable by the unprivileged user some curls run as.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["empty.grpc", "server.pem"] {
            std::fs::set_permissions(dir.path().join(f), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        CurlFiles { dir }
    }

    fn identity(&self, name: &str, c: &ClientCert) -> (PathBuf, PathBuf) {
        let cert = self.dir.path().join(format!("{name}.crt"));
        let key = self.dir.path().join(format!("{name}.key"));
        std::fs::write(&cert, &c.pem).unwrap();
        std::fs::write(&key, pem("PRIVATE KEY", &c.key_der)).unwrap();
        for f in [&cert, &key] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        (cert, key)
    }
}

#[derive(Clone, Copy)]
enum CurlMode<'a> {
    /// HTTP/2 with prior knowledge, no TLS.
    Plain,
    /// TLS (verifying the provider's certificate) without a client certificate.
    TlsNoCert,
    /// TLS with this client certificate and key.
    TlsCert(&'a Path, &'a Path),
}

/// Runs curl against the provider's socket, optionally as another user (setpriv prefix).
fn curl_shutdown(
    h: &Handshake,
    files: &CurlFiles,
    mode: CurlMode,
    as_user: Option<&[&str]>,
) -> CurlResult {
    let mut args: Vec<String> = Vec::new();
    let scheme = match mode {
        CurlMode::Plain => {
            args.push("--http2-prior-knowledge".into());
            "http"
        }
        _ => {
            args.push("--http2".into());
            args.push("--cacert".into());
            args.push(files.dir.path().join("server.pem").display().to_string());
            "https"
        }
    };
    if let CurlMode::TlsCert(cert, key) = mode {
        args.extend([
            "--cert".into(),
            cert.display().to_string(),
            "--key".into(),
            key.display().to_string(),
        ]);
    }
    let authority = if h.network == "unix" {
        args.push("--unix-socket".into());
        args.push(h.address.clone());
        "localhost".to_string()
    } else {
        // The provider's certificate names localhost; make curl dial the announced address.
        let port = h.address.rsplit_once(':').unwrap().1;
        args.push("--resolve".into());
        args.push(format!("localhost:{port}:127.0.0.1"));
        format!("localhost:{port}")
    };
    args.extend([
        "--silent".into(),
        "--show-error".into(),
        "--max-time".into(),
        "10".into(),
        "-H".into(),
        "content-type: application/grpc".into(),
        "-H".into(),
        "te: trailers".into(),
        "--data-binary".into(),
        format!("@{}", files.dir.path().join("empty.grpc").display()),
        "--dump-header".into(),
        "-".into(),
        "--output".into(),
        "/dev/null".into(),
        format!("{scheme}://{authority}/plugin.GRPCController/Shutdown"),
    ]);
    let mut cmd = match as_user {
        Some(prefix) => {
            let mut c = Command::new(prefix[0]);
            c.args(&prefix[1..]).arg("curl");
            c
        }
        None => Command::new("curl"),
    };
    let out = cmd.args(&args).stdin(Stdio::null()).output().unwrap();
    CurlResult {
        code: out.status.code().unwrap_or(-1),
        headers: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The refused attempts of one transport, in-process and from curl; returns how many were made.
async fn attack(p: &mut Provider, cert: &ClientCert, files: Option<&CurlFiles>) -> usize {
    let impostor = client_cert();
    let mut attempts = 0;
    for (what, auth) in [
        ("no client certificate", Auth::NoCert),
        (
            "another self-signed P-521 certificate",
            Auth::Cert(&impostor),
        ),
        ("plain HTTP/2", Auth::Plain),
    ] {
        attempts += 1;
        let outcome = match connect(&p.plugin.handshake, auth).await {
            Err(e) => Err(format!("connect: {e}")),
            Ok(ch) => GrpcControllerClient::new(ch)
                .shutdown(Empty {})
                .await
                .map(|_| ())
                .map_err(|s| format!("rpc: {s}")),
        };
        assert!(
            outcome.is_err(),
            "{} with {what}: Shutdown must be refused",
            p.plugin.handshake.network
        );
        println!(
            "{} / {what} (in-process): refused: {}",
            p.plugin.handshake.network,
            outcome.unwrap_err().lines().next().unwrap_or("")
        );
    }
    if let Some(files) = files {
        let (icert, ikey) = files.identity("impostor", &client_cert());
        for (what, mode) in [
            ("plain HTTP/2", CurlMode::Plain),
            ("no client certificate", CurlMode::TlsNoCert),
            (
                "another self-signed P-521 certificate",
                CurlMode::TlsCert(&icert, &ikey),
            ),
        ] {
            attempts += 1;
            let r = curl_shutdown(&p.plugin.handshake, files, mode, None);
            assert!(
                r.code != 0 && !r.headers.contains("application/grpc"),
                "{} / curl with {what}: refused before any gRPC answer, got exit {} and headers {:?}",
                p.plugin.handshake.network,
                r.code,
                r.headers
            );
            println!(
                "{} / {what} (curl, another process): exit {}: {}",
                p.plugin.handshake.network,
                r.code,
                r.stderr.trim()
            );
        }
    }
    assert!(
        p.running(),
        "no refused client's Shutdown ran: the provider still runs"
    );
    // It still serves terraform's own connection.
    let ch = connect(&p.plugin.handshake, Auth::Cert(cert))
        .await
        .unwrap();
    ProviderClient::new(ch)
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("terraform's certificate still works after the refusals");
    attempts
}

/// The refusals are logged by the accept loop, i.e. before a connection reaches gRPC, each with
/// its reason.
fn assert_refusals_logged(p: &Provider, attempts: usize) {
    let log = p.wait_for_refusals(attempts);
    let refused = log.matches("refused a connection").count();
    assert!(
        refused >= attempts,
        "every refused client is logged as refused during the TLS handshake ({refused} of {attempts}):\n{log}"
    );
    for reason in [
        "peer sent no certificates",
        "not the one terraform announced",
        "InvalidContentType",
    ] {
        assert!(log.contains(reason), "log names {reason:?}:\n{log}");
    }
}

/// With terraform's certificate the same curl request is answered and shuts the provider down:
/// the refusals above were not an artefact of how curl was called.
fn curl_with_terraforms_cert_shuts_down(p: &mut Provider, cert: &ClientCert, files: &CurlFiles) {
    let (c, k) = files.identity("terraform", cert);
    let r = curl_shutdown(&p.plugin.handshake, files, CurlMode::TlsCert(&c, &k), None);
    assert_eq!(r.code, 0, "curl with terraform's certificate: {}", r.stderr);
    // The trailers may be lost as the process leaves; the answer's headers and the exit show
    // that the RPC ran.
    assert!(
        r.headers.starts_with("HTTP/2 200") && r.headers.contains("application/grpc"),
        "Shutdown answered by gRPC: {:?}",
        r.headers
    );
    assert!(p.exits_soon(), "the authorised Shutdown ended the provider");
}

fn curl_available() -> bool {
    let ok = have("curl");
    if !ok {
        assert!(
            !crate::common::tools::in_ci(),
            "the other-process part needs curl: install Debian's curl"
        );
        println!("SKIPPED the curl (other process) part: curl is not on PATH");
    }
    ok
}

#[tokio::test]
async fn unix_socket_refuses_every_client_but_terraform() {
    let cert = client_cert();
    let base = tempfile::tempdir().unwrap();
    // An open parent, so that only the provider's own directory and socket modes keep others out.
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = Provider::start(
        &cert,
        logs.path(),
        &[("PLUGIN_UNIX_SOCKET_DIR", base.path().to_str().unwrap())],
    );
    assert_eq!(p.plugin.handshake.network, "unix");
    let files = curl_available().then(|| CurlFiles::new(&p.plugin.handshake));
    let attempts = attack(&mut p, &cert, files.as_ref()).await;
    assert_refusals_logged(&p, attempts);
    if let Some(files) = &files {
        curl_with_terraforms_cert_shuts_down(&mut p, &cert, files);
    }
}

#[tokio::test]
async fn tcp_fallback_refuses_every_client_but_terraform() {
    let cert = client_cert();
    let logs = tempfile::tempdir().unwrap();
    // No usable socket directory: the provider falls back to TCP within terraform's port range.
    let missing = logs.path().join("no-such-dir");
    let mut p = Provider::start(
        &cert,
        logs.path(),
        &[
            ("PLUGIN_UNIX_SOCKET_DIR", missing.to_str().unwrap()),
            ("PLUGIN_MIN_PORT", "20200"),
            ("PLUGIN_MAX_PORT", "20299"),
        ],
    );
    assert_eq!(p.plugin.handshake.network, "tcp", "fell back to TCP");
    let port: u16 = p
        .plugin
        .handshake
        .address
        .rsplit_once(':')
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!((20200..=20299).contains(&port));
    assert!(p.plugin.handshake.address.starts_with("127.0.0.1:"));
    let files = curl_available().then(|| CurlFiles::new(&p.plugin.handshake));
    let mut attempts = attack(&mut p, &cert, files.as_ref()).await;
    // Any local user can open a TCP connection, so TLS is the only barrier there: show it holds
    // for another uid too.
    if let (Some(files), Some(nobody)) = (&files, unprivileged_prefix()) {
        for mode in [CurlMode::Plain, CurlMode::TlsNoCert] {
            attempts += 1;
            let r = curl_shutdown(&p.plugin.handshake, files, mode, Some(&nobody));
            assert!(
                r.code != 0 && !r.headers.contains("application/grpc"),
                "curl as uid 65534 is refused: exit {} {:?} {}",
                r.code,
                r.headers,
                r.stderr
            );
        }
        assert!(p.running());
    }
    assert_refusals_logged(&p, attempts);
    if let Some(files) = &files {
        curl_with_terraforms_cert_shuts_down(&mut p, &cert, files);
    }
}

/// `setpriv` arguments that run a command as uid/gid 65534 without supplementary groups, or None
/// (with the reason printed) when this test cannot switch users.
fn unprivileged_prefix() -> Option<Vec<&'static str>> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        // Not a missing tool: only root can act as another user.
        println!("SKIPPED the other-user checks: the test does not run as root");
        return None;
    }
    let ok = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !crate::common::tools::in_ci(),
            "the other-user checks need setpriv (Debian's util-linux) to drop to uid 65534"
        );
        println!("SKIPPED the other-user checks: setpriv cannot drop to uid 65534 here");
        return None;
    }
    Some(vec![
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ])
}

/// The system python3: a per-user install (pyenv under /root) is out of reach of uid 65534.
fn python3() -> &'static str {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3")
}

/// Runs a python3 one-liner as uid 65534 that connects to a unix socket; returns its output
/// ("connected" or the error).
fn connect_as_nobody(prefix: &[&str], socket: &Path) -> String {
    let out = Command::new(prefix[0])
        .args(&prefix[1..])
        .args([
            python3(),
            "-c",
            "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1]); print('connected')\nexcept OSError as e:\n    print(type(e).__name__, e.errno)",
        ])
        .arg(socket)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

#[test]
fn other_users_cannot_reach_the_unix_socket() {
    let cert = client_cert();
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let p = Provider::start(
        &cert,
        logs.path(),
        &[("PLUGIN_UNIX_SOCKET_DIR", base.path().to_str().unwrap())],
    );
    let sock = PathBuf::from(&p.plugin.handshake.address);
    let dir = sock.parent().unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700, "socket directory is the owner's alone");
    assert_eq!(mode(&sock), 0o600, "socket is the owner's alone");
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata(&sock).unwrap().uid();
    assert_eq!(std::fs::metadata(dir).unwrap().uid(), me);

    let Some(nobody) = unprivileged_prefix() else {
        return;
    };
    if !have(python3()) {
        // The system python3: uid 65534 cannot reach a per-user one.
        assert!(
            !crate::common::tools::in_ci(),
            "the other-user connect needs a system python3 (/usr/bin/python3): install Debian's python3-minimal"
        );
        println!("SKIPPED the other-user connect: no system python3 (/usr/bin/python3)");
        return;
    }
    // Control: the same program as the same user reaches a socket whose directory lets it in,
    // so a refusal below is the provider's modes at work.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let control = open.path().join("control.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&control).unwrap();
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o777)).unwrap();
    let ok = connect_as_nobody(&nobody, &control);
    assert_eq!(ok, "connected", "control socket reachable by uid 65534");

    let refused = connect_as_nobody(&nobody, &sock);
    println!("uid 65534 connecting to the provider's socket: {refused}");
    assert!(
        refused.starts_with("PermissionError 13"),
        "uid 65534 cannot connect to the provider's socket: {refused}"
    );
    let listing = Command::new(nobody[0])
        .args(&nobody[1..])
        .arg("ls")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        !listing.status.success(),
        "uid 65534 cannot list the socket directory"
    );
}
