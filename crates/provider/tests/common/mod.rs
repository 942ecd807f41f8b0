//! Shared test harness: the provider as a plugin process, and terraform driving it.
#![allow(dead_code)]

pub mod operator;
pub mod outside;
pub mod plugin;
pub mod pools;
pub mod sandbox;
pub mod terraform;
#[allow(unused_imports)]
pub use testkit::tools;
