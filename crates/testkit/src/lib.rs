//! The test harness every crate of the workspace shares (a dev-dependency only): finding the
//! real tools the tests drive, and failing under CI when one is missing; and the benchmarks'
//! figures file.

pub mod figures;
pub mod tools;
