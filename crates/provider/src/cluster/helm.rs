//! Helm releases, read natively from their Secrets (no helm binary needed to detect drift) and
//! upgraded through the `helm` CLI (the only supported writer of a release). Helm 3 and 4 store
//! releases alike (pkg/storage/driver/secrets.go in both).
//!
//! Storage: Secret `sh.helm.release.v1.<release>.v<revision>`, type `helm.sh/release.v1`, labels
//! owner=helm, name, status, version; `data.release` is base64(gzip(JSON)) and the Kubernetes API
//! base64-encodes Secret data once more (the client undoes that layer).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use serde_json::Value;

use super::values::merge;
use super::{Cluster, KubeError, KubernetesSettings};

/// The release as deployed: its revision, status, chart and the user-supplied values.
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub chart: String,
    pub chart_version: String,
    /// `config`: the values given at install/upgrade (what `--reuse-values` reuses).
    pub config: Value,
    /// `chart.values`: the chart's defaults.
    pub chart_values: Value,
    /// `chart.metadata.dependencies`: the subcharts it declares (name, alias, condition).
    pub chart_dependencies: Value,
    /// `manifest`: the objects the chart rendered, as multi-document YAML.
    pub manifest: String,
}

impl Release {
    /// The rendered object of `kind` named `name`, from the manifest.
    pub fn rendered(&self, kind: &str, name: &str) -> Option<Value> {
        self.manifest
            .split("\n---")
            .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
            .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
    }
}

impl Release {
    /// The values the release runs with: chart defaults overlaid with the user's.
    pub fn effective_values(&self) -> Value {
        let mut v = self.chart_values.clone();
        merge(&mut v, &self.config);
        v
    }
}

/// Decodes `data.release` (after the API's own base64 layer): base64, gunzip when the gzip magic
/// is there, JSON.
pub fn decode_release(bytes: &[u8]) -> Result<Value, String> {
    let text: Vec<u8> = bytes
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&text)
        .map_err(|e| format!("release data is not base64: {e}"))?;
    let json = if raw.starts_with(&[0x1f, 0x8b, 0x08]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("release data does not gunzip: {e}"))?;
        out
    } else {
        raw
    };
    serde_json::from_slice(&json).map_err(|e| format!("release data is not JSON: {e}"))
}

/// Encodes a release the way Helm 3 and 4 store it (before the API's base64): base64(gzip(JSON)).
pub fn encode_release(release: &Value) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let zipped = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .encode(zipped)
        .into_bytes()
}

fn release_from_json(v: &Value) -> Release {
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Release {
        name: s("/name"),
        namespace: s("/namespace"),
        revision: v.get("version").and_then(Value::as_u64).unwrap_or(0),
        status: s("/info/status"),
        chart: s("/chart/metadata/name"),
        chart_version: s("/chart/metadata/version"),
        config: v.get("config").cloned().unwrap_or(Value::Null),
        chart_values: v.pointer("/chart/values").cloned().unwrap_or(Value::Null),
        chart_dependencies: v
            .pointer("/chart/metadata/dependencies")
            .cloned()
            .unwrap_or(Value::Null),
        manifest: s("/manifest"),
    }
}

/// What the cluster holds for a release.
#[derive(Debug)]
pub enum ReleaseState {
    /// The highest revision with status deployed.
    Deployed(Release),
    /// An operation is in progress (pending-install, pending-upgrade, pending-rollback).
    Pending(Release),
    /// No Secret of the release, or none deployed.
    Missing,
}

/// Reads the release's Secrets and picks the deployed revision.
pub async fn read_release(
    cluster: &Cluster,
    ns: &str,
    release: &str,
) -> Result<ReleaseState, KubeError> {
    let secrets = cluster.release_secrets(ns, release).await?;
    let mut releases = Vec::new();
    for (name, _labels, bytes) in secrets {
        let v = decode_release(&bytes)
            .map_err(|e| KubeError::Helm(format!("Secret {ns}/{name}: {e}")))?;
        releases.push(release_from_json(&v));
    }
    releases.sort_by_key(|r| r.revision);
    if let Some(latest) = releases.last()
        && latest.status.starts_with("pending-")
    {
        return Ok(ReleaseState::Pending(latest.clone()));
    }
    Ok(releases
        .into_iter()
        .rev()
        .find(|r| r.status == "deployed")
        .map(ReleaseState::Deployed)
        .unwrap_or(ReleaseState::Missing))
}

/// One `helm upgrade` of a release: what it upgrades, and how.
pub struct Upgrade<'a> {
    pub helm: &'a str,
    pub release: &'a str,
    pub chart: &'a str,
    pub namespace: &'a str,
    pub chart_version: Option<&'a str>,
    /// helm's `--timeout`: its own default is 5 minutes for each wait (hooks included),
    /// whatever the resource's timeouts say.
    pub timeout: std::time::Duration,
    /// `--force-conflicts` or `--force` (see [`repair_flag`]), for a repair.
    pub force: Option<&'a str>,
}

