//! How the provider reaches EKS: the `aws {}` settings (static keys, a profile, or the AWS default
//! chain; the sandbox wins over all) and one SDK client per region, with the SDK's own retries off
//! and every answer's body bounded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_eks::Client;
use aws_sdk_eks::config::retry::RetryConfig;
use aws_sdk_eks::config::timeout::TimeoutConfig;
use aws_sdk_eks::config::{BehaviorVersion, Credentials, Region};

use aws_credential_types::provider::SharedCredentialsProvider;

use super::calls::BoundAnswers;
use super::client::{Ec2, EksClient};
use crate::cloud::error::CloudError;

/// How the provider reaches EKS. Static keys win over `profile`, which wins over the AWS default
/// chain (env, shared config/credentials, web identity, ECS, IMDSv2). `sandbox` (a
/// fracgpu-sandbox base URL) wins over everything: endpoint = sandbox, fake static credentials.
#[derive(Clone, Default)]
pub struct EksConfig {
    /// Used when a pool's location names no region.
    pub region: Option<String>,
    pub profile: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub session_token: Option<String>,
    /// Endpoint override (like AWS_ENDPOINT_URL), e.g. a moto server.
    pub endpoint: Option<String>,
    pub sandbox: Option<String>,
}

// Hand-written so that no secret can reach a log line through `{:?}`.
impl std::fmt::Debug for EksConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| if o.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("EksConfig")
            .field("region", &self.region)
            .field("profile", &self.profile)
            .field("access_key", &set(&self.access_key))
            .field("secret_key", &set(&self.secret_key))
            .field("session_token", &set(&self.session_token))
            .field("endpoint", &self.endpoint)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// What the client's per-region SDK clients are built from, and how it reaches EC2.
struct Bases {
    eks: aws_sdk_eks::config::Builder,
    asg: aws_sdk_autoscaling::config::Builder,
    ec2: Ec2,
}

fn nonempty(o: &Option<String>) -> Option<String> {
    o.clone().filter(|s| !s.trim().is_empty())
}

/// The sandbox at `url`, which checks that a SigV4 header is well formed, not who signed it.
fn sandbox_bases(
    url: String,
    retry: RetryConfig,
    timeouts: TimeoutConfig,
) -> Result<Bases, CloudError> {
    let credentials = Credentials::new("AKIDSANDBOX", "sandbox", None, None, "fracgpu-sandbox");
    let eks = aws_sdk_eks::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .credentials_provider(credentials.clone())
        .endpoint_url(&url)
        .retry_config(retry.clone())
        .timeout_config(timeouts.clone());
    let asg = aws_sdk_autoscaling::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .credentials_provider(credentials.clone())
        .endpoint_url(&url)
        .retry_config(retry)
        .timeout_config(timeouts);
    let ec2 = Ec2 {
        http: crate::cloud::answer::http_client()?,
        endpoint: Some(url),
        credentials: Some(SharedCredentialsProvider::new(credentials)),
    };
    Ok(Bases { eks, asg, ec2 })
}

/// AWS as `cfg` says: static keys, else a profile, else the default chain; an endpoint override
/// for every service.
async fn aws_bases(
    cfg: &EksConfig,
    region: Option<&String>,
    retry: RetryConfig,
    timeouts: TimeoutConfig,
) -> Result<Bases, CloudError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(retry)
        .timeout_config(timeouts);
    if let Some(r) = region {
        loader = loader.region(Region::new(r.clone()));
    }
    if let Some(p) = nonempty(&cfg.profile) {
        loader = loader.profile_name(p);
    }
    match (nonempty(&cfg.access_key), nonempty(&cfg.secret_key)) {
        (Some(ak), Some(sk)) => {
            loader = loader.credentials_provider(Credentials::new(
                ak,
                sk,
                nonempty(&cfg.session_token),
                None,
                "fracgpu-provider",
            ));
        }
        (None, None) => {}
        _ => {
            return Err(CloudError::Auth(
                "aws: access_key and secret_key must be given together (or neither, to use \
                    the AWS default credential chain)"
                    .into(),
            ));
        }
    }
    if let Some(e) = nonempty(&cfg.endpoint) {
        loader = loader.endpoint_url(e);
    }
    let sdk = loader.load().await;
    let ec2 = Ec2 {
        http: crate::cloud::answer::http_client()?,
        endpoint: nonempty(&cfg.endpoint),
        credentials: sdk.credentials_provider(),
    };
    Ok(Bases {
        eks: aws_sdk_eks::config::Builder::from(&sdk),
        asg: aws_sdk_autoscaling::config::Builder::from(&sdk),
        ec2,
    })
}

