//! A table of bad requests to every API, each with the status and error code the real service
//! answers, checked in each API's error shape; the rows live beside this file, one file per cloud.

mod arm;
mod eks;
mod gke;

use super::*;

struct Case {
    api: &'static str,
    method: Method,
    path: String,
    body: String,
    status: u16,
    code: &'static str,
}

fn case(
    api: &'static str,
    method: Method,
    path: impl Into<String>,
    body: Value,
    status: u16,
    code: &'static str,
) -> Case {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    Case {
        api,
        method,
        path: path.into(),
        body,
        status,
        code,
    }
}

fn raw(
    api: &'static str,
    method: Method,
    path: impl Into<String>,
    body: &str,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        api,
        method,
        path: path.into(),
        body: body.to_string(),
        status,
        code,
    }
}

/// An agent pool's URL in the default AKS cluster.
fn pool(name: &str) -> String {
    format!("{}/{name}?{API}", aks_pools("sandbox-aks"))
}

fn props(p: Value) -> Value {
    json!({ "properties": p })
}

#[tokio::test]
async fn bad_requests_get_the_real_status_and_error_shape() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    // Fixtures for conflicts and updates.
    assert_eq!(
        s.gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "dup", "initialNodeCount": 1}}))
        )
        .await
        .status,
        StatusCode::OK
    );
    let ng = json!({"nodegroupName": "dup", "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]});
    assert_eq!(
        s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&ng))
            .await
            .status,
        StatusCode::OK
    );
    let mut cases = arm::cases();
    cases.extend(gke::cases());
    cases.extend(eks::cases());
    cases.extend(arm::aad_cases());
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let auth = format!("Bearer {tok}");
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let eks = eks_headers("us-east-1");
        let s3: &'static str = Box::leak(eks[0].1.replace("/eks/", "/s3/").into_boxed_str());
        let headers: Vec<(&str, &str)> = match c.api {
            "arm" => vec![
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            "gke" => vec![("content-type", "application/json")],
            "eks" => eks.to_vec(),
            "eks-noauth" => vec![eks[1]],
            "eks-s3" => vec![("authorization", s3), eks[1]],
            "eks-nodate" => vec![eks[0]],
            _ => vec![("content-type", "application/x-www-form-urlencoded")],
        };
        let r = s
            .call(c.method.clone(), &c.path, &headers, c.body.as_bytes())
            .await;
        let got = match c.api {
            "arm" => r.body["error"]["code"].as_str().map(str::to_string),
            "gke" => {
                // google.rpc: numeric code equals the HTTP status, and a message.
                assert_eq!(
                    r.body["error"]["code"].as_u64(),
                    Some(r.status.as_u16() as u64),
                    "case {i}: {}",
                    r.text
                );
                assert!(r.body["error"]["message"].is_string(), "case {i}");
                r.body["error"]["status"].as_str().map(str::to_string)
            }
            "aad" => r.body["error"].as_str().map(str::to_string),
            _ => {
                assert!(
                    r.body["message"].is_string(),
                    "case {i}: restJson1 body has a message: {}",
                    r.text
                );
                r.header("x-amzn-errortype")
            }
        };
        if r.status.as_u16() != c.status || got.as_deref() != Some(c.code) {
            failures.push(format!(
                "case {i} {} {} {}: want {} {}, got {} {:?}: {}",
                c.api, c.method, c.path, c.status, c.code, r.status, got, r.text
            ));
        }
        if c.api == "arm" {
            assert!(
                r.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "case {i}: ARM errors carry a message"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // Nothing was created by the bad requests.
    let inv = s.sb.inventory();
    let names: Vec<&str> = inv["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["dup", "dup"]);
}
