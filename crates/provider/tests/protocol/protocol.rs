//! The provider binary as terraform's plugin client sees it: handshake, transport, AutoMTLS,
//! the go-plugin services and every tfplugin6 RPC, over a real socket.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::plugin::{Auth, client_cert, connect, start};
use pb::provider_client::ProviderClient;
use tfplugin::server::proto::health::{HealthCheckRequest, health_client::HealthClient};
use tfplugin::server::proto::plugin::{Empty, grpc_controller_client::GrpcControllerClient};
use tfplugin::server::proto::tfplugin6 as pb;

#[tokio::test]
async fn handshake_line_and_private_unix_socket() {
    let cert = client_cert();
    let dir = tempfile::tempdir().unwrap();
    let p = start(
        &cert,
        &[("PLUGIN_UNIX_SOCKET_DIR", dir.path().to_str().unwrap())],
    );
    assert_eq!(p.handshake.network, "unix");
    let sock = std::path::Path::new(&p.handshake.address);
    assert!(
        sock.starts_with(dir.path()),
        "socket {sock:?} honours PLUGIN_UNIX_SOCKET_DIR"
    );
    let mode = std::fs::metadata(sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode & 0o077,
        0,
        "socket readable by the owner only, got {mode:o}"
    );
    let dir_mode = std::fs::metadata(sock.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    // The announced certificate is a parseable X.509 certificate for localhost.
    assert_eq!(p.handshake.server_cert_der[0], 0x30, "DER sequence");
    assert!(
        p.handshake
            .server_cert_der
            .windows(9)
            .any(|w| w == b"localhost")
    );
}

#[tokio::test]
async fn terraforms_certificate_is_accepted_and_others_are_refused() {
    let cert = client_cert();
    let p = start(&cert, &[]);

    let ch = connect(&p.handshake, Auth::Cert(&cert))
        .await
        .expect("terraform's certificate is accepted");
    let schema = ProviderClient::new(ch.clone())
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .unwrap()
        .into_inner();
    assert!(schema.provider.is_some());
    let health = HealthClient::new(ch)
        .check(HealthCheckRequest {
            service: "plugin".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, 1, "SERVING");

    let impostor = client_cert();
    for (what, auth) in [
        ("no client certificate", Auth::NoCert),
        ("another P-521 certificate", Auth::Cert(&impostor)),
        ("plain HTTP/2", Auth::Plain),
    ] {
        let refused = match connect(&p.handshake, auth).await {
            Err(_) => true,
            Ok(ch) => ProviderClient::new(ch)
                .get_provider_schema(pb::get_provider_schema::Request {})
                .await
                .is_err(),
        };
        assert!(
            refused,
            "a connection with {what} must be refused before any RPC runs"
        );
    }
}

#[tokio::test]
async fn tcp_fallback_stays_within_the_port_range() {
    let cert = client_cert();
    let p = start(
        &cert,
        &[
            ("FRACGPU_PLUGIN_TRANSPORT", "tcp"),
            ("PLUGIN_MIN_PORT", "20100"),
            ("PLUGIN_MAX_PORT", "20199"),
        ],
    );
    assert_eq!(p.handshake.network, "tcp");
    let (host, port) = p.handshake.address.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    let port: u16 = port.parse().unwrap();
    assert!((20100..=20199).contains(&port), "port {port}");
    let ch = connect(&p.handshake, Auth::Cert(&cert)).await.unwrap();
    ProviderClient::new(ch)
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .unwrap();
    assert!(
        connect(&p.handshake, Auth::NoCert).await.is_err() || {
            let ch = connect(&p.handshake, Auth::NoCert).await.unwrap();
            ProviderClient::new(ch)
                .get_provider_schema(pb::get_provider_schema::Request {})
                .await
                .is_err()
        }
    );
}

#[tokio::test]
async fn shutdown_ends_the_process_before_terraform_would_kill_it() {
    let cert = client_cert();
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(
        &cert,
        &[("PLUGIN_UNIX_SOCKET_DIR", dir.path().to_str().unwrap())],
    );
    let ch = connect(&p.handshake, Auth::Cert(&cert)).await.unwrap();
    GrpcControllerClient::new(ch)
        .shutdown(Empty {})
        .await
        .unwrap();
    // Terraform kills a plugin that has not exited 2 s after Shutdown.
    let deadline = Instant::now() + Duration::from_secs(2);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "provider still running 2 s after Shutdown"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success());
    assert!(
        !std::path::Path::new(&p.handshake.address).exists(),
        "socket removed on exit"
    );
}

#[tokio::test]
async fn every_rpc_answers_without_crashing() {
    let cert = client_cert();
    let mut p = start(&cert, &[]);
    let mut c = ProviderClient::new(connect(&p.handshake, Auth::Cert(&cert)).await.unwrap());
    let garbage = || {
        Some(pb::DynamicValue {
            msgpack: vec![0xc1, 0xff, 0x00],
            json: vec![],
        })
    };

    let meta = c
        .get_metadata(pb::get_metadata::Request {})
        .await
        .unwrap()
        .into_inner();
    assert!(meta.server_capabilities.is_some());
    c.get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .unwrap();
    c.get_functions(pb::get_functions::Request {})
        .await
        .unwrap();
    c.stop_provider(pb::stop_provider::Request {})
        .await
        .unwrap();

    // Requests naming unknown types, or carrying bytes that are not msgpack, get an error
    // diagnostic, never a crash or a transport error.
    macro_rules! answers_with_error {
        ($call:ident, $req:expr) => {{
            let r = c.$call($req).await.expect(stringify!($call)).into_inner();
            assert!(
                r.diagnostics
                    .iter()
                    .any(|d| d.severity == pb::diagnostic::Severity::Error as i32),
                "{} answers with an error diagnostic",
                stringify!($call)
            );
        }};
    }
    answers_with_error!(
        validate_resource_config,
        pb::validate_resource_config::Request {
            type_name: "fracgpu_nope".into(),
            config: garbage(),
            client_capabilities: None
        }
    );
    answers_with_error!(
        validate_data_resource_config,
        pb::validate_data_resource_config::Request {
            type_name: "fracgpu_nope".into(),
            config: garbage()
        }
    );
    answers_with_error!(
        validate_provider_config,
        pb::validate_provider_config::Request { config: garbage() }
    );
    answers_with_error!(
        configure_provider,
        pb::configure_provider::Request {
            terraform_version: "1.11.4".into(),
            config: garbage(),
            client_capabilities: None
        }
    );
    answers_with_error!(
        upgrade_resource_state,
        pb::upgrade_resource_state::Request {
            type_name: "fracgpu_nope".into(),
            version: 0,
            raw_state: None
        }
    );
    answers_with_error!(
        upgrade_resource_identity,
        pb::upgrade_resource_identity::Request {
            type_name: "fracgpu_nope".into(),
            version: 0,
            raw_identity: None
        }
    );
    answers_with_error!(
        read_resource,
        pb::read_resource::Request {
            type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        plan_resource_change,
        pb::plan_resource_change::Request {
            type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        apply_resource_change,
        pb::apply_resource_change::Request {
            type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        import_resource_state,
        pb::import_resource_state::Request {
            type_name: "fracgpu_nope".into(),
            id: "x".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        move_resource_state,
        pb::move_resource_state::Request {
            target_type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        read_data_source,
        pb::read_data_source::Request {
            type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        validate_ephemeral_resource_config,
        pb::validate_ephemeral_resource_config::Request {
            type_name: "fracgpu_nope".into(),
            config: None
        }
    );
    answers_with_error!(
        open_ephemeral_resource,
        pb::open_ephemeral_resource::Request {
            type_name: "fracgpu_nope".into(),
            ..Default::default()
        }
    );
    answers_with_error!(
        renew_ephemeral_resource,
        pb::renew_ephemeral_resource::Request {
            type_name: "fracgpu_nope".into(),
            private: None
        }
    );
    answers_with_error!(
        close_ephemeral_resource,
        pb::close_ephemeral_resource::Request {
            type_name: "fracgpu_nope".into(),
            private: None
        }
    );
    let f = c
        .call_function(pb::call_function::Request {
            name: "nope".into(),
            arguments: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(f.error.is_some());

    assert!(
        p.child.try_wait().unwrap().is_none(),
        "the provider is still running"
    );
}

#[test]
fn started_by_hand_it_explains_itself() {
    let out = Command::new(env!("CARGO_BIN_EXE_terraform-provider-fracgpu"))
        .env_remove("TF_PLUGIN_MAGIC_COOKIE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("plugin for Terraform") && msg.contains("terraform init"),
        "{msg}"
    );
}

#[tokio::test]
async fn debug_mode_prints_reattach_and_serves_plain() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_terraform-provider-fracgpu"))
        .arg("--debug")
        .env_remove("TF_PLUGIN_MAGIC_COOKIE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut reattach = None;
    while let Some(line) = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
    {
        if let Some(json) = line.trim().strip_prefix("TF_REATTACH_PROVIDERS='") {
            reattach = Some(json.trim_end_matches('\'').to_string());
            break;
        }
    }
    let v: serde_json::Value = serde_json::from_str(&reattach.expect("reattach line")).unwrap();
    let entry = &v["registry.terraform.io/fracgpu/fracgpu"];
    assert_eq!(entry["ProtocolVersion"], 6);
    assert_eq!(entry["Pid"], child.id().unwrap());
    let h = crate::common::plugin::Handshake {
        network: entry["Addr"]["Network"].as_str().unwrap().into(),
        address: entry["Addr"]["String"].as_str().unwrap().into(),
        server_cert_der: vec![],
    };
    let ch = connect(&h, Auth::Plain).await.unwrap();
    ProviderClient::new(ch)
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .unwrap();
}