impl EksClient {
    pub async fn new(cfg: EksConfig) -> Result<EksClient, CloudError> {
        // Our retry loop replaces the SDK's (see the module docs); the connect timeout keeps a
        // black-holed endpoint from eating a whole attempt.
        let retry = RetryConfig::disabled();
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(10))
            .build();
        let region = nonempty(&cfg.region);
        let sandbox = nonempty(&cfg.sandbox);
        let fast = sandbox.is_some();
        let Bases { eks, asg, ec2 } = match sandbox {
            Some(url) => sandbox_bases(url, retry, timeouts)?,
            None => aws_bases(&cfg, region.as_ref(), retry, timeouts).await?,
        };
        tracing::debug!(
            sandbox = fast,
            region = region.as_deref().unwrap_or(""),
            "eks client configured"
        );
        Ok(EksClient {
            base: eks,
            default_region: region,
            clients: Mutex::new(HashMap::new()),
            asg_base: asg,
            asg_clients: Mutex::new(HashMap::new()),
            ec2,
            // Real node groups take minutes; the sandbox's operations take about two seconds.
            poll_first: if fast {
                Duration::from_millis(250)
            } else {
                Duration::from_secs(5)
            },
            poll_cap: if fast {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(30)
            },
            retry_first: Duration::from_millis(if fast { 100 } else { 1000 }),
            retry_cap: Duration::from_secs(20),
            attempt_timeout: Duration::from_secs(60),
            pace: Default::default(),
            throttles: Default::default(),
        })
    }

    /// Poll intervals for operations: the first delay and the cap it doubles up to.
    pub fn with_poll_interval(mut self, first: Duration, cap: Duration) -> Self {
        self.poll_first = first;
        self.poll_cap = cap.max(first);
        self
    }

    /// Delays between retries of a failed call (a server's Retry-After wins).
    pub fn with_retry_interval(mut self, first: Duration, cap: Duration) -> Self {
        self.retry_first = first;
        self.retry_cap = cap.max(first);
        self
    }

    /// The longest one HTTP attempt may take before it counts as a dropped connection.
    pub fn with_attempt_timeout(mut self, t: Duration) -> Self {
        self.attempt_timeout = t;
        self
    }

    pub(super) fn client(&self, region: &str) -> Result<Client, CloudError> {
        let region = self.region_or_default(region)?;
        let mut cache = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let c = cache.entry(region.to_string()).or_insert_with(|| {
            Client::from_conf(
                self.base
                    .clone()
                    .region(Region::new(region.to_string()))
                    .interceptor(BoundAnswers)
                    .build(),
            )
        });
        Ok(c.clone())
    }

    /// The Auto Scaling client of a region, as [`EksClient::client`] gives EKS's.
    pub(super) fn asg_client(
        &self,
        region: &str,
    ) -> Result<aws_sdk_autoscaling::Client, CloudError> {
        let region = self.region_or_default(region)?;
        let mut cache = self.asg_clients.lock().unwrap_or_else(|e| e.into_inner());
        let c = cache.entry(region.to_string()).or_insert_with(|| {
            aws_sdk_autoscaling::Client::from_conf(
                self.asg_base
                    .clone()
                    .region(Region::new(region.to_string()))
                    .interceptor(BoundAnswers)
                    .build(),
            )
        });
        Ok(c.clone())
    }

    pub(super) fn region_or_default<'a>(&'a self, region: &'a str) -> Result<&'a str, CloudError> {
        Ok(if region.is_empty() {
            self.default_region
                .as_deref()
                .ok_or_else(|| CloudError::Api {
                    status: 0,
                    code: "MissingRegion".into(),
                    message:
                        "no AWS region: set eks location's region or the provider's aws.region \
                    (AWS_REGION)"
                            .into(),
                })?
        } else {
            region
        })
    }
}
