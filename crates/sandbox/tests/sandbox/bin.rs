//! The `fracgpu-sandbox serve` binary: prints its endpoints, serves, persists its world with
//! `--state`, adds clusters from `--clusters`, and exits cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::eks_headers;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_fracgpu-sandbox");

/// Start the binary on a free port and return it with its base URL (read from its first line).
fn serve(args: &[&str]) -> (Child, String, Vec<String>) {
    let mut child = Command::new(BIN)
        .args(["serve", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = Vec::new();
    let mut base = String::new();
    for _ in 0..20 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(rest) = line.strip_prefix("fracgpu-sandbox listening on ") {
            base = rest.split_whitespace().next().unwrap_or("").to_string();
        }
        let done = line.contains("control");
        lines.push(line);
        if done {
            break;
        }
    }
    assert!(
        base.starts_with("http://127.0.0.1:"),
        "no address in {lines:?}"
    );
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    (child, base, lines)
}

fn terminate(mut child: Child) -> std::process::ExitStatus {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill -TERM");
    for _ in 0..100 {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("sandbox did not stop on SIGTERM");
}

async fn call(base: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    use http_body_util::{BodyExt, Full};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<axum::body::Bytes>>();
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"));
    for (k, v) in eks_headers("us-east-1") {
        req = req.header(k, v);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let resp = client
        .request(req.body(Full::new(body.into())).unwrap())
        .await
        .expect("answer");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn serve_persists_across_restarts_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let clusters = dir.path().join("clusters.json");
    std::fs::write(
        &clusters,
        json!([{"cloud": "eks", "region": "us-east-1", "name": "extra"}]).to_string(),
    )
    .unwrap();
    let st = state.display().to_string();
    let cl = clusters.display().to_string();
    let (child, base, lines) = serve(&["--op-seconds", "0", "--state", &st, "--clusters", &cl]);
    let printed = lines.concat();
    for endpoint in [
        "oauth2/v2.0/token",
        "/subscriptions/00000000-0000-0000-0000-000000000000",
        "/v1/projects/sandbox-project",
        "/clusters/sandbox-eks",
        "/_sandbox/inventory",
    ] {
        assert!(
            printed.contains(endpoint),
            "{endpoint} not printed in:\n{printed}"
        );
    }
    let ng = json!({"nodegroupName": "kept", "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]});
    let (status, _) = call(&base, Method::POST, "/clusters/extra/node-groups", Some(ng)).await;
    assert_eq!(status, StatusCode::OK);
    let status = terminate(child);
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");

    let (child, base, _) = serve(&["--op-seconds", "0", "--state", &st]);
    let (status, body) = call(&base, Method::GET, "/clusters/extra/node-groups/kept", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["nodegroup"]["status"], "ACTIVE");
    let (_, inv) = call(&base, Method::GET, "/_sandbox/inventory", None).await;
    assert_eq!(inv["pools"].as_array().map(|a| a.len()), Some(1));
    assert!(terminate(child).success());
}

#[test]
fn bad_flags_exit_with_usage() {
    let out = Command::new(BIN)
        .args(["serve", "--op-seconds", "fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--op-seconds"));
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: fracgpu-sandbox serve"));
}
