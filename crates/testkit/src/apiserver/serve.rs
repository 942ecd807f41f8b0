//! A cluster of `fracgpu-sandbox serve --without-gpu-operator`: the whole sandbox (clouds and
//! every cluster's Kubernetes API with the twin's controllers) in a process of its own, of which
//! the tests use the AKS cluster. What `ApiServer` needs of it is read from the kubeconfig serve
//! writes for that cluster: the server's URL, its CA (written to the test's folder as `ca.crt`,
//! where every other backend keeps it) and the admin's token.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine as _;

use super::process::tail;
use super::sandbox::binary;

pub(super) struct Served {
    child: Child,
}

/// The value of the first `key: value` line of a kubeconfig serve wrote (its own plain YAML,
/// one scalar per line: a YAML parser would be a dependency for three fields).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix(": "))
        .map(str::trim)
}

impl Served {
    /// Starts serve with its state and kubeconfigs in `dir`, reads its first cluster's
    /// kubeconfig and waits until that cluster answers: the process, the cluster's URL and the
    /// admin's token.
    pub(super) fn start(dir: &Path) -> (Served, String, String) {
        let log = dir.join("kube-apiserver.log");
        let mut child = Command::new(binary())
            .args(["serve", "--port", "0", "--op-seconds", "0"])
            .arg("--without-gpu-operator")
            .arg("--state")
            .arg(dir.join("state.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).map_or(Stdio::null(), Stdio::from))
            .spawn()
            .unwrap_or_else(|e| panic!("fracgpu-sandbox serve does not start: {e}"));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        // "  cluster        : aks sandbox-aks   kubeconfig <path>"
        let kubeconfig = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                let rest = l.trim().strip_prefix("cluster")?;
                let path = rest.split_once(" kubeconfig ")?.1;
                Some(PathBuf::from(path.trim()))
            })
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("fracgpu-sandbox serve named no cluster:\n{}", tail(&log))
            });
        // The rest of what serve prints (its request log) is read and dropped, so that it
        // never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let text = std::fs::read_to_string(&kubeconfig).expect("serve's kubeconfig");
        let url = field(&text, "server").expect("server").to_string();
        let ca = base64::engine::general_purpose::STANDARD
            .decode(field(&text, "certificate-authority-data").expect("CA data"))
            .expect("base64 CA");
        std::fs::write(dir.join("ca.crt"), ca).expect("ca.crt written");
        let token = field(&text, "token").expect("token").to_string();
        let served = Served { child };
        // serve writes its kubeconfigs after it listens: the cluster answers already.
        (served, url, token)
    }
}

impl Served {
    /// SIGKILL to the whole of serve.
    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}
