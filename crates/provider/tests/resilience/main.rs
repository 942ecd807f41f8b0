//! The provider under pressure, through the real terraform: seeded chaos, a hundred pools at
//! once, and canary secrets that must appear nowhere a traced lifecycle leaves behind. (The
//! interrupt and hostile-network tests keep binaries of their own: they measure time and memory.)

#[path = "../common/mod.rs"]
mod common;

mod chaos;
mod concurrency;
mod security_secrets;
