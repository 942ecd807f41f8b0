//! EKS managed node groups through the official aws-sdk-eks: a [`PoolSpec`] becomes a
//! CreateNodegroup request, DescribeNodegroup is read back into the same neutral terms, and in-place
//! changes (labels, taints, scaling) go through one UpdateNodegroupConfig whose update is polled
//! with DescribeUpdate.
//!
//! Retries are ours, not the SDK's (its retry is disabled): one loop per call that retries
//! throttling, 5xx and broken connections with [`Backoff`], honours Retry-After, gives up after
//! [`MAX_ATTEMPTS`], and never outlives the operation's deadline or a stop. That keeps every wait
//! under the `timeouts` block and StopProvider, which the SDK's own retry loop knows nothing about.
//!
//! Round-trip rule: [`EksClient::get`] maps a node group back to the spec it was created from, so
//! drift is a plain comparison. What EKS fills in on its own maps back to the spec's defaults:
//! diskSize 20 (EKS's Linux default) reads as `None`, `eks.amazonaws.com/*` labels, remoteAccess,
//! releaseVersion, version, tags and desiredSize of an autoscaled group are ignored. Values EKS
//! cannot express are folded by [`canonical_spec`]; a caller compares `get`'s spec against
//! `canonical_spec(desired)`.
//!
//! States: a group in DELETING reads as gone (a deletion cannot be stopped, and a create of the
//! same name waits for it to finish); DELETE_FAILED and CREATE_FAILED read as existing so the
//! resource keeps them in state; DEGRADED keeps a create waiting (it can recover) until the
//! deadline, whose Timeout then quotes the last status and health issues.
//!
//! Idempotency: a create's clientRequestToken is a hash of the spec ([`request_token`]), so a
//! retried create is the same request. Where the token does not help (moto ignores it; another
//! client made the group) a ResourceInUseException is resolved by comparing the existing group
//! with the spec: equal is adopted, different is an error that names the import ID.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_eks::Client;
use aws_sdk_eks::config::http::HttpResponse;
use aws_sdk_eks::config::retry::RetryConfig;
use aws_sdk_eks::config::timeout::TimeoutConfig;
use aws_sdk_eks::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_eks::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_eks::types::{
    AmiTypes, CapacityTypes, Nodegroup, NodegroupScalingConfig, Taint, TaintEffect, Update,
    UpdateLabelsPayload, UpdateTaintsPayload,
};

use super::{
    CloudError, Detail, EksPoolFields, Location, NodePools, OpCtx, Pool, PoolGpu, PoolSpec,
    PoolTaint, Scaling,
};
use crate::operation::{
    Attempt, Backoff, Check, Failure, Start, poll_until, retry, retry_after_seconds,
    retryable_status,
};

/// Attempts per API call (the first try included) before a retryable failure is returned.
pub const MAX_ATTEMPTS: u32 = 6;
/// The disk size EKS gives a Linux or Bottlerocket node group when the request has none.
pub const DEFAULT_DISK_SIZE_GB: u32 = 20;
/// Node labels EKS manages itself; never part of a spec, never removed by an update.
const RESERVED_LABEL_PREFIX: &str = "eks.amazonaws.com/";
/// Codes that mean the credentials, not the request, are the problem.
const AUTH_CODES: &[&str] = &[
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
];
const THROTTLING_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ServerException",
    "ServiceUnavailableException",
];

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

/// The EKS side of [`NodePools`]. One SDK client per region, built on first use and cached.
pub struct EksClient {
    base: aws_sdk_eks::config::Builder,
    default_region: Option<String>,
    clients: Mutex<HashMap<String, Client>>,
    poll_first: Duration,
    poll_cap: Duration,
    retry_first: Duration,
    retry_cap: Duration,
    attempt_timeout: Duration,
}

