//! The plugin protocol as a client sees it: the handshake, AutoMTLS and the tfplugin6 service
//! (`protocol`), and who may reach the provider at all (`security_socket`).

#[path = "../common/mod.rs"]
mod common;

mod protocol;
mod security_socket;
