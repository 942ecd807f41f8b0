//! The provider-defined function RPCs. They answer differently from the rest: a failed call is
//! one FunctionError naming the argument at fault, which terraform shows against that argument,
//! so a function does not go through the diagnostics template.

use std::sync::Arc;

use super::registry::Registry;
use super::template::panic_diagnostic;
use crate::api::FunctionError;
use crate::server::convert::{decode, encode};
use crate::server::proto::tfplugin6 as pb;

pub(super) fn definitions(reg: &Registry) -> pb::get_functions::Response {
    pb::get_functions::Response {
        functions: reg.schema_response().functions.clone(),
        diagnostics: Vec::new(),
    }
}

/// Runs the call in its own task, like the template does, so a panic is an error, not a crash.
pub(super) async fn call(
    reg: Arc<Registry>,
    req: pb::call_function::Request,
) -> pb::call_function::Response {
    let task_reg = reg.clone();
    match tokio::spawn(async move { evaluate(&task_reg, &req) }).await {
        Ok(r) => r,
        Err(e) => pb::call_function::Response {
            result: None,
            error: Some(pb::FunctionError {
                text: panic_diagnostic(&reg, "CallFunction", e).0.remove(0).detail,
                function_argument: None,
            }),
        },
    }
}

fn evaluate(reg: &Registry, req: &pb::call_function::Request) -> pb::call_function::Response {
    // Terraform ends the sentence itself ("Invalid value for \"x\" parameter: <text>.").
    let fail = |argument: Option<usize>, text: String| pb::call_function::Response {
        result: None,
        error: Some(pb::FunctionError {
            text: text.trim_end_matches('.').to_string(),
            function_argument: argument.map(|a| a as i64),
        }),
    };
    let Some(f) = reg.functions.get(&req.name) else {
        return fail(
            None,
            format!("this provider has no function {:?}", req.name),
        );
    };
    let sig = f.signature();
    if req.arguments.len() != sig.parameters.len() {
        return fail(
            None,
            format!(
                "expected {} arguments, got {}",
                sig.parameters.len(),
                req.arguments.len()
            ),
        );
    }
    let mut args = Vec::with_capacity(sig.parameters.len());
    for (i, (dv, p)) in req.arguments.iter().zip(&sig.parameters).enumerate() {
        match decode(Some(dv), &p.ty) {
            Ok(v) => args.push(v),
            Err(e) => return fail(Some(i), format!("argument {:?}: {e}", p.name)),
        }
    }
    match f.call(&args).and_then(|v| {
        encode(&v, &sig.returns).map_err(|e| FunctionError {
            argument: None,
            text: e.0,
        })
    }) {
        Ok(result) => pb::call_function::Response {
            result: Some(result),
            error: None,
        },
        Err(e) => fail(e.argument, e.text),
    }
}
