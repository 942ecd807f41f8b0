//! The sandbox's control plane: `fracgpu-sandbox apiserver`, a process of its own serving one
//! bare cluster's Kubernetes API on loopback over HTTPS, with the real server's OpenAPI documents
//! from the fixtures. Its state file stands in for etcd: it is written before each write is
//! answered, so a SIGKILL and a restart on the same file is an API server restarted on its etcd.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::process::{free_port, tail, wait_ready};

pub(super) struct Sandboxed {
    child: Option<Child>,
    args: Vec<String>,
}

/// The `fracgpu-sandbox` binary of this build, beside the test executable's folder
/// (`target/<profile>/deps/<test>` -> `target/<profile>/fracgpu-sandbox`). `cargo test` at the
/// workspace root builds it before any test runs; a missing or stale one (a run of one crate's
/// tests alone after the sandbox changed) is an error that says what to run, since building it
/// from here would resolve other dependency features and rebuild half the tree.
/// `FRACGPU_SANDBOX_BIN` names another binary to run instead (a copy kept while the sources
/// change), unchecked.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("FRACGPU_SANDBOX_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("test executable");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("fracgpu-sandbox");
    let crate_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../sandbox"));
    let sources = newest(&crate_dir.join("src")).max(modified(&crate_dir.join("Cargo.toml")));
    assert!(
        bin.exists() && modified(&bin) >= sources,
        "{} is missing or older than the sandbox's sources: run `cargo test` at the workspace \
            root, or `cargo build -p fracgpu-sandbox` first",
        bin.display()
    );
    bin
}

fn modified(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// The newest modification time of the files under `dir`.
fn newest(dir: &Path) -> std::time::SystemTime {
    let mut t = modified(dir);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let m = if p.is_dir() { newest(&p) } else { modified(&p) };
        t = t.max(m);
    }
    t
}

impl Sandboxed {
    /// Starts `fracgpu-sandbox apiserver` in `dir` (it writes `ca.crt` there) and waits until it
    /// is ready: the process and its URL. A port taken between choosing it and binding it is
    /// tried again elsewhere.
    pub(super) fn start(dir: &Path, token: &str, docs: &Path) -> (Sandboxed, String) {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let args = vec![
                "apiserver".to_string(),
                format!("--port={port}"),
                format!("--dir={}", dir.display()),
                format!("--token={token}"),
                format!("--state={}", dir.join("state.json").display()),
                format!("--openapi={}", docs.display()),
            ];
            let mut s = Sandboxed { child: None, args };
            match s.start_apiserver(dir) {
                Ok(()) => return (s, format!("https://127.0.0.1:{port}")),
                Err(e) if e.contains("in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("the sandbox's API server found no free port in 5 attempts: {last}")
    }

    pub(super) fn start_apiserver(&mut self, dir: &Path) -> Result<(), String> {
        assert!(self.child.is_none(), "the sandbox's API server is running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("kube-apiserver.log"))
            .expect("a log file");
        let child = Command::new(binary())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map(Stdio::from).expect("a log file"))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("fracgpu-sandbox does not start: {e}"));
        self.child = Some(child);
        let port = self
            .args
            .iter()
            .find_map(|a| a.strip_prefix("--port="))
            .unwrap_or_default()
            .to_string();
        let url = format!("https://127.0.0.1:{port}");
        let child = &mut self.child;
        let exited = || match child.as_mut().map(|c| c.try_wait().ok().flatten()) {
            Some(Some(status)) => {
                *child = None;
                Some(format!(
                    "fracgpu-sandbox apiserver exited ({status}) before it was ready:\n{}",
                    tail(&dir.join("kube-apiserver.log"))
                ))
            }
            _ => None,
        };
        wait_ready(dir, &url, Duration::from_secs(30), exited)
    }

    /// SIGKILL, as a crash would; the state file stays.
    pub(super) fn kill_apiserver(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        self.kill_apiserver();
    }
}
