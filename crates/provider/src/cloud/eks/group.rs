//! The node group's own create and update, its Auto Scaling group's template aside: a create
//! that meets a group of its name (adopted, waited for, or refused), an update that EKS refuses
//! while the group is busy (tried again), and the launch template a failed create leaves to no
//! one.

use std::sync::{Mutex, PoisonError};

use aws_sdk_eks::types::{Nodegroup, Update};

use super::client::{EksClient, gone, has_code};
use super::ec2::TemplateRef;
use super::launch;
use super::mapping::{
    ConfigChange, canonical_spec, eks_location, operation_failed, request_token, status_of,
    to_pool, to_spec,
};
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Pool, PoolSpec, TargetFields};
use crate::operation::{Attempt, Backoff, Failure, OpCtx, Start, retry};

/// Submissions of a node group's configuration before an update that does not converge fails.
const MAX_SUBMISSIONS: u32 = 3;

impl EksClient {
    /// Creates the node group and waits until it is ACTIVE (its template aside).
    pub(super) async fn create_group(
        &self,
        spec: &PoolSpec,
        template: Option<&TemplateRef>,
        ctx: &OpCtx,
    ) -> Result<Pool, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let TargetFields::Eks(_) = &spec.target else {
            return Err(CloudError::Api {
                status: 0,
                code: "InvalidSpec".into(),
                message: "an EKS node group needs node_role_arn, subnet_ids and ami_type".into(),
            });
        };
        let client = self.client(region)?;
        tracing::debug!(cluster, nodegroup = %spec.name, "eks: creating node group");
        // A create can meet a group of that name: ours from an earlier attempt (adopted), one that
        // is still being deleted (waited for), or someone else's (an error). Bounded: a group that
        // keeps appearing and vanishing is not worth chasing.
        let mut token = request_token(spec);
        for attempt in 0..3 {
            let err = match self
                .send_create(&client, cluster, spec, template, &token, ctx)
                .await
            {
                // Created at once (moto does so): nothing to wait for.
                Ok(Some(ng)) if status_of(&ng) == "ACTIVE" => {
                    return Ok(to_pool(region, cluster, &ng));
                }
                // A group just created is CREATING: no look before the first delay. Only a wait
                // right after our own CreateNodegroup is timed: a group an earlier attempt made
                // (adopted below) has been creating for an unknown time.
                Ok(_) => match self
                    .wait_active(
                        &client,
                        region,
                        cluster,
                        &spec.name,
                        ctx,
                        Some(("CreateNodegroup", Start::Sleep(None))),
                    )
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
            if let Some(adopted) = self.meet(&client, spec, err, ctx).await? {
                return Ok(adopted);
            }
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

    /// A create refused (`err`) because a group of its name exists: the group an earlier attempt
    /// made is adopted, one being deleted is waited for (None: create again), and anyone else's
    /// is an error that says how to import it.
    async fn meet(
        &self,
        client: &aws_sdk_eks::Client,
        spec: &PoolSpec,
        err: CloudError,
        ctx: &OpCtx,
    ) -> Result<Option<Pool>, CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let Some(ng) = self.describe(client, cluster, &spec.name, ctx).await? else {
            return Ok(None);
        };
        if status_of(&ng) == "DELETING" {
            self.wait_gone(client, cluster, &spec.name, ctx, None)
                .await?;
            return Ok(None);
        }
        // The node template lives on the Auto Scaling group, the Bottlerocket settings and
        // the data volume in the launch template: not in the node group.
        let group_of = |mut s: PoolSpec| {
            s.node_template.clear();
            if s.eks_mut().bottlerocket_settings.take().is_some() {
                s.disk_size_gb = None;
            }
            s
        };
        if to_spec(region, cluster, &ng) == group_of(canonical_spec(spec)) {
            tracing::debug!(cluster, nodegroup = %spec.name, "eks: adopting the node group an earlier attempt created");
            return self
                .wait_active(client, region, cluster, &spec.name, ctx, None)
                .await
                .map(Some);
        }
        let CloudError::Api {
            status,
            code,
            message,
        } = err
        else {
            return Err(err);
        };
        Err(CloudError::Api {
            status,
            code,
            message: format!(
                "{message}. A node group named {name} already exists in cluster {cluster} with a different configuration: import it with `terraform import <address> {cluster}:{name}` or choose another name.",
                name = spec.name
            ),
        })
    }

    /// Brings the node group's configuration to `spec` (its template aside).
    ///
    /// The diff is taken against what EKS holds now, not `current`: that also repairs labels or
    /// taints changed out of band. Each submission carries its own token, so a retried request is
    /// the same update and a second submission is a new one. A submission EKS refuses while the
    /// group is busy with another change (or our own earlier attempt) is tried again after the
    /// backoff's delay; an accepted one is followed to its end, and the group diffed again at
    /// once. After [`MAX_SUBMISSIONS`], the group settled either matches or the update fails.
    pub(super) async fn update_group(
        &self,
        current: &Pool,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<(Pool, Nodegroup), CloudError> {
        let (region, cluster) = eks_location(&spec.location)?;
        let client = self.client(region)?;
        let name = &current.spec.name;
        let settled = || async {
            self.wait_settled(&client, cluster, name, ctx)
                .await?
                .ok_or_else(|| gone(cluster, name))
        };
        let submitted = Mutex::new(0);
        // The last refusal, which a configuration that never converged reports.
        let refused = Mutex::new(None::<CloudError>);
        let submission = || async {
            let ng = settled().await?;
            let n = {
                let mut n = submitted.lock().unwrap_or_else(PoisonError::into_inner);
                *n += 1;
                *n
            };
            if n > MAX_SUBMISSIONS {
                if ConfigChange::between(&ng, spec).is_none() {
                    return Ok(Attempt::Done((to_pool(region, cluster, &ng), ng)));
                }
                let last = refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                return Err(last.unwrap_or_else(|| CloudError::OperationFailed {
                    code: "UpdateDidNotConverge".into(),
                    message: format!(
                        "node group {cluster}:{name} still differs from the configuration after three updates"
                    ),
                }));
            }
            let status = status_of(&ng);
            if matches!(status.as_str(), "CREATE_FAILED" | "DELETE_FAILED") {
                // EKS refuses config updates in these states; only a replacement helps.
                return Err(operation_failed(&ng, &status));
            }
            let Some(change) = ConfigChange::between(&ng, spec) else {
                return Ok(Attempt::Done((to_pool(region, cluster, &ng), ng)));
            };
            let update = match self.submit(&client, cluster, name, change, ctx).await {
                Ok(update) => update,
                // Busy: kept for the end, as the retry keeps its own copy.
                Err(CloudError::Api {
                    status,
                    code,
                    message,
                }) if code == "ResourceInUseException" => {
                    let copy = CloudError::Api {
                        status,
                        code: code.clone(),
                        message: message.clone(),
                    };
                    *refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(copy);
                    return Ok(Attempt::Busy(Failure {
                        last: Err(CloudError::Api {
                            status,
                            code,
                            message,
                        }),
                        retry_after: None,
                        waiting_for: "UpdateNodegroupConfig to be accepted".into(),
                    }));
                }
                Err(e) if has_code(&e, "ResourceNotFoundException") => {
                    return Err(gone(cluster, name));
                }
                Err(e) => return Err(e),
            };
            self.wait_update(&client, cluster, name, update, ctx)
                .await?;
            Ok(Attempt::Again)
        };
        let backoff = Backoff::polling(self.poll_first, self.poll_cap);
        // No attempt counts as failed: a refusal while busy is not counted, and the submissions
        // are bounded above.
        retry(ctx, backoff, 1, submission, |_, _, _| {}).await
    }

    /// Sends UpdateNodegroupConfig with `change`; the update it started.
    async fn submit(
        &self,
        client: &aws_sdk_eks::Client,
        cluster: &str,
        name: &str,
        change: ConfigChange,
        ctx: &OpCtx,
    ) -> Result<Update, CloudError> {
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
        let out = self
            .call(
                ctx,
                &format!("UpdateNodegroupConfig of {cluster}:{name}"),
                || req.clone().send(),
            )
            .await?;
        out.update.ok_or_else(|| {
            CloudError::BadResponse("UpdateNodegroupConfig answered without an update".into())
        })
    }

    /// A create that failed before its node group existed leaves no template behind: the error
    /// is returned as it was, with what the clean-up could not do added to the log.
    pub(super) async fn unmake_template(
        &self,
        spec: &PoolSpec,
        template: Option<TemplateRef>,
        error: CloudError,
        ctx: &OpCtx,
    ) -> CloudError {
        let Some(t) = template else { return error };
        let Ok((region, cluster)) = eks_location(&spec.location) else {
            return error;
        };
        let Ok(client) = self.client(region) else {
            return error;
        };
        // A group that uses the template (still creating past the deadline, say) keeps it: the
        // state keeps the group, and its delete deletes both. No group, or someone else's group
        // of that name, leaves the template to no one: it goes.
        match self.describe(&client, cluster, &spec.name, ctx).await {
            Ok(Some(ng)) if launch::used_by(&ng).is_some_and(|u| u.name == t.name) => {}
            Ok(_) => {
                if let Err(e) = self.delete_made_template(region, Some(t), ctx).await {
                    tracing::warn!(cluster, nodegroup = %spec.name, error = %e,
                        "eks: the launch template of a node group that was not created is left behind");
                }
            }
            Err(e) => tracing::warn!(cluster, nodegroup = %spec.name, error = %e,
                "eks: could not tell whether the node group exists; its launch template is kept"),
        }
        error
    }
}

fn is_vanished(e: &CloudError) -> bool {
    matches!(e, CloudError::OperationFailed { code, .. } if code == "ResourceNotFoundException")
}
