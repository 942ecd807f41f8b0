//! Adopting pools that already exist: the identity terraform 1.12 and later keep beside each
//! state, and `import` blocks that name a pool by it (terraform 1.15.5, from
//! `scripts/test-tools`).

use std::time::Duration;

use crate::common::sandbox;
use crate::common::terraform::Workspace;
use crate::common::tools::{self, Tool};

use super::terraform_versions::{pools, provider};

/// The identity blocks of the three pools `pools()` makes, coordinates the provider does not
/// default spelled out.
const IDENTITIES: [(&str, &str); 3] = [
    (
        "aks",
        r#"{ cloud = "aks", resource_group = "sandbox-rg", cluster = "sandbox-aks", name = "a100ts" }"#,
    ),
    (
        "gke",
        r#"{ cloud = "gke", location = "us-central1", cluster = "sandbox-gke", name = "a100mig" }"#,
    ),
    (
        "eks",
        r#"{ cloud = "eks", cluster = "sandbox-eks", name = "t4mps" }"#,
    ),
];

#[test]
fn the_state_keeps_each_pools_identity_and_import_by_identity_adopts_it() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let maker = Workspace::new(&pools(&sb.url, "ml")).with_terraform(&tf);
    maker.init();
    maker.apply();
    let show = maker.show_json();
    let resources = show["values"]["root_module"]["resources"]
        .as_array()
        .unwrap();
    let identity = |name: &str| {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["identity"].clone())
            .unwrap()
    };
    assert_eq!(identity("gke")["cloud"], "gke");
    assert_eq!(identity("gke")["location"], "us-central1");
    assert_eq!(identity("gke")["cluster"], "sandbox-gke");
    assert_eq!(identity("gke")["name"], "a100mig");
    assert!(identity("gke")["resource_group"].is_null());
    assert_eq!(identity("aks")["resource_group"], "sandbox-rg");
    assert!(
        identity("aks")["subscription_id"].is_string(),
        "the provider's default subscription is part of the identity: {}",
        identity("aks")
    );
    assert!(identity("eks")["region"].is_string(), "{}", identity("eks"));
    for (name, _) in IDENTITIES {
        maker.ok(&["state", "rm", &format!("fracgpu_nodepool.{name}")]);
    }

    let adopter = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    adopter.init();
    let imports: String = IDENTITIES
        .iter()
        .map(|(name, id)| {
            format!("import {{\n  to       = fracgpu_nodepool.{name}\n  identity = {id}\n}}\n\n")
        })
        .collect();
    adopter.write("imports.tf", &imports);
    let out = adopter.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
    let generated = std::fs::read_to_string(adopter.dir.join("generated.tf"))
        .unwrap_or_else(|_| panic!("terraform wrote no configuration:\n{}", out.text()));
    let out = adopter.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout
            .contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}\n--- generated.tf:\n{generated}",
        out.text()
    );
    adopter.apply();
    let (code, plan) = adopter.plan_exit_code();
    assert_eq!(code, 0, "{}\n--- generated.tf:\n{generated}", plan.text());
    let show = adopter.show_json();
    let adopted = &show["values"]["root_module"]["resources"];
    assert_eq!(adopted.as_array().unwrap().len(), 3, "{adopted}");
    assert!(
        adopted
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["identity"]["name"].is_string()),
        "{adopted}"
    );
    adopter.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(sb.pools().is_empty(), "{:?}", sb.pools());
}

#[test]
fn an_identity_that_lacks_or_mixes_coordinates_names_the_attribute_to_fix() {
    let Some(tf) = tools::require(Tool::Terraform115) else {
        return;
    };
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&provider(&sb.url)).with_terraform(&tf);
    ws.init();
    for (identity, expected) in [
        (
            r#"{ cloud = "gke", cluster = "sandbox-gke", name = "x" }"#,
            "needs `location`",
        ),
        (
            r#"{ cloud = "gke", location = "us-central1", resource_group = "rg", cluster = "sandbox-gke", name = "x" }"#,
            "`resource_group` does not belong to a pool on GKE",
        ),
        (
            r#"{ cloud = "azure", cluster = "c", name = "x" }"#,
            "use `aks`, `gke` or `eks`",
        ),
        (
            r#"{ cloud = "gke", location = "us-central1", cluster = "sandbox-gke", name = "missing" }"#,
            "Cannot import non-existent node pool",
        ),
    ] {
        ws.write(
            "imports.tf",
            &format!("import {{\n  to       = fracgpu_nodepool.x\n  identity = {identity}\n}}\n"),
        );
        let out = ws.run(&["plan", "-no-color", "-generate-config-out=generated.tf"]);
        assert_ne!(out.code, 0, "{identity}: {}", out.text());
        assert!(
            out.text().contains(expected),
            "{identity}: expected {expected:?} in\n{}",
            out.text()
        );
        let _ = std::fs::remove_file(ws.dir.join("generated.tf"));
    }
}
