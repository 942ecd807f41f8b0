//! Actions (protocol 6.10, terraform 1.14 and later). Terraform validates an action's `config`
//! block (placing the diagnostics in that block's body, internal/terraform/node_action_validate.go
//! InConfigBody, so paths start at the schema's root), plans it (PlanAction, whose config may hold
//! unknowns when a resource's `action_trigger` runs it), and at apply invokes it: the answer is a
//! stream of Progress events, each printed as it arrives, that ends with one Completed event whose
//! error diagnostics fail the apply (internal/terraform/node_action_trigger_instance_apply.go; a
//! stream that ends without Completed passes silently, so one is always sent). The action runs in
//! its own task, so a panic becomes that Completed event's error, and a stream terraform drops
//! (the apply cancelled) closes the action's [`Progress`] rather than killing it mid-step.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::registry::Registry;
use super::template::{WithDiagnostics, panic_diagnostic, try_diag};
use crate::api::Progress;
use crate::schema::validate_config;
use crate::server::convert::{codec_diag, decode, diagnostics};
use crate::server::proto::tfplugin6 as pb;
use crate::{AttrPath, Diagnostics};

pub(super) async fn validate(
    reg: Arc<Registry>,
    req: pb::validate_action_config::Request,
) -> pb::validate_action_config::Response {
    type R = pb::validate_action_config::Response;
    let (action, schema) = try_diag!(reg.action(&req.action_type), R);
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty())
            .map_err(|e| codec_diag("action configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
    action.validate(&config, &mut diags);
    R::from_diagnostics(&diags)
}

pub(super) async fn plan(
    reg: Arc<Registry>,
    req: pb::plan_action::Request,
) -> pb::plan_action::Response {
    type R = pb::plan_action::Response;
    let (action, schema) = try_diag!(reg.action(&req.action_type), R);
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty())
            .map_err(|e| codec_diag("action configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    action.plan(&config, &mut diags).await;
    R::from_diagnostics(&diags)
}

pub(super) type Events = ReceiverStream<Result<pb::invoke_action::Event, Status>>;

type Out = mpsc::Sender<Result<pb::invoke_action::Event, Status>>;

/// Starts the action and answers with the stream of its events.
pub(super) fn invoke(reg: Arc<Registry>, req: pb::invoke_action::Request) -> Events {
    let (out, events) = mpsc::channel(16);
    tokio::spawn(run(reg, req, out));
    ReceiverStream::new(events)
}

async fn run(reg: Arc<Registry>, req: pb::invoke_action::Request, out: Out) {
    let (action, schema) = match reg.action(&req.action_type) {
        Ok((a, s)) => (a.clone(), s.clone()),
        Err(d) => return completed(&out, &d).await,
    };
    let config = match decode(req.config.as_ref(), &schema.ty()) {
        Ok(c) => c,
        Err(e) => return completed(&out, &codec_diag("action configuration", &e)).await,
    };
    let (progress_tx, mut messages) = mpsc::channel::<String>(16);
    let worker = tokio::spawn(async move {
        let progress = Progress::new(progress_tx);
        let mut diags = Diagnostics::new();
        action.invoke(&config, &progress, &mut diags).await;
        diags
    });
    let mut hung_up = false;
    while let Some(message) = messages.recv().await {
        if hung_up {
            continue;
        }
        let event = pb::invoke_action::Event {
            r#type: Some(pb::invoke_action::event::Type::Progress(
                pb::invoke_action::event::Progress { message },
            )),
        };
        if out.send(Ok(event)).await.is_err() {
            // Terraform dropped the stream: closing the progress channel tells the action,
            // which finishes its current step and returns; its messages go nowhere now.
            hung_up = true;
            messages.close();
        }
    }
    let diags = match worker.await {
        Ok(d) => d,
        Err(e) if e.is_panic() => panic_diagnostic(&reg, "InvokeAction", e),
        Err(_) => Diagnostics::new(),
    };
    completed(&out, &diags).await;
}

async fn completed(out: &Out, diags: &Diagnostics) {
    let event = pb::invoke_action::Event {
        r#type: Some(pb::invoke_action::event::Type::Completed(
            pb::invoke_action::event::Completed {
                diagnostics: diagnostics(diags),
            },
        )),
    };
    let _ = out.send(Ok(event)).await;
}