impl EksClient {
    pub async fn new(cfg: EksConfig) -> Result<EksClient, CloudError> {
        // Our retry loop replaces the SDK's (see the module docs); the connect timeout keeps a
        // black-holed endpoint from eating a whole attempt.
        let retry = RetryConfig::disabled();
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(10))
            .build();
        let nonempty = |o: &Option<String>| o.clone().filter(|s| !s.trim().is_empty());
        let region = nonempty(&cfg.region);
        let (base, fast) = if let Some(url) = nonempty(&cfg.sandbox) {
            // The sandbox checks that a SigV4 header is well formed, not who signed it.
            let b = aws_sdk_eks::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .credentials_provider(Credentials::new(
                    "AKIDSANDBOX",
                    "sandbox",
                    None,
                    None,
                    "fracgpu-sandbox",
                ))
                .endpoint_url(url)
                .retry_config(retry)
                .timeout_config(timeouts);
            (b, true)
        } else {
            let mut loader = aws_config::defaults(BehaviorVersion::latest())
                .retry_config(retry)
                .timeout_config(timeouts);
            if let Some(r) = &region {
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
                        "aws: access_key and secret_key must be given together (or neither, to use the AWS default credential chain)".into(),
                    ));
                }
            }
            if let Some(e) = nonempty(&cfg.endpoint) {
                loader = loader.endpoint_url(e);
            }
            let sdk = loader.load().await;
            (aws_sdk_eks::config::Builder::from(&sdk), false)
        };
        tracing::debug!(
            sandbox = fast,
            region = region.as_deref().unwrap_or(""),
            "eks client configured"
        );
        Ok(EksClient {
            base,
            default_region: region,
            clients: Mutex::new(HashMap::new()),
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

    fn client(&self, region: &str) -> Result<Client, CloudError> {
        let region = if region.is_empty() {
            self.default_region.as_deref().ok_or_else(|| CloudError::Api {
                status: 0,
                code: "MissingRegion".into(),
                message: "no AWS region: set eks location's region or the provider's aws.region (AWS_REGION)".into(),
            })?
        } else {
            region
        };
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

    /// One API call with our retry policy: retryable failures are tried again with backoff (or the
    /// server's Retry-After) up to [`MAX_ATTEMPTS`]; the deadline and a stop end it at any point.
    async fn call<T, E, F, Fut>(
        &self,
        ctx: &OpCtx,
        what: &str,
        mut send: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let attempt_timeout = self.attempt_timeout;
        let attempt = move || {
            let sent = tokio::time::timeout(attempt_timeout, send());
            async move {
                // A call in flight is abandoned at the deadline or on a stop.
                let failure = match ctx.run(what, sent).await? {
                    Ok(Ok(v)) => return Ok(Attempt::Done(v)),
                    Ok(Err(e)) => classify(e),
                    Err(_) => Classified {
                        error: CloudError::Transport(
                            format!("{what}: no answer within {}s", attempt_timeout.as_secs())
                                .into(),
                        ),
                        retryable: true,
                        retry_after: None,
                    },
                };
                if !failure.retryable {
                    return Err(failure.error);
                }
                Ok(Attempt::Failed(Failure {
                    last: Err(failure.error),
                    retry_after: failure.retry_after,
                    waiting_for: what.to_string(),
                }))
            }
        };
        let log = |f: &Failure<T>, attempt: u32, _| {
            if let Err(e) = &f.last {
                tracing::debug!(attempt, call = what, error = %e, "eks call failed, retrying");
            }
        };
        let backoff = Backoff::new(self.retry_first, self.retry_cap);
        retry(ctx, backoff, MAX_ATTEMPTS, attempt, log).await
    }

    async fn describe(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let req = client
            .describe_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(name);
        match self
            .call(
                ctx,
                &format!("DescribeNodegroup of {cluster}:{name}"),
                || req.clone().send(),
            )
            .await
        {
            Ok(out) => match out.nodegroup {
                Some(ng) => Ok(Some(ng)),
                None => Err(CloudError::BadResponse(
                    "DescribeNodegroup answered without a nodegroup".into(),
                )),
            },
            // The cluster being gone means its node groups are gone too.
            Err(e) if has_code(&e, "ResourceNotFoundException") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Describes the node group until `decide` is done with what it sees (None: the group is
    /// gone), every look named by the one before it. A timeout inside a Describe names the wait,
    /// not the call.
    async fn watch<T>(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
        waiting_for: String,
        decide: impl Fn(Option<Nodegroup>) -> Result<Check<T>, CloudError> + Sync,
    ) -> Result<T, CloudError> {
        let decide = &decide;
        let backoff = Backoff::polling(self.poll_first, self.poll_cap);
        poll_until(ctx, backoff, waiting_for, Start::Now, move |waiting| {
            let waiting = waiting.to_string();
            async move {
                let found = self.describe(client, cluster, name, ctx).await;
                decide(found.map_err(|e| retag(e, &waiting))?)
            }
        })
        .await
    }

    /// Polls until the node group is ACTIVE (DEGRADED and UPDATING keep waiting: they can recover;
    /// the deadline bounds that), failing on CREATE_FAILED.
    async fn wait_active(
        &self,
        client: &Client,
        region: &str,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let waiting = format!("node group {cluster}:{name} to become ACTIVE");
        self.watch(client, cluster, name, ctx, waiting, |found| {
            let Some(ng) = found else {
                return Err(CloudError::OperationFailed {
                    code: "ResourceNotFoundException".into(),
                    message: format!(
                        "node group {cluster}:{name} disappeared while it was being created"
                    ),
                });
            };
            let status = status_of(&ng);
            match status.as_str() {
                "ACTIVE" => Ok(Check::Done(to_pool(region, cluster, &ng))),
                "CREATE_FAILED" | "DELETING" | "DELETE_FAILED" => {
                    Err(operation_failed(&ng, &status))
                }
                _ => Ok(still(format!(
                    "node group {cluster}:{name} to become ACTIVE (last status {status}{})",
                    issues_suffix(&ng)
                ))),
            }
        })
        .await
    }

    /// Polls until DescribeNodegroup answers ResourceNotFoundException.
    async fn wait_gone(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let waiting = format!("node group {cluster}:{name} to be deleted");
        self.watch(client, cluster, name, ctx, waiting, |found| {
            let Some(ng) = found else {
                return Ok(Check::Done(()));
            };
            let status = status_of(&ng);
            if status == "DELETE_FAILED" {
                return Err(operation_failed(&ng, &status));
            }
            Ok(still(format!(
                "node group {cluster}:{name} to be deleted (last status {status})"
            )))
        })
        .await
    }

    /// Polls until the node group leaves CREATING/UPDATING/DELETING; None if it went away.
    async fn wait_settled(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let waiting = format!("node group {cluster}:{name} to be ready for changes");
        self.watch(client, cluster, name, ctx, waiting, |found| {
            let Some(ng) = found else {
                return Ok(Check::Done(None));
            };
            let status = status_of(&ng);
            if !matches!(status.as_str(), "CREATING" | "UPDATING" | "DELETING") {
                return Ok(Check::Done(Some(ng)));
            }
            Ok(still(format!(
                "node group {cluster}:{name} to finish {status}"
            )))
        })
        .await
    }

    /// Follows an update from UpdateNodegroupConfig's answer (which may already be final, as on
    /// moto, where DescribeUpdate does not exist) through DescribeUpdate to Successful.
    async fn wait_update(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        first: Update,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let update_id = first.id().unwrap_or("").to_string();
        if update_id.is_empty() {
            return Err(CloudError::BadResponse(
                "UpdateNodegroupConfig answered without an update id".into(),
            ));
        }
        let backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let req = &client
            .describe_update()
            .name(cluster)
            .nodegroup_name(name)
            .update_id(&update_id);
        let what = &format!("update {update_id} of node group {cluster}:{name}");
        // The first look is at the update as UpdateNodegroupConfig answered it.
        let mut first = Some(first);
        poll_until(ctx, backoff, what.clone(), Start::Now, move |waiting| {
            let given = first.take();
            let waiting = waiting.to_string();
            async move {
                let update = match given {
                    Some(update) => update,
                    None => {
                        let out = self
                            .call(ctx, "DescribeUpdate", || req.clone().send())
                            .await
                            .map_err(|e| retag(e, &waiting))?;
                        out.update.ok_or_else(|| {
                            CloudError::BadResponse(
                                "DescribeUpdate answered without an update".into(),
                            )
                        })?
                    }
                };
                update_state(&update, what)
            }
        })
        .await
    }

    async fn send_create(
        &self,
        client: &Client,
        cluster: &str,
        spec: &PoolSpec,
        eks: &EksPoolFields,
        token: &str,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let (min, max, desired) = match spec.scaling {
            Scaling::Fixed { nodes } => (nodes, nodes, nodes),
            Scaling::Auto { min, max } => (min, max, min),
        };
        let mut req = client
            .create_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(&spec.name)
            .node_role(&eks.node_role_arn)
            .set_subnets(Some(eks.subnet_ids.clone()))
            .scaling_config(
                NodegroupScalingConfig::builder()
                    .min_size(to_i32(min))
                    .max_size(to_i32(max))
                    .desired_size(to_i32(desired))
                    .build(),
            )
            .instance_types(&spec.machine_type)
            .capacity_type(if spec.spot {
                CapacityTypes::Spot
            } else {
                CapacityTypes::OnDemand
            })
            .set_labels(Some(
                spec.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ))
            .set_taints(Some(spec.taints.iter().map(to_sdk_taint).collect()))
            .client_request_token(token);
        if !eks.ami_type.is_empty() {
            req = req.ami_type(AmiTypes::from(eks.ami_type.as_str()));
        }
        if let Some(d) = spec.disk_size_gb {
            req = req.disk_size(to_i32(d));
        }
        self.call(
            ctx,
            &format!("CreateNodegroup of {cluster}:{}", spec.name),
            || req.clone().send(),
        )
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl NodePools for EksClient {
    /// None when the node group (or its cluster) does not exist, and also while it is DELETING:
    /// a deletion cannot be undone, so for the user the group is already gone, and a create of the
    /// same name waits for the deletion to finish instead of failing. DELETE_FAILED is returned.
    async fn get(
        &self,
        location: &Location,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        let (region, cluster) = eks_location(location)?;
        let client = self.client(region)?;
        let ng = self.describe(&client, cluster, name, ctx).await?;
        Ok(ng
            .filter(|ng| status_of(ng) != "DELETING")
            .map(|ng| to_pool(region, cluster, &ng)))
    }

    async fn create(&self, spec: &PoolSpec, ctx: &OpCtx) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let eks = spec.eks.as_ref().ok_or_else(|| CloudError::Api {
            status: 0,
            code: "InvalidSpec".into(),
            message: "an EKS node group needs node_role_arn, subnet_ids and ami_type".into(),
        })?;
        let client = self.client(region)?;
        tracing::debug!(cluster, nodegroup = %spec.name, "eks: creating node group");
        // A create can meet a group of that name: ours from an earlier attempt (adopted), one that
        // is still being deleted (waited for), or someone else's (an error). Bounded: a group that
        // keeps appearing and vanishing is not worth chasing.
        let mut token = request_token(spec);
        for attempt in 0..3 {
            let err = match self
                .send_create(&client, cluster, spec, eks, &token, ctx)
                .await
            {
                Ok(()) => match self
                    .wait_active(&client, region, cluster, &spec.name, ctx)
                    .await
                {
                    // Accepted, yet gone at once: EKS replayed an earlier create with this token
                    // whose group has since been deleted (destroy and re-create of the same spec
                    // inside the idempotency window). A fresh token makes it a new request.
                    Err(e) if attempt == 0 && is_vanished(&e) => {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_secs())
                            .unwrap_or(0);
                        token = format!("{}-{now:x}", request_token(spec));
                        continue;
                    }
                    r => return r,
                },
                Err(e) if has_code(&e, "ResourceInUseException") => e,
                Err(e) => return Err(e),
            };
            let existing = self.describe(&client, cluster, &spec.name, ctx).await?;
            let Some(ng) = existing else { continue };
            if status_of(&ng) == "DELETING" {
                self.wait_gone(&client, cluster, &spec.name, ctx).await?;
                continue;
            }
            if to_spec(region, cluster, &ng) == canonical_spec(spec) {
                tracing::debug!(cluster, nodegroup = %spec.name, "eks: adopting the node group an earlier attempt created");
                return self
                    .wait_active(&client, region, cluster, &spec.name, ctx)
                    .await;
            }
            let CloudError::Api {
                status,
                code,
                message,
            } = err
            else {
                return Err(err);
            };
            return Err(CloudError::Api {
                status,
                code,
                message: format!(
                    "{message}. A node group named {name} already exists in cluster {cluster} with a different configuration: import it with `terraform import <address> {cluster}:{name}` or choose another name.",
                    name = spec.name
                ),
            });
        }
        Err(CloudError::Api {
            status: 409,
            code: "ResourceInUseException".into(),
            message: format!(
                "node group {cluster}:{} kept conflicting with a node group of the same name",
                spec.name
            ),
        })
    }

    async fn update(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let client = self.client(region)?;
        let name = &current.spec.name;
        // The diff is taken against what EKS holds now, not `current`: that also repairs labels or
        // taints changed out of band. Each submission carries its own token, so a retried request
        // is the same update and a second submission is a new one.
        let mut backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let mut last = None;
        for _ in 0..3 {
            let ng = self
                .wait_settled(&client, cluster, name, ctx)
                .await?
                .ok_or_else(|| gone(cluster, name))?;
            let status = status_of(&ng);
            if matches!(status.as_str(), "CREATE_FAILED" | "DELETE_FAILED") {
                // EKS refuses config updates in these states; only a replacement helps.
                return Err(operation_failed(&ng, &status));
            }
            let Some(change) = ConfigChange::between(&ng, spec) else {
                return Ok(to_pool(region, cluster, &ng));
            };
            tracing::debug!(cluster, nodegroup = %name, "eks: updating node group config");
            let mut req = client
                .update_nodegroup_config()
                .cluster_name(cluster)
                .nodegroup_name(name)
                .client_request_token(format!("fracgpu-{:016x}", fastrand::u64(..)));
            if let Some(l) = change.labels {
                req = req.labels(l);
            }
            if let Some(t) = change.taints {
                req = req.taints(t);
            }
            if let Some(s) = change.scaling {
                req = req.scaling_config(s);
            }
            match self
                .call(
                    ctx,
                    &format!("UpdateNodegroupConfig of {cluster}:{name}"),
                    || req.clone().send(),
                )
                .await
            {
                Ok(out) => {
                    let update = out.update.ok_or_else(|| {
                        CloudError::BadResponse(
                            "UpdateNodegroupConfig answered without an update".into(),
                        )
                    })?;
                    self.wait_update(&client, cluster, name, update, ctx)
                        .await?;
                }
                // Busy with another change (or our own earlier attempt): wait and diff again.
                Err(e) if has_code(&e, "ResourceInUseException") => {
                    last = Some(e);
                    ctx.sleep(
                        backoff.next_delay(None),
                        "UpdateNodegroupConfig to be accepted",
                    )
                    .await?;
                }
                Err(e) if has_code(&e, "ResourceNotFoundException") => {
                    return Err(gone(cluster, name));
                }
                Err(e) => return Err(e),
            }
        }
        let ng = self
            .wait_settled(&client, cluster, name, ctx)
            .await?
            .ok_or_else(|| gone(cluster, name))?;
        if ConfigChange::between(&ng, spec).is_none() {
            return Ok(to_pool(region, cluster, &ng));
        }
        if let Some(e) = last {
            return Err(e);
        }
        Err(CloudError::OperationFailed {
            code: "UpdateDidNotConverge".into(),
            message: format!(
                "node group {cluster}:{name} still differs from the configuration after three updates"
            ),
        })
    }

    async fn delete(&self, location: &Location, name: &str, ctx: &OpCtx) -> Result<(), CloudError> {
        let (region, cluster) = eks_location(location)?;
        let client = self.client(region)?;
        let req = client
            .delete_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(name);
        tracing::debug!(cluster, nodegroup = name, "eks: deleting node group");
        let mut backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let mut last = None;
        for _ in 0..3 {
            match self
                .call(ctx, &format!("DeleteNodegroup of {cluster}:{name}"), || {
                    req.clone().send()
                })
                .await
            {
                Ok(_) => return self.wait_gone(&client, cluster, name, ctx).await,
                Err(e) if has_code(&e, "ResourceNotFoundException") => return Ok(()),
                // Already DELETING (a retried request), or CREATING/UPDATING: wait, then decide.
                Err(e) if has_code(&e, "ResourceInUseException") => {
                    if self
                        .wait_settled(&client, cluster, name, ctx)
                        .await?
                        .is_none()
                    {
                        return Ok(());
                    }
                    last = Some(e);
                    ctx.sleep(backoff.next_delay(None), "DeleteNodegroup to be accepted")
                        .await?;
                }
                Err(e) => return Err(e),
            }
        }
        // A settled group that keeps refusing deletion: say why rather than wait for nothing.
        Err(last.unwrap_or_else(|| gone(cluster, name)))
    }
}

// ---------------------------------------------------------------- mapping

/// The import ID of a node group.
pub fn pool_id(cluster: &str, nodegroup: &str) -> String {
    format!("{cluster}:{nodegroup}")
}

/// Splits an import ID `cluster:nodegroup`.
pub fn parse_pool_id(id: &str) -> Option<(&str, &str)> {
    let (c, n) = id.split_once(':')?;
    (!c.is_empty() && !n.is_empty() && !n.contains(':')).then_some((c, n))
}

/// The spec as EKS can hold it, i.e. what [`EksClient::get`] returns for a node group created
/// from `spec`: taints sorted with Kubernetes effects, subnets sorted, diskSize 20 (EKS's default)
/// as None, `Auto {n, n}` as `Fixed {n}` (EKS cannot tell them apart), no `eks.amazonaws.com/*`
/// labels, and no GPU or AKS fields (EKS has none: MIG and time-slicing are node labels).
pub fn canonical_spec(spec: &PoolSpec) -> PoolSpec {
    let mut s = spec.clone();
    if let Scaling::Auto { min, max } = s.scaling
        && min == max
    {
        s.scaling = Scaling::Fixed { nodes: max };
    }
    if s.disk_size_gb == Some(DEFAULT_DISK_SIZE_GB) {
        s.disk_size_gb = None;
    }
    s.labels
        .retain(|k, _| !k.starts_with(RESERVED_LABEL_PREFIX));
    for t in &mut s.taints {
        t.effect = k8s_effect(&aws_effect(&t.effect)).to_string();
    }
    s.taints.sort();
    s.gpu = PoolGpu::default();
    s.os_sku = None;
    if let Some(e) = &mut s.eks {
        e.subnet_ids.sort();
    }
    s
}

/// The clientRequestToken of a create: a hash of everything the request says, so that a retried
/// create (same spec) is the same request and EKS answers it with the group it already made.
pub fn request_token(spec: &PoolSpec) -> String {
    let s = canonical_spec(spec);
    let mut text = format!(
        "{:?}|{}|{}|{:?}|{}|{:?}|{:?}",
        s.location, s.name, s.machine_type, s.scaling, s.spot, s.disk_size_gb, s.eks
    );
    for (k, v) in &s.labels {
        text.push_str(&format!("|l:{k}={v}"));
    }
    for t in &s.taints {
        text.push_str(&format!("|t:{}={}:{}", t.key, t.value, t.effect));
    }
    // Two FNV-1a passes with different offsets: 128 bits, stable across builds and platforms.
    let fnv = |seed: u64| {
        text.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "fracgpu-{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

fn to_pool(region: &str, cluster: &str, ng: &Nodegroup) -> Pool {
    let spec = to_spec(region, cluster, ng);
    Pool {
        id: pool_id(cluster, &spec.name),
        spec,
        status: status_of(ng),
    }
}

fn to_spec(region: &str, cluster: &str, ng: &Nodegroup) -> PoolSpec {
    let sc = ng.scaling_config();
    let min = sc.and_then(|s| s.min_size()).unwrap_or(0).max(0) as u32;
    let max = sc.and_then(|s| s.max_size()).unwrap_or(0).max(0) as u32;
    let scaling = if min == max {
        Scaling::Fixed { nodes: max }
    } else {
        // desiredSize is the autoscaler's business, not the user's: not part of the spec.
        Scaling::Auto { min, max }
    };
    let mut labels: BTreeMap<String, String> = ng
        .labels()
        .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    labels.retain(|k, _| !k.starts_with(RESERVED_LABEL_PREFIX));
    let mut taints: Vec<PoolTaint> = ng
        .taints()
        .iter()
        .map(|t| PoolTaint {
            key: t.key().unwrap_or("").to_string(),
            value: t.value().unwrap_or("").to_string(),
            effect: k8s_effect(t.effect().map(|e| e.as_str()).unwrap_or("")).to_string(),
        })
        .collect();
    taints.sort();
    let mut subnet_ids = ng.subnets().to_vec();
    subnet_ids.sort();
    let disk = ng
        .disk_size()
        .map(|d| d.max(0) as u32)
        .filter(|d| *d != DEFAULT_DISK_SIZE_GB);
    PoolSpec {
        location: Location::Eks {
            region: region.to_string(),
            cluster: cluster.to_string(),
        },
        name: ng.nodegroup_name().unwrap_or("").to_string(),
        machine_type: ng.instance_types().first().cloned().unwrap_or_default(),
        scaling,
        spot: ng.capacity_type().map(|c| c.as_str()) == Some("SPOT"),
        disk_size_gb: disk,
        labels,
        taints,
        gpu: PoolGpu::default(),
        os_sku: None,
        eks: Some(EksPoolFields {
            node_role_arn: ng.node_role().unwrap_or("").to_string(),
            subnet_ids,
            ami_type: ng
                .ami_type()
                .map(|a| a.as_str().to_string())
                .unwrap_or_default(),
        }),
    }
}

/// Kubernetes taint effect -> EKS's enum; anything else is passed through for the API to judge.
fn aws_effect(effect: &str) -> String {
    match effect {
        "NoSchedule" => "NO_SCHEDULE",
        "PreferNoSchedule" => "PREFER_NO_SCHEDULE",
        "NoExecute" => "NO_EXECUTE",
        other => other,
    }
    .to_string()
}

fn k8s_effect(effect: &str) -> &str {
    match effect {
        "NO_SCHEDULE" => "NoSchedule",
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        "NO_EXECUTE" => "NoExecute",
        other => other,
    }
}

fn to_sdk_taint(t: &PoolTaint) -> Taint {
    Taint::builder()
        .key(&t.key)
        .set_value((!t.value.is_empty()).then(|| t.value.clone()))
        .effect(TaintEffect::from(aws_effect(&t.effect).as_str()))
        .build()
}

fn to_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What one UpdateNodegroupConfig must carry to bring a node group to a spec.
struct ConfigChange {
    labels: Option<UpdateLabelsPayload>,
    taints: Option<UpdateTaintsPayload>,
    scaling: Option<NodegroupScalingConfig>,
}

impl ConfigChange {
    fn between(ng: &Nodegroup, spec: &PoolSpec) -> Option<ConfigChange> {
        let empty = HashMap::new();
        let have = ng.labels().unwrap_or(&empty);
        let want = &spec.labels;
        let add: HashMap<String, String> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut remove: Vec<String> = have
            .keys()
            .filter(|k| !want.contains_key(*k) && !k.starts_with(RESERVED_LABEL_PREFIX))
            .cloned()
            .collect();
        remove.sort();
        let labels = (!add.is_empty() || !remove.is_empty()).then(|| {
            UpdateLabelsPayload::builder()
                .set_add_or_update_labels((!add.is_empty()).then_some(add))
                .set_remove_labels((!remove.is_empty()).then_some(remove))
                .build()
        });

        // Kubernetes (and EKS) identify a taint by key and effect; a new value is an addOrUpdate.
        let have_t: Vec<(String, String, String)> = ng
            .taints()
            .iter()
            .map(|t| {
                (
                    t.key().unwrap_or("").to_string(),
                    t.value().unwrap_or("").to_string(),
                    t.effect().map(|e| e.as_str()).unwrap_or("").to_string(),
                )
            })
            .collect();
        let want_t: Vec<(String, String, String)> = spec
            .taints
            .iter()
            .map(|t| (t.key.clone(), t.value.clone(), aws_effect(&t.effect)))
            .collect();
        let to_taint = |(k, v, e): &(String, String, String)| {
            Taint::builder()
                .key(k)
                .set_value((!v.is_empty()).then(|| v.clone()))
                .effect(TaintEffect::from(e.as_str()))
                .build()
        };
        let add_t: Vec<Taint> = want_t
            .iter()
            .filter(|t| !have_t.contains(t))
            .map(to_taint)
            .collect();
        let remove_t: Vec<Taint> = have_t
            .iter()
            .filter(|(k, _, e)| !want_t.iter().any(|(wk, _, we)| wk == k && we == e))
            .map(to_taint)
            .collect();
        let taints = (!add_t.is_empty() || !remove_t.is_empty()).then(|| {
            UpdateTaintsPayload::builder()
                .set_add_or_update_taints((!add_t.is_empty()).then_some(add_t))
                .set_remove_taints((!remove_t.is_empty()).then_some(remove_t))
                .build()
        });

        let sc = ng.scaling_config();
        let cur = (
            sc.and_then(|s| s.min_size()).unwrap_or(0),
            sc.and_then(|s| s.max_size()).unwrap_or(0),
            sc.and_then(|s| s.desired_size()).unwrap_or(0),
        );
        let target = match spec.scaling {
            Scaling::Fixed { nodes } => {
                let n = to_i32(nodes);
                (n, n, n)
            }
            // Keep the autoscaler's desired size unless it falls outside the new bounds.
            Scaling::Auto { min, max } => {
                let (min, max) = (to_i32(min), to_i32(max));
                (min, max, cur.2.clamp(min, max.max(min)))
            }
        };
        let scaling = (cur != target).then(|| {
            NodegroupScalingConfig::builder()
                .min_size(target.0)
                .max_size(target.1)
                .desired_size(target.2)
                .build()
        });

        (labels.is_some() || taints.is_some() || scaling.is_some()).then_some(ConfigChange {
            labels,
            taints,
            scaling,
        })
    }
}

fn eks_location(location: &Location) -> Result<(&str, &str), CloudError> {
    match location {
        Location::Eks { region, cluster } => Ok((region, cluster)),
        other => Err(CloudError::Api {
            status: 0,
            code: "InvalidSpec".into(),
            message: format!("the EKS client was handed a {} location", other.cloud()),
        }),
    }
}

fn status_of(ng: &Nodegroup) -> String {
    ng.status()
        .map(|s| s.as_str().to_string())
        .unwrap_or_default()
}

fn issues_suffix(ng: &Nodegroup) -> String {
    let issues = health_issues(ng);
    if issues.is_empty() {
        String::new()
    } else {
        format!(": {issues}")
    }
}

fn health_issues(ng: &Nodegroup) -> String {
    ng.health()
        .map(|h| {
            h.issues()
                .iter()
                .map(|i| {
                    format!(
                        "{}: {}",
                        i.code().map(|c| c.as_str()).unwrap_or("Unknown"),
                        i.message().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

fn operation_failed(ng: &Nodegroup, status: &str) -> CloudError {
    let code = ng
        .health()
        .and_then(|h| h.issues().first())
        .and_then(|i| i.code())
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| status.to_string());
    let issues = health_issues(ng);
    CloudError::OperationFailed {
        code,
        message: format!(
            "node group {} is {status}{}",
            ng.nodegroup_name().unwrap_or(""),
            if issues.is_empty() {
                String::new()
            } else {
                format!(": {issues}")
            }
        ),
    }
}

/// Where an update (`what`) stands: Successful, ended in failure (OperationFailed with EKS's own
/// error), or still running.
fn update_state(update: &Update, what: &str) -> Result<Check<()>, CloudError> {
    let status = update.status().map(|s| s.as_str()).unwrap_or("");
    match status {
        "Successful" => Ok(Check::Done(())),
        "Failed" | "Cancelled" => {
            let errors = update.errors();
            let code = errors
                .first()
                .and_then(|e| e.error_code())
                .map(|c| c.as_str().to_string())
                .unwrap_or_else(|| format!("Update{status}"));
            let mut message = errors
                .iter()
                .map(|e| e.error_message().unwrap_or("").to_string())
                .collect::<Vec<_>>()
                .join("; ");
            if message.is_empty() {
                message = format!("{what} ended {status}");
            }
            Err(CloudError::OperationFailed { code, message })
        }
        _ => Ok(still(format!("{what} (status {status})"))),
    }
}

/// Not there yet: look again, and name the wait `waiting_for` from now on.
fn still<T>(waiting_for: String) -> Check<T> {
    Check::Pending {
        retry_after: None,
        waiting_for: Some(waiting_for),
    }
}

/// A timeout inside a poll names what the poll waits for, not the call that was in flight.
fn retag(e: CloudError, waiting_for: &str) -> CloudError {
    match e {
        CloudError::Timeout { waited, .. } => CloudError::Timeout {
            waited,
            waiting_for: waiting_for.to_string(),
        },
        e => e,
    }
}

fn gone(cluster: &str, name: &str) -> CloudError {
    CloudError::Api {
        status: 404,
        code: "ResourceNotFoundException".into(),
        message: format!("node group {cluster}:{name} no longer exists"),
    }
}

fn is_vanished(e: &CloudError) -> bool {
    matches!(e, CloudError::OperationFailed { code, .. } if code == "ResourceNotFoundException")
}

fn has_code(e: &CloudError, want: &str) -> bool {
    matches!(e, CloudError::Api { code, .. } if code == want)
}

/// A failed call as the retry loop sees it.
struct Classified {
    error: CloudError,
    retryable: bool,
    retry_after: Option<Duration>,
}

fn classify<E>(e: SdkError<E, HttpResponse>) -> Classified
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let text = format!("{}", DisplayErrorContext(&e));
    let about_credentials = text.to_ascii_lowercase().contains("credential");
    // Decided while `e` is borrowed; `e` then becomes the error's source.
    let (kind, message, retryable, retry_after): (fn(Detail) -> CloudError, _, _, _) = match &e {
        SdkError::ServiceError(se) => {
            let raw = se.raw();
            let status = raw.status().as_u16();
            if (200..300).contains(&status) && se.err().code().is_none() {
                // A success status whose body the SDK could not read.
                (CloudError::BadResponse, text, false, None)
            } else {
                let code = se
                    .err()
                    .code()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("HTTP{status}"));
                let message =
                    se.err().message().map(str::to_string).unwrap_or_else(|| {
                        format!("HTTP status {status} without an error message")
                    });
                let retry_after = retry_after_seconds(raw.headers().get("retry-after"));
                let retryable =
                    retryable_status(status) || THROTTLING_CODES.contains(&code.as_str());
                if !AUTH_CODES.contains(&code.as_str()) {
                    return Classified {
                        error: CloudError::Api {
                            status,
                            code,
                            message,
                        },
                        retryable,
                        retry_after,
                    };
                }
                (
                    CloudError::Auth,
                    format!("{code}: {message}"),
                    retryable,
                    retry_after,
                )
            }
        }
        SdkError::TimeoutError(_) => (CloudError::Transport, text, true, None),
        SdkError::DispatchFailure(d) => {
            // hyper's "connection closed before message completed" arrives as Other(TransientError).
            // ErrorKind is not re-exported by the SDK, hence its name rather than its variant.
            let transient = d
                .as_connector_error()
                .and_then(|c| c.as_other())
                .is_some_and(|k| format!("{k:?}") != "ClientError");
            if d.is_io() || d.is_timeout() || transient {
                (CloudError::Transport, text, true, None)
            } else if about_credentials {
                (CloudError::Auth, text, false, None)
            } else {
                (CloudError::Transport, text, false, None)
            }
        }
        // A response that broke off or does not parse; the former is worth another try.
        SdkError::ResponseError(_) => (CloudError::BadResponse, text, true, None),
        _ if about_credentials => (CloudError::Auth, text, false, None),
        _ => (CloudError::Transport, text, false, None),
    };
    Classified {
        error: kind(Detail::caused_by(message, e)),
        retryable,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PoolSpec {
        PoolSpec {
            location: Location::Eks {
                region: "us-east-1".into(),
                cluster: "c".into(),
            },
            name: "ng".into(),
            machine_type: "g4dn.xlarge".into(),
            scaling: Scaling::Auto { min: 2, max: 2 },
            spot: false,
            disk_size_gb: Some(20),
            labels: BTreeMap::from([
                ("eks.amazonaws.com/x".into(), "y".into()),
                ("team".into(), "ml".into()),
            ]),
            taints: vec![
                PoolTaint {
                    key: "z".into(),
                    value: String::new(),
                    effect: "NO_EXECUTE".into(),
                },
                PoolTaint {
                    key: "a".into(),
                    value: "v".into(),
                    effect: "NoSchedule".into(),
                },
            ],
            gpu: PoolGpu {
                count: 1,
                ..PoolGpu::default()
            },
            os_sku: Some("Ubuntu".into()),
            eks: Some(EksPoolFields {
                node_role_arn: "arn:aws:iam::1:role/r".into(),
                subnet_ids: vec!["subnet-b".into(), "subnet-a".into()],
                ami_type: "AL2023_x86_64_NVIDIA".into(),
            }),
        }
    }

    #[test]
    fn canonical_folds_what_eks_cannot_hold() {
        let c = canonical_spec(&spec());
        assert_eq!(c.scaling, Scaling::Fixed { nodes: 2 });
        assert_eq!(c.disk_size_gb, None);
        assert_eq!(c.labels.keys().collect::<Vec<_>>(), vec!["team"]);
        assert_eq!(c.taints[0].key, "a");
        assert_eq!(c.taints[1].effect, "NoExecute");
        assert_eq!(c.gpu, PoolGpu::default());
        assert_eq!(c.os_sku, None);
        assert_eq!(c.eks.as_ref().unwrap().subnet_ids, ["subnet-a", "subnet-b"]);
        assert_eq!(canonical_spec(&c), c);
    }

    #[test]
    fn request_token_is_stable_and_follows_the_spec() {
        let s = spec();
        assert_eq!(request_token(&s), request_token(&s.clone()));
        assert_eq!(request_token(&s), request_token(&canonical_spec(&s)));
        assert_eq!(request_token(&s).len(), "fracgpu-".len() + 32);
        let mut other = s.clone();
        other.labels.insert("team".into(), "infra".into());
        assert_ne!(request_token(&s), request_token(&other));
    }

    #[test]
    fn pool_ids_round_trip() {
        assert_eq!(pool_id("c", "ng"), "c:ng");
        assert_eq!(parse_pool_id("c:ng"), Some(("c", "ng")));
        assert_eq!(parse_pool_id("c"), None);
        assert_eq!(parse_pool_id(":ng"), None);
        assert_eq!(parse_pool_id("a:b:c"), None);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let cfg = EksConfig {
            access_key: Some("AKIAEXAMPLE".into()),
            secret_key: Some("s3cr3t".into()),
            session_token: Some("tok".into()),
            ..EksConfig::default()
        };
        let d = format!("{cfg:?}");
        assert!(!d.contains("s3cr3t") && !d.contains("AKIAEXAMPLE") && !d.contains("tok\""));
    }
}

/// EKS answers are a few KiB; anything near this is not EKS.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// From an answer's headers to its last byte.
pub const BODY_DEADLINE: Duration = Duration::from_secs(60);

/// Puts every answer's body under [`crate::bounded`]'s size and time bound before the SDK reads
/// it whole (it has no limit of its own).
#[derive(Debug)]
struct BoundAnswers;

impl aws_sdk_eks::config::Intercept for BoundAnswers {
    fn name(&self) -> &'static str {
        "BoundAnswers"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_sdk_eks::config::interceptors::BeforeDeserializationInterceptorContextMut<
            '_,
        >,
        _components: &aws_sdk_eks::config::RuntimeComponents,
        _cfg: &mut aws_sdk_eks::config::ConfigBag,
    ) -> Result<(), aws_sdk_eks::error::BoxError> {
        use aws_smithy_types::body::SdkBody;
        let body = context.response_mut().body_mut();
        let inner = std::mem::replace(body, SdkBody::taken());
        *body = SdkBody::from_body_1_x(crate::bounded::BoundedBody::new(
            inner,
            MAX_BODY,
            BODY_DEADLINE,
        ));
        Ok(())
    }
}
