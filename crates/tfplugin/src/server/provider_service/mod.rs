//! The tfplugin6.Provider service. Every handler follows one template: look up the type,
//! decode the values against its schema, call the handler, encode the answer with diagnostics.
//! Handlers run in their own task so that a panic becomes an error diagnostic instead of a dead
//! plugin.
//!
//! The handlers live in one module per family of RPCs; the service below only routes each RPC to
//! its handler, so this file is the one list of what terraform can call and what answers it.

mod action;
mod data_source;
mod function;
mod identity;
mod list;
mod provider;
mod registry;
mod resource;
mod template;
#[cfg(test)]
mod tests;
mod unsupported;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tonic::{Request, Response, Status};

use super::proto::tfplugin6 as pb;
pub(crate) use registry::Registry;

pub(crate) struct ProviderService {
    registry: Arc<Registry>,
    /// When terraform first called StopProvider, so that an apply ending afterwards can say how
    /// long it took to stop (terraform waits for it before it exits).
    stopped_at: Arc<OnceLock<Instant>>,
}

impl ProviderService {
    pub(crate) fn new(registry: Arc<Registry>) -> ProviderService {
        ProviderService {
            registry,
            stopped_at: Arc::default(),
        }
    }
}

#[tonic::async_trait]
impl pb::provider_server::Provider for ProviderService {
    async fn get_metadata(
        &self,
        _: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        Ok(Response::new(provider::metadata(&self.registry)))
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        Ok(Response::new(provider::schema(&self.registry)))
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        let handler = provider::validate(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ValidateProviderConfig", handler).await
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        let handler = resource::validate(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ValidateResourceConfig", handler).await
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        let handler = data_source::validate(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ValidateDataResourceConfig", handler).await
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        let handler = resource::upgrade_state(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "UpgradeResourceState", handler).await
    }

    async fn get_resource_identity_schemas(
        &self,
        _: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Result<Response<pb::get_resource_identity_schemas::Response>, Status> {
        Ok(Response::new(identity::schemas(&self.registry)))
    }

    async fn upgrade_resource_identity(
        &self,
        req: Request<pb::upgrade_resource_identity::Request>,
    ) -> Result<Response<pb::upgrade_resource_identity::Response>, Status> {
        let handler = identity::upgrade(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "UpgradeResourceIdentity", handler).await
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        let handler = provider::configure(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ConfigureProvider", handler).await
    }

    async fn read_resource(
        &self,
        req: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        let handler = resource::read(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ReadResource", handler).await
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        let handler = resource::plan(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "PlanResourceChange", handler).await
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        let type_name = req.get_ref().type_name.clone();
        let handler = resource::apply(self.registry.clone(), req.into_inner());
        let r = template::guarded(&self.registry, "ApplyResourceChange", handler).await;
        if let Some(at) = self.stopped_at.get() {
            tracing::info!(
                tf_resource_type = %type_name,
                ms_after_stop = at.elapsed().as_millis() as u64,
                "ApplyResourceChange returned after StopProvider"
            );
        }
        r
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        let handler = resource::import(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ImportResourceState", handler).await
    }

    async fn move_resource_state(
        &self,
        req: Request<pb::move_resource_state::Request>,
    ) -> Result<Response<pb::move_resource_state::Response>, Status> {
        Ok(Response::new(unsupported::move_state(
            &self.registry,
            req.into_inner(),
        )))
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        let handler = data_source::read(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ReadDataSource", handler).await
    }

    async fn validate_ephemeral_resource_config(
        &self,
        req: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Result<Response<pb::validate_ephemeral_resource_config::Response>, Status> {
        Ok(Response::new(unsupported::ephemeral(
            &self.registry,
            &req.into_inner().type_name,
        )))
    }

    async fn open_ephemeral_resource(
        &self,
        req: Request<pb::open_ephemeral_resource::Request>,
    ) -> Result<Response<pb::open_ephemeral_resource::Response>, Status> {
        Ok(Response::new(unsupported::ephemeral(
            &self.registry,
            &req.into_inner().type_name,
        )))
    }

    async fn renew_ephemeral_resource(
        &self,
        req: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Result<Response<pb::renew_ephemeral_resource::Response>, Status> {
        Ok(Response::new(unsupported::ephemeral(
            &self.registry,
            &req.into_inner().type_name,
        )))
    }

    async fn close_ephemeral_resource(
        &self,
        req: Request<pb::close_ephemeral_resource::Request>,
    ) -> Result<Response<pb::close_ephemeral_resource::Response>, Status> {
        Ok(Response::new(unsupported::ephemeral(
            &self.registry,
            &req.into_inner().type_name,
        )))
    }

    async fn get_functions(
        &self,
        _: Request<pb::get_functions::Request>,
    ) -> Result<Response<pb::get_functions::Response>, Status> {
        Ok(Response::new(function::definitions(&self.registry)))
    }

    async fn call_function(
        &self,
        req: Request<pb::call_function::Request>,
    ) -> Result<Response<pb::call_function::Response>, Status> {
        let handler = function::call(self.registry.clone(), req.into_inner());
        Ok(Response::new(handler.await))
    }

    type ListResourceStream = list::Events;

    async fn list_resource(
        &self,
        req: Request<pb::list_resource::Request>,
    ) -> Result<Response<Self::ListResourceStream>, Status> {
        Ok(Response::new(list::list(
            self.registry.clone(),
            req.into_inner(),
        )))
    }

    async fn validate_list_resource_config(
        &self,
        req: Request<pb::validate_list_resource_config::Request>,
    ) -> Result<Response<pb::validate_list_resource_config::Response>, Status> {
        let handler = list::validate(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ValidateListResourceConfig", handler).await
    }

    async fn validate_action_config(
        &self,
        req: Request<pb::validate_action_config::Request>,
    ) -> Result<Response<pb::validate_action_config::Response>, Status> {
        let handler = action::validate(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "ValidateActionConfig", handler).await
    }

    async fn plan_action(
        &self,
        req: Request<pb::plan_action::Request>,
    ) -> Result<Response<pb::plan_action::Response>, Status> {
        let handler = action::plan(self.registry.clone(), req.into_inner());
        template::guarded(&self.registry, "PlanAction", handler).await
    }

    type InvokeActionStream = action::Events;

    async fn invoke_action(
        &self,
        req: Request<pb::invoke_action::Request>,
    ) -> Result<Response<Self::InvokeActionStream>, Status> {
        Ok(Response::new(action::invoke(
            self.registry.clone(),
            req.into_inner(),
        )))
    }

    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        let _ = self.stopped_at.set(Instant::now());
        self.registry.provider.stop();
        tracing::info!("StopProvider: every running operation stops waiting");
        Ok(Response::new(pb::stop_provider::Response::default()))
    }
}
