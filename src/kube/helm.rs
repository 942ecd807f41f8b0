//! Helm 3 releases, read natively from their Secrets (no helm binary needed to detect drift) and
//! upgraded through the `helm` CLI (the only supported writer of a release).
//!
//! Storage: Secret `sh.helm.release.v1.<release>.v<revision>`, type `helm.sh/release.v1`, labels
//! owner=helm, name, status, version; `data.release` is base64(gzip(JSON)) and the Kubernetes API
//! base64-encodes Secret data once more (the client undoes that layer).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use serde_json::Value;

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
}

impl Release {
    /// The values the release runs with: chart defaults overlaid with the user's.
    pub fn effective_values(&self) -> Value {
        let mut v = self.chart_values.clone();
        merge(&mut v, &self.config);
        v
    }
}

/// Helm's coalescing: maps merge key by key, anything else replaces, null deletes.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(slot) = b.get_mut(k) {
                    merge(slot, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
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

/// Encodes a release the way Helm 3 stores it (before the API's base64): base64(gzip(JSON)).
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

/// The arguments of `helm upgrade --reuse-values`; the values file holds the change only.
pub fn upgrade_args(
    release: &str,
    chart: &str,
    ns: &str,
    chart_version: Option<&str>,
    values_file: &Path,
    kubeconfig: Option<&str>,
    context: Option<&str>,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "upgrade".into(),
        release.into(),
        chart.into(),
        "--namespace".into(),
        ns.into(),
        "--reuse-values".into(),
        "--values".into(),
        values_file.display().to_string(),
    ];
    if let Some(v) = chart_version.filter(|v| !v.is_empty()) {
        a.extend(["--version".into(), v.into()]);
    }
    if let Some(k) = kubeconfig {
        a.extend(["--kubeconfig".into(), k.into()]);
    }
    if let Some(c) = context {
        a.extend(["--kube-context".into(), c.into()]);
    }
    a
}

/// A private file in the temp dir, removed on drop.
struct TempFile(PathBuf);

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

/// `helm upgrade --reuse-values` with `values` (JSON is YAML) in a temporary file. Settings with a
/// host (token, exec) go to helm as a temporary kubeconfig, so no secret is on its command line.
pub async fn upgrade(
    helm: &str,
    release: &str,
    chart: &str,
    ns: &str,
    chart_version: Option<&str>,
    values: &Value,
    settings: &KubernetesSettings,
) -> Result<String, KubeError> {
    let values_file = TempFile::new("values.yaml", values.to_string().as_bytes())?;
    let (kubeconfig, _kc_file, context) = if let Some(host) = &settings.host {
        let kc = super::synthetic_kubeconfig(settings, host)?;
        let text = serde_json::to_string(&kc)
            .map_err(|e| KubeError::Helm(format!("kubeconfig for helm: {e}")))?;
        let f = TempFile::new("kubeconfig", text.as_bytes())?;
        (Some(f.0.display().to_string()), Some(f), None)
    } else {
        (
            settings.config_path.as_deref().map(super::expand_home),
            None,
            settings.config_context.clone(),
        )
    };
    let args = upgrade_args(
        release,
        chart,
        ns,
        chart_version,
        &values_file.0,
        kubeconfig.as_deref(),
        context.as_deref(),
    );
    run_helm(helm, &args).await
}

/// Runs `helm` with the args; the error quotes helm's stderr.
pub async fn run_helm(helm: &str, args: &[String]) -> Result<String, KubeError> {
    let out = tokio::process::Command::new(helm)
        .args(args)
        .output()
        .await
        .map_err(|e| {
            KubeError::Helm(if e.kind() == std::io::ErrorKind::NotFound {
                format!("the helm CLI {helm:?} was not found: install Helm 3 or set helm.helm_path")
            } else {
                format!("could not run {helm:?}: {e}")
            })
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(KubeError::Helm(format!(
            "`{helm} upgrade` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Renders values as YAML for people (the `helm_values` attribute): multi-line strings as
/// literal blocks, everything else as plain or JSON-quoted scalars (valid YAML).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, 0, &mut out);
    out
}

fn yaml_key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !["true", "false", "yes", "no", "on", "off", "null", "y", "n"]
            .contains(&k.to_ascii_lowercase().as_str());
    if plain {
        k.to_string()
    } else {
        Value::from(k).to_string()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => Value::from(s.as_str()).to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn write_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let Value::Object(m) = v else {
        out.push_str(&format!("{pad}{}\n", scalar(v)));
        return;
    };
    for (k, val) in m {
        let key = yaml_key(k);
        match val {
            Value::Object(inner) if !inner.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                write_yaml(val, indent + 2, out);
            }
            Value::String(s)
                if s.contains('\n')
                    && !s.starts_with(' ')
                    && !s.contains("\n\n")
                    && !s.contains('\r')
                    && !s.lines().any(|l| l.ends_with(' ')) =>
            {
                let chomp = if s.ends_with('\n') { "" } else { "-" };
                out.push_str(&format!("{pad}{key}: |{chomp}\n"));
                for line in s.lines() {
                    out.push_str(&format!("{pad}  {line}\n"));
                }
            }
            Value::Object(_) => out.push_str(&format!("{pad}{key}: {{}}\n")),
            other => out.push_str(&format!("{pad}{key}: {}\n", scalar(other))),
        }
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
    fn values_render_as_yaml_literal_blocks() {
        let v = json!({"devicePlugin": {"config": {"create": true, "name": "cm",
            "data": {"all": "", "ts": "version: v1\nsharing: {}\n", "10": "x"}}}});
        let y = to_yaml(&v);
        assert!(y.contains("    data:\n      \"10\": \"x\"\n      all: \"\"\n      ts: |\n        version: v1\n"), "{y}");
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn merge_deletes_nulls_and_merges_maps() {
        let mut base = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(&mut base, &json!({"a": {"c": null, "e": 3}, "d": [2]}));
        assert_eq!(base, json!({"a": {"b": 1, "e": 3}, "d": [2]}));
    }
}
