//! Pools made outside terraform, by the clouds' own clients against the sandbox: gcloud for GKE,
//! the aws CLI for EKS, and curl speaking ARM for AKS (Azure AD token, then a PUT of the agent
//! pool), as someone adopting an existing cluster would have made them.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::tools::{self, Tool};

pub struct Outside {
    url: String,
    gcloud: PathBuf,
    aws: PathBuf,
    curl: PathBuf,
    dir: tempfile::TempDir,
}

/// The agent pool api-version the ARM calls use (the one the provider pins).
const ARM_API_VERSION: &str = "2025-10-01";

impl Outside {
    /// None (after saying so) when a client is missing outside CI; under CI that fails.
    pub fn new(url: &str) -> Option<Outside> {
        let (gcloud, aws, curl) = (
            tools::require(Tool::Gcloud)?,
            tools::require(Tool::Aws)?,
            tools::require(Tool::Curl)?,
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gcloud-token"), "ya29.sandbox").unwrap();
        Some(Outside {
            url: url.to_string(),
            gcloud,
            aws,
            curl,
            dir,
        })
    }

    fn run(&self, mut cmd: Command, what: &str) -> String {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `gcloud container node-pools <args> --cluster sandbox-gke --location us-central1`.
    pub fn gcloud_node_pools(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.gcloud);
        cmd.args(["container", "node-pools"])
            .args(args)
            .args(["--cluster", "sandbox-gke", "--location", "us-central1"])
            .env("CLOUDSDK_CONFIG", self.dir.path().join("gcloud"))
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
                format!("{}/", self.url),
            )
            .env(
                "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
                self.dir.path().join("gcloud-token"),
            )
            .env("CLOUDSDK_CORE_PROJECT", "sandbox-project")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1");
        self.run(
            cmd,
            &format!("gcloud container node-pools {}", args.join(" ")),
        )
    }

    /// `aws eks <args>` against the sandbox's EKS in us-east-1.
    pub fn aws_eks(&self, args: &[&str]) -> String {
        self.aws("eks", args)
    }

    /// `aws ec2 <args>` against the sandbox's EC2 (launch templates) in us-east-1.
    pub fn aws_ec2(&self, args: &[&str]) -> String {
        self.aws("ec2", args)
    }

    /// `aws <service> <args>` against the sandbox in us-east-1; its output.
    fn aws(&self, service: &str, args: &[&str]) -> String {
        let cmd = self.aws_command(service, args);
        self.run(cmd, &format!("aws {service} {}", args.join(" ")))
    }

    /// `aws <service> <args>`, which must fail; what it said on stderr.
    pub fn aws_fails(&self, service: &str, args: &[&str]) -> String {
        let out = self.aws_command(service, args).output().unwrap();
        assert!(
            !out.status.success(),
            "aws {service} {} succeeded:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn aws_command(&self, service: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.aws);
        cmd.args([service, "--endpoint-url", &self.url, "--output", "json"])
            .args(args);
        self.aws_env(&mut cmd);
        cmd
    }

    /// The aws CLI's environment: the sandbox's keys and region, no config of the machine's.
    fn aws_env(&self, cmd: &mut Command) {
        cmd.env("AWS_ACCESS_KEY_ID", "AKIDSANDBOX")
            .env("AWS_SECRET_ACCESS_KEY", "sandbox-secret")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_PAGER", "")
            .env("AWS_CONFIG_FILE", self.dir.path().join("aws-config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                self.dir.path().join("aws-credentials"),
            );
    }

    /// `aws autoscaling <args>` against the sandbox's Auto Scaling API in us-east-1.
    pub fn aws_autoscaling(&self, args: &[&str]) -> String {
        self.aws("autoscaling", args)
    }

    /// Creates an agent pool of the sandbox's AKS cluster with ARM's REST API: a client
    /// credentials token from Azure AD, then `PUT .../agentPools/<name>` with `properties`.
    pub fn arm_put_pool(&self, name: &str, properties: Value) -> Value {
        let mut token = Command::new(&self.curl);
        token.args([
            "-sS",
            "--fail-with-body",
            "-X",
            "POST",
            "--data",
            "grant_type=client_credentials&client_id=adopter&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default",
            &format!("{}/sandbox-tenant/oauth2/v2.0/token", self.url),
        ]);
        let token: Value = serde_json::from_str(&self.run(token, "Azure AD token")).unwrap();
        let token = token["access_token"].as_str().unwrap().to_string();
        let body = serde_json::json!({ "properties": properties }).to_string();
        let mut put = Command::new(&self.curl);
        put.args([
            "-sS",
            "--fail-with-body",
            "-X",
            "PUT",
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            "Content-Type: application/json",
            "--data",
            &body,
            &format!(
                "{}/subscriptions/{}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/{name}?api-version={ARM_API_VERSION}",
                self.url,
                ::sandbox::DEFAULT_SUBSCRIPTION
            ),
        ]);
        serde_json::from_str(&self.run(put, &format!("ARM PUT agentPools/{name}"))).unwrap()
    }
}
