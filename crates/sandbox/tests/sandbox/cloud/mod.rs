//! The sandbox's cloud emulators over real HTTP: lifecycles, auth, async operations, node hand-off,
//! fault injection, inventory, persistence, and a table of bad requests with their error shapes.

mod aks;
mod autoscaling;
mod bad_requests;
pub(crate) mod ec2;
mod eks;
mod faults;
mod gke;
mod world;

use std::time::{Duration, Instant};

use crate::support::*;
use axum::http::{Method, StatusCode};
use sandbox::{Config, NodeEvent, Sandbox};
use serde_json::{Value, json};

fn changed(events: &[NodeEvent], pool: &str) -> Vec<sandbox::PoolNodes> {
    events
        .iter()
        .filter_map(|e| match e {
            NodeEvent::Changed(n) if n.pool == pool => Some(n.clone()),
            _ => None,
        })
        .collect()
}

fn deleted(events: &[NodeEvent], pool: &str) -> bool {
    events
        .iter()
        .any(|e| matches!(e, NodeEvent::Deleted { pool: p, .. } if p == pool))
}
