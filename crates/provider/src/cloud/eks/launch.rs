//! A Bottlerocket node group's launch template as the node group's create, read, update and
//! delete see it: made before the group (which names it), read back with the group, versioned and
//! rolled out by UpdateNodegroupVersion when the settings change, deleted after the group.

use aws_sdk_eks::types::{LaunchTemplateSpecification, Nodegroup};

use super::client::{EksClient, has_code};
use super::ec2::{TemplateData, TemplateRef, made_here, template_name};
use super::mapping::DEFAULT_DISK_SIZE_GB;
use super::target::is_bottlerocket;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Pool, PoolSpec};
use crate::operation::OpCtx;

/// What the pool's launch template must hold; None for a pool without one. The node group's
/// `diskSize` cannot stand beside a launch template, so the template sizes the data volume.
pub(super) fn wanted(spec: &PoolSpec) -> Option<TemplateData> {
    let settings = spec.eks().bottlerocket_settings.clone()?;
    Some(TemplateData {
        user_data: Some(settings),
        data_volume_gb: spec.disk_size_gb,
    })
}

/// The template a node group uses, as EKS reports it.
pub(super) fn used_by(ng: &Nodegroup) -> Option<TemplateRef> {
    let t = ng.launch_template()?;
    Some(TemplateRef {
        id: t.id().unwrap_or_default().to_string(),
        name: t.name().unwrap_or_default().to_string(),
        version: t.version().unwrap_or("$Default").to_string(),
    })
}

/// How the create names a template in CreateNodegroup.
pub(super) fn specification(t: &TemplateRef) -> LaunchTemplateSpecification {
    LaunchTemplateSpecification::builder()
        .id(&t.id)
        .version(&t.version)
        .build()
}

impl EksClient {
    /// The template a create names: made (or, after a create cut short, found and brought up
    /// to date) under the provider's name for the group.
    pub(super) async fn template_for_create(
        &self,
        region: &str,
        cluster: &str,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Option<TemplateRef>, CloudError> {
        let Some(data) = wanted(spec) else {
            return Ok(None);
        };
        let name = template_name(cluster, &spec.name);
        tracing::debug!(cluster, nodegroup = %spec.name, template = %name, "eks: writing the node group's launch template");
        match self.create_template(region, &name, &data, ctx).await {
            Ok(made) => Ok(Some(made)),
            // An earlier create's, cut short: its newest version, brought up to date.
            Err(e) if has_code(&e, "InvalidLaunchTemplateName.AlreadyExistsException") => {
                let latest = TemplateRef {
                    id: String::new(),
                    name,
                    version: "$Latest".into(),
                };
                let (found, held) = self.template_version(region, &latest, ctx).await?;
                let next = self.bring_to(region, &found, held, &data, ctx).await?;
                Ok(Some(next.unwrap_or(found)))
            }
            Err(e) => Err(e),
        }
    }

    /// A pool read from `ng`, with what the group's launch template holds where it is the
    /// Bottlerocket settings' (a Bottlerocket group with a template): the settings, and the data
    /// volume's size as the group's disk size.
    pub(super) async fn read_template(
        &self,
        region: &str,
        ng: &Nodegroup,
        pool: &mut Pool,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let Some(template) = used_by(ng) else {
            return Ok(());
        };
        if !is_bottlerocket(&pool.spec.eks().ami_type) {
            return Ok(());
        }
        let (_, data) = self.template_version(region, &template, ctx).await?;
        pool.spec.eks_mut().bottlerocket_settings = Some(data.user_data.unwrap_or_default());
        pool.spec.disk_size_gb = data.data_volume_gb.filter(|gb| *gb != DEFAULT_DISK_SIZE_GB);
        Ok(())
    }

    /// Brings the group's template to what `spec` asks: a new version, to which
    /// UpdateNodegroupVersion rolls the nodes. The group as it is afterwards, when it changed.
    pub(super) async fn roll_template(
        &self,
        region: &str,
        cluster: &str,
        ng: &Nodegroup,
        spec: &PoolSpec,
        ctx: &OpCtx,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let Some(data) = wanted(spec) else {
            return Ok(None);
        };
        let name = &spec.name;
        let Some(used) = used_by(ng) else {
            return Err(CloudError::Api {
                status: 400,
                code: "InvalidParameterException".into(),
                message: format!(
                    "node group {cluster}:{name} was made without a launch template, and EKS \
                    cannot give it one: its Bottlerocket settings cannot change in place. \
                    Replace it (`terraform apply -replace=<address>`)."
                ),
            });
        };
        let (current, held) = self.template_version(region, &used, ctx).await?;
        // The settings only: the data volume is the group's disk size, whose change replaces.
        let held = TemplateData {
            data_volume_gb: data.data_volume_gb,
            ..held
        };
        let Some(next) = self.bring_to(region, &current, held, &data, ctx).await? else {
            return Ok(None);
        };
        tracing::debug!(cluster, nodegroup = %name, version = %next.version, "eks: rolling the node group to a new launch template version");
        let client = self.client(region)?;
        let req = client
            .update_nodegroup_version()
            .cluster_name(cluster)
            .nodegroup_name(name)
            .launch_template(specification(&next))
            .client_request_token(format!("fracgpu-{:016x}", fastrand::u64(..)));
        let out = self
            .call(
                ctx,
                &format!("UpdateNodegroupVersion of {cluster}:{name}"),
                || req.clone().send(),
            )
            .await?;
        let update = out.update.ok_or_else(|| {
            CloudError::BadResponse("UpdateNodegroupVersion answered without an update".into())
        })?;
        self.wait_update(&client, cluster, name, update, ctx)
            .await?;
        self.describe(&client, cluster, name, ctx).await
    }

    /// A new version of the template when `held` (what version `current` holds) does not say
    /// to the device plugin what `want` says, or sizes another data volume: `current` with the
    /// device plugin's settings replaced, the template's other settings kept (the group may be
    /// an imported one, whose template carries settings of its maker's).
    async fn bring_to(
        &self,
        region: &str,
        current: &TemplateRef,
        held: TemplateData,
        want: &TemplateData,
        ctx: &OpCtx,
    ) -> Result<Option<TemplateRef>, CloudError> {
        let ours = want.user_data.as_deref().unwrap_or_default();
        let theirs = held.user_data.as_deref();
        let same = gpu::bottlerocket::same_device_plugin_settings(theirs.unwrap_or_default(), ours);
        if same && held.data_volume_gb == want.data_volume_gb {
            return Ok(None);
        }
        let next = TemplateData {
            user_data: Some(gpu::bottlerocket::with_device_plugin_settings(theirs, ours)),
            data_volume_gb: want.data_volume_gb,
        };
        self.new_template_version(region, current, &next, ctx)
            .await
            .map(Some)
    }

    /// Deletes the template the provider made for a deleted node group; a template of another
    /// maker (a group imported with its own) is left alone.
    pub(super) async fn delete_made_template(
        &self,
        region: &str,
        template: Option<TemplateRef>,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        match template {
            Some(t) if made_here(&t.name) => self.delete_template(region, &t.name, ctx).await,
            _ => Ok(()),
        }
    }
}