impl Upgrade<'_> {
    /// The arguments that hand helm every user value of the release (`--reset-values` with the
    /// full set), never `--reuse-values` with nulls: under `--reuse-values` helm keeps a key set
    /// to null in what the chart renders (helm/helm#30765), and helm 4 renders a null under a
    /// subchart's values as null, which a ConfigMap refuses.
    pub fn args(&self, values_file: &Path, target: &[String]) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "upgrade".into(),
            self.release.into(),
            self.chart.into(),
            "--namespace".into(),
            self.namespace.into(),
            "--reset-values".into(),
            "--values".into(),
            values_file.display().to_string(),
        ];
        if let Some(v) = self.chart_version.filter(|v| !v.is_empty()) {
            a.extend(["--version".into(), v.into()]);
        }
        // Whole seconds, at least one.
        a.extend([
            "--timeout".into(),
            format!("{}s", self.timeout.as_secs().max(1)),
        ]);
        a.extend(self.force.map(str::to_string));
        a.extend(target.iter().cloned());
        a
    }

    /// Runs it with `values`, the release's complete user values (JSON is YAML), in a temporary
    /// file, against the cluster the settings name.
    pub async fn run(
        &self,
        values: &Value,
        settings: &KubernetesSettings,
    ) -> Result<String, KubeError> {
        let values_file = TempFile::new("values.yaml", values.to_string().as_bytes())?;
        let target = HelmTarget::new(settings)?;
        let args = self.args(&values_file.0, &target.args);
        run_helm(self.helm, &args, &target).await
    }
}

/// The flag that makes `helm upgrade` put back what the chart renders over hand edits of the
/// live objects, for helm's major version: helm 4 applies server side and, without
/// `--force-conflicts`, refuses to take back a field another manager (`kubectl edit`) now
/// holds; helm 3 patches a custom resource with a two-way merge of the old and new manifests
/// (pkg/kube/client.go, `createPatch`), which never sees a hand edit when the values did not
/// change, so only `--force` (replacing the objects) restores it.
pub fn repair_flag(major: u32) -> &'static str {
    if major >= 4 {
        "--force-conflicts"
    } else {
        "--force"
    }
}

