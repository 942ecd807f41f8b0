//! List resources (protocol 6.10, terraform 1.14 and later), which `terraform query` reads from
//! the `list` blocks of `.tfquery.hcl` files. Terraform hands over only the `config` block (it
//! wraps the schema declared here in one, internal/plugin6/convert ProtoToListSchema) and reads
//! the answer as a stream of events: each names one object by its identity, with a display name
//! and, when asked, the whole resource object; an event whose diagnostics hold an error ends the
//! query (internal/plugin6/grpc_provider.go, ListResource). The list resource itself runs in its
//! own task and sends what it finds as it finds it, so terraform sees the first pools before the
//! last are read, and a limit reached stops the search.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::registry::Registry;
use super::template::{WithDiagnostics, panic_diagnostic, try_diag};
use crate::api::{ListItem, ListSink};
use crate::schema::validate_config;
use crate::server::convert::{codec_diag, decode, diagnostics, encode};
use crate::server::proto::tfplugin6 as pb;
use crate::{AttrPath, Diagnostics};

pub(super) async fn validate(
    reg: Arc<Registry>,
    req: pb::validate_list_resource_config::Request,
) -> pb::validate_list_resource_config::Response {
    type R = pb::validate_list_resource_config::Response;
    let (list, schema) = try_diag!(reg.list_resource(&req.type_name), R);
    let config = try_diag!(
        decode(req.config.as_ref(), &schema.ty()).map_err(|e| codec_diag("list configuration", &e)),
        R
    );
    let mut diags = Diagnostics::new();
    validate_config(&schema.block, &config, &AttrPath::root(), &mut diags);
    list.validate(&config, &mut diags);
    // Terraform declares the schema as the `config` block of the `list` block and places these
    // diagnostics in the list block's body (node_resource_validate.go, InConfigBody), so their
    // paths start there; the events of ListResource it prefixes itself.
    for d in &mut diags.0 {
        if let Some(p) = &mut d.path {
            p.0.insert(0, crate::Step::Attr(CONFIG_BLOCK.into()));
        }
    }
    R::from_diagnostics(&diags)
}

/// The block of a `list` block that holds a list resource's own configuration.
const CONFIG_BLOCK: &str = "config";

pub(super) type Events = ReceiverStream<Result<pb::list_resource::Event, Status>>;

/// Starts the list and answers with the stream of its events.
pub(super) fn list(reg: Arc<Registry>, req: pb::list_resource::Request) -> Events {
    let (out, events) = mpsc::channel(16);
    tokio::spawn(run(reg, req, out));
    ReceiverStream::new(events)
}

type Out = mpsc::Sender<Result<pb::list_resource::Event, Status>>;

async fn run(reg: Arc<Registry>, req: pb::list_resource::Request, out: Out) {
    if let Err(d) = start(&reg, &req) {
        return finish(&out, &d).await;
    }
    let (list, schema) = reg.list_resources[&req.type_name].clone();
    let Ok((_, res_schema, Some(id_schema))) = reg.resource_with_identity(&req.type_name) else {
        unreachable!("checked by start")
    };
    let (res_ty, id_ty) = (res_schema.ty(), id_schema.ty());
    let config = match decode(req.config.as_ref(), &schema.ty()) {
        Ok(c) => c,
        Err(e) => return finish(&out, &codec_diag("list configuration", &e)).await,
    };
    let (items_tx, mut items) = mpsc::channel::<ListItem>(16);
    let limit = usize::try_from(req.limit).unwrap_or(0);
    let include = req.include_resource_object;
    let worker = tokio::spawn(async move {
        let mut sink = ListSink::new(items_tx, limit, include);
        let mut diags = Diagnostics::new();
        list.list(&config, &mut sink, &mut diags).await;
        diags
    });
    while let Some(item) = items.recv().await {
        let event = event(&item, &id_ty, include.then_some(&res_ty));
        let failed = event
            .diagnostic
            .iter()
            .any(|d| d.severity == pb::diagnostic::Severity::Error as i32);
        if out.send(Ok(event)).await.is_err() || failed {
            // Terraform hung up, or it stops at this error: the list need not go on.
            worker.abort();
            return;
        }
    }
    let diags = match worker.await {
        Ok(d) => d,
        Err(e) if e.is_panic() => panic_diagnostic(&reg, "ListResource", e),
        Err(_) => Diagnostics::new(),
    };
    finish(&out, &diags).await;
}

/// The checks terraform makes of its own before a list starts, answered as diagnostics: the list
/// resource exists, and its managed resource declares an identity to name what it finds.
fn start(reg: &Registry, req: &pb::list_resource::Request) -> Result<(), Diagnostics> {
    reg.list_resource(&req.type_name)?;
    let (_, _, identity) = reg.resource_with_identity(&req.type_name)?;
    if identity.is_none() {
        return Err(crate::Diagnostic::error(
            "List resource without identity",
            format!(
                "{} lists objects but its resource declares no identity to name them. This is a \
                    bug in {}.",
                req.type_name,
                reg.binary()
            ),
        )
        .into());
    }
    Ok(())
}

fn event(
    item: &ListItem,
    id_ty: &crate::Type,
    resource_ty: Option<&crate::Type>,
) -> pb::list_resource::Event {
    let mut ev = pb::list_resource::Event {
        display_name: item.display_name.clone(),
        ..Default::default()
    };
    match encode(&item.identity, id_ty) {
        Ok(data) => {
            ev.identity = Some(pb::ResourceIdentityData {
                identity_data: Some(data),
            })
        }
        Err(e) => ev.diagnostic = diagnostics(&codec_diag("identity", &e)),
    }
    if let (Some(ty), Some(state)) = (resource_ty, &item.resource) {
        match encode(state, ty) {
            Ok(v) => ev.resource_object = Some(v),
            Err(e) => ev
                .diagnostic
                .extend(diagnostics(&codec_diag("resource object", &e))),
        }
    }
    ev
}

/// The list's own diagnostics travel in a last event without identity: terraform keeps its
/// warnings and stops at its errors.
async fn finish(out: &Out, diags: &Diagnostics) {
    if diags.0.is_empty() {
        return;
    }
    let _ = out
        .send(Ok(pb::list_resource::Event {
            diagnostic: diagnostics(diags),
            ..Default::default()
        }))
        .await;
}
