//! Node groups described and waited for: until ACTIVE, gone, or settled enough to change, and an
//! update followed to its end; plus the CreateNodegroup request itself.

use aws_sdk_eks::Client;
use aws_sdk_eks::types::{AmiTypes, CapacityTypes, Nodegroup, NodegroupScalingConfig, Update};

use super::client::{EksClient, has_code};
use super::mapping::{
    issues_suffix, operation_failed, scaling_config, status_of, to_i32, to_pool, to_sdk_taint,
};
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Pool, PoolSpec};
use crate::operation::OpCtx;
use crate::operation::{Backoff, Check, Start, poll_until};

/// The node group a wait watches: which cluster's, by which name, through the client of its
/// region.
#[derive(Clone, Copy)]
struct Group<'a> {
    client: &'a Client,
    cluster: &'a str,
    name: &'a str,
}

impl<'a> Group<'a> {
    fn new(client: &'a Client, cluster: &'a str, name: &'a str) -> Group<'a> {
        Group {
            client,
            cluster,
            name,
        }
    }
}

/// Pages of one ListNodegroups at most: 100 groups a page is far beyond EKS's node group quota.
const MAX_LIST_PAGES: usize = 100;

impl EksClient {
    /// One page of the cluster's node group names (ListNodegroups returns at most 100 a page),
    /// and the `nextToken` of the next page if there is one. A cluster that does not exist is an
    /// error. `page` counts the pages so far: a list that keeps naming a next page is broken, not
    /// a reason to go on forever.
    pub(super) async fn list_page(
        &self,
        client: &Client,
        cluster: &str,
        token: Option<String>,
        page: usize,
        ctx: &OpCtx,
    ) -> Result<(Vec<String>, Option<String>), CloudError> {
        if page >= MAX_LIST_PAGES {
            return Err(CloudError::BadResponse(
                format!("ListNodegroups of {cluster} did not end after {MAX_LIST_PAGES} pages")
                    .into(),
            ));
        }
        let req = client
            .list_nodegroups()
            .cluster_name(cluster)
            .max_results(100)
            .set_next_token(token);
        let out = self
            .call(ctx, &format!("ListNodegroups of {cluster}"), || {
                req.clone().send()
            })
            .await?;
        let next = out.next_token.filter(|t| !t.is_empty());
        Ok((out.nodegroups.unwrap_or_default(), next))
    }

    pub(super) async fn describe(
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
    ///
    /// `paced` names the request whose effect is awaited (CreateNodegroup, DeleteNodegroup) when
    /// the wait starts right after it, and how to start until one has been seen: the first look
    /// then comes shortly before the quickest one seen (see [`Pace`](crate::operation::Pace)).
    /// Otherwise the first look is at once.
    async fn watch<T>(
        &self,
        group: Group<'_>,
        ctx: &OpCtx,
        waiting_for: String,
        paced: Option<(&str, Start)>,
        decide: impl Fn(Option<Nodegroup>) -> Result<Check<T>, CloudError> + Sync,
    ) -> Result<T, CloudError> {
        let Group {
            client,
            cluster,
            name,
        } = group;
        let decide = &decide;
        // The waits between looks end early when another node group of this kind is seen
        // done; a describe's own retries (throttling, server errors) keep their backoff.
        let paced_ctx;
        let between_looks = match paced {
            Some((kind, _)) => {
                paced_ctx = self.pace.watching(kind, ctx);
                &paced_ctx
            }
            None => ctx,
        };
        let backoff = Backoff::polling(self.poll_first, self.poll_cap);
        let wait = |start, backoff| {
            poll_until(between_looks, backoff, waiting_for, start, move |waiting| {
                let waiting = waiting.to_string();
                async move {
                    let found = self.describe(client, cluster, name, ctx).await;
                    decide(found.map_err(|e| retag(e, &waiting))?)
                }
            })
        };
        match paced {
            Some((kind, otherwise)) => self.pace.time(kind, otherwise, backoff, wait).await,
            None => wait(Start::Now, backoff).await,
        }
    }

    /// Polls until the node group is ACTIVE (DEGRADED and UPDATING keep waiting: they can recover;
    /// the deadline bounds that), failing on CREATE_FAILED.
    pub(super) async fn wait_active(
        &self,
        client: &Client,
        region: &str,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
        paced: Option<(&str, Start)>,
    ) -> Result<Pool, CloudError> {
        let waiting = format!("node group {cluster}:{name} to become ACTIVE");
        self.watch(
            Group::new(client, cluster, name),
            ctx,
            waiting,
            paced,
            |found| {
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
            },
        )
        .await
    }

    /// Polls until DescribeNodegroup answers ResourceNotFoundException.
    pub(super) async fn wait_gone(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
        paced: Option<(&str, Start)>,
    ) -> Result<(), CloudError> {
        let waiting = format!("node group {cluster}:{name} to be deleted");
        self.watch(
            Group::new(client, cluster, name),
            ctx,
            waiting,
            paced,
            |found| {
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
            },
        )
        .await
    }

    /// Polls until the node group leaves CREATING/UPDATING/DELETING; None if it went away.
    pub(super) async fn wait_settled(
        &self,
        client: &Client,
        cluster: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let waiting = format!("node group {cluster}:{name} to be ready for changes");
        self.watch(
            Group::new(client, cluster, name),
            ctx,
            waiting,
            None,
            |found| {
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
            },
        )
        .await
    }

    /// Follows an update from UpdateNodegroupConfig's answer (which may already be final, as on
    /// moto, where DescribeUpdate does not exist) through DescribeUpdate to Successful.
    pub(super) async fn wait_update(
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

    /// Sends CreateNodegroup; the group as EKS answered it (CREATING; ACTIVE on moto).
    pub(super) async fn send_create(
        &self,
        client: &Client,
        cluster: &str,
        spec: &PoolSpec,
        template: Option<&super::ec2::TemplateRef>,
        token: &str,
        ctx: &OpCtx,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let eks = spec.eks();
        let (min, max, desired) = scaling_config(spec.scaling);
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
        // With a launch template the data volume is the template's (EKS refuses diskSize then).
        match template {
            Some(t) => req = req.launch_template(super::launch::specification(t)),
            None => {
                if let Some(d) = spec.disk_size_gb {
                    req = req.disk_size(to_i32(d));
                }
            }
        }
        self.call(
            ctx,
            &format!("CreateNodegroup of {cluster}:{}", spec.name),
            || req.clone().send(),
        )
        .await
        .map(|out| out.nodegroup)
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