/// The `dependencies` the chart declares (`helm show chart`, its Chart.yaml), as JSON; Null
/// when it declares none.
pub async fn declared_dependencies(
    helm: &str,
    chart: &str,
    version: Option<&str>,
) -> Result<Value, KubeError> {
    let mut cmd = tokio::process::Command::new(helm);
    cmd.args(["show", "chart", chart]);
    if let Some(v) = version.filter(|v| !v.is_empty()) {
        cmd.args(["--version", v]);
    }
    let out = cmd.output().await.map_err(|e| not_run(helm, &e))?;
    if !out.status.success() {
        return Err(KubeError::Helm(format!(
            "`{helm} show chart {chart}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let meta: Value =
        serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).map_err(|e| {
            KubeError::Helm(format!("`{helm} show chart {chart}` printed no chart: {e}"))
        })?;
    Ok(meta.get("dependencies").cloned().unwrap_or(Value::Null))
}

/// helm's major version, from `helm version`.
pub async fn major_version(helm: &str) -> Result<u32, KubeError> {
    let out = tokio::process::Command::new(helm)
        .args(["version", "--template", "{{.Version}}"])
        .output()
        .await
        .map_err(|e| not_run(helm, &e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| KubeError::Helm(format!("`{helm} version` said {text:?}")))
}

/// Environment variables through which helm picks a cluster besides its flags
/// (pkg/cli/environment.go of helm 3 and 4). They are taken out of helm's environment so that
/// helm reaches exactly the cluster the provider's own client reaches.
const HELM_CLUSTER_ENV: &[&str] = &[
    "HELM_KUBECONTEXT",
    "HELM_KUBETOKEN",
    "HELM_KUBEASUSER",
    "HELM_KUBEASGROUPS",
    "HELM_KUBEAPISERVER",
    "HELM_KUBECAFILE",
    "HELM_KUBETLS_SERVER_NAME",
    "HELM_KUBEINSECURE_SKIP_TLS_VERIFY",
    "HELM_NAMESPACE",
];

/// How helm is pointed at the cluster the settings name: the flags, and the temporary
/// kubeconfig behind them (kept alive while helm runs).
pub struct HelmTarget {
    pub args: Vec<String>,
    /// Whether the flags name a kubeconfig, so `KUBECONFIG` must not matter.
    names_kubeconfig: bool,
    _file: Option<TempFile>,
}

impl HelmTarget {
    /// The same cluster [`super::connect`] reaches with these settings: host, token, CA and exec
    /// as a private temporary kubeconfig (no secret on helm's command line); a kubeconfig path
    /// and context as they are; nothing set as helm's own defaults (`KUBECONFIG`,
    /// `~/.kube/config`, in-cluster), which are the client's too.
    pub fn new(settings: &KubernetesSettings) -> Result<HelmTarget, KubeError> {
        if let Some(host) = &settings.host {
            let kc = super::synthetic_kubeconfig(settings, host)?;
            let text = serde_json::to_string(&kc)
                .map_err(|e| KubeError::Helm(format!("kubeconfig for helm: {e}")))?;
            let f = TempFile::new("kubeconfig", text.as_bytes())?;
            return Ok(HelmTarget {
                args: vec!["--kubeconfig".into(), f.0.display().to_string()],
                names_kubeconfig: true,
                _file: Some(f),
            });
        }
        let mut args = Vec::new();
        if let Some(p) = &settings.config_path {
            args.extend(["--kubeconfig".into(), super::expand_home(p)]);
        }
        if let Some(c) = &settings.config_context {
            args.extend(["--kube-context".into(), c.clone()]);
        }
        Ok(HelmTarget {
            names_kubeconfig: settings.config_path.is_some(),
            args,
            _file: None,
        })
    }
}

/// A private file in the temp dir, removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    fn new(stem: &str, content: &[u8]) -> Result<TempFile, KubeError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "fracgpu-{stem}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts
            .open(&path)
            .map_err(|e| KubeError::Helm(format!("cannot write {}: {e}", path.display())))?;
        std::io::Write::write_all(&mut f, content)
            .map_err(|e| KubeError::Helm(format!("cannot write {}: {e}", path.display())))?;
        Ok(TempFile(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Why helm did not start.
fn not_run(helm: &str, e: &std::io::Error) -> KubeError {
    KubeError::Helm(if e.kind() == std::io::ErrorKind::NotFound {
        format!("the helm CLI {helm:?} was not found: install Helm 3 or 4, or set helm.helm_path")
    } else {
        format!("could not run {helm:?}: {e}")
    })
}

/// Runs `helm` with the args; the error quotes helm's stderr.
async fn run_helm(helm: &str, args: &[String], target: &HelmTarget) -> Result<String, KubeError> {
    let mut cmd = tokio::process::Command::new(helm);
    // Not killed when the apply is cut short: a helm killed mid-upgrade leaves the release
    // pending-upgrade, which blocks every later operation until someone rolls it back.
    cmd.args(args);
    for k in HELM_CLUSTER_ENV {
        cmd.env_remove(k);
    }
    if target.names_kubeconfig {
        cmd.env_remove("KUBECONFIG");
    }
    let out = cmd.output().await.map_err(|e| not_run(helm, &e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(KubeError::Helm(format!(
            "`{helm} {}` failed ({}): {}",
            args.first().map(String::as_str).unwrap_or_default(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn releases_round_trip_through_helm_encoding() {
        let r = json!({"name": "op", "namespace": "ns", "version": 3, "info": {"status": "deployed"},
            "chart": {"metadata": {"name": "gpu-operator", "version": "v26.7.0"}, "values": {"a": 1}},
            "config": {"devicePlugin": {"config": {"name": "x"}}}});
        let bytes = encode_release(&r);
        let back = decode_release(&bytes).unwrap();
        assert_eq!(back, r);
        let rel = release_from_json(&back);
        assert_eq!(rel.revision, 3);
        assert_eq!(rel.chart_version, "v26.7.0");
        assert_eq!(
            rel.effective_values(),
            json!({"a": 1, "devicePlugin": {"config": {"name": "x"}}})
        );
    }

    #[test]
    fn plain_json_without_gzip_is_accepted() {
        let b = base64::engine::general_purpose::STANDARD.encode(br#"{"name":"x"}"#);
        assert_eq!(decode_release(b.as_bytes()).unwrap()["name"], "x");
        assert!(decode_release(b"!!").is_err());
    }

    #[test]
    fn upgrade_hands_helm_all_values_and_names_the_cluster() {
        let target = HelmTarget::new(&KubernetesSettings {
            config_path: Some("/k/config".into()),
            config_context: Some("prod".into()),
            ..Default::default()
        })
        .unwrap();
        let a = Upgrade {
            helm: "helm",
            release: "op",
            chart: "chart",
            namespace: "ns",
            chart_version: Some("1.2"),
            timeout: std::time::Duration::from_secs(90),
            force: None,
        }
        .args(Path::new("/v"), &target.args);
        assert!(a.contains(&"--reset-values".to_string()), "{a:?}");
        assert!(!a.contains(&"--reuse-values".to_string()), "{a:?}");
        let at = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].as_str());
        assert_eq!(at("--kubeconfig"), Some("/k/config"));
        assert_eq!(at("--kube-context"), Some("prod"));
        assert_eq!(at("--version"), Some("1.2"));
        assert_eq!(at("--timeout"), Some("90s"));
        // A host is written to a private kubeconfig that lives as long as the target.
        let target = HelmTarget::new(&KubernetesSettings {
            host: Some("https://h".into()),
            token: Some("secret".into()),
            ..Default::default()
        })
        .unwrap();
        let path = target.args[1].clone();
        assert!(!target.args.iter().any(|a| a.contains("secret")));
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("https://h")
        );
        drop(target);
        assert!(!Path::new(&path).exists());
    }
}
