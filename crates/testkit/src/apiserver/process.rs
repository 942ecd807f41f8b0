//! What starting either control plane takes: the admin's token, free loopback ports, waiting for
//! `/readyz`, and the end of a log for a failure's message.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The static token of the admin user (group `system:masters`).
pub(super) const ADMIN_TOKEN: &str = "fracgpu-test-admin";

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The last 30 lines of a log file.
pub(super) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Waits until `url`/readyz answers `ok` to the admin (curl with the CA in `dir`), or `exited`
/// says the server is gone, or `limit` passes.
pub(super) fn wait_ready(
    dir: &Path,
    url: &str,
    limit: Duration,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "5", "--cacert"])
            .arg(dir.join("ca.crt"))
            .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
            .arg(format!("{url}/readyz"))
            .output()
            .expect("curl runs");
        if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
            return Ok(());
        }
        if let Some(why) = exited() {
            return Err(why);
        }
        if start.elapsed() > limit {
            return Err(format!(
                "the API server at {url} is not ready after {limit:?}:\n{}",
                tail(&dir.join("kube-apiserver.log"))
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
