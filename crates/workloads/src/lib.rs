//! Workloads shaped like real jobs rather than synthetic block tests: dbench loadfile
//! replay, file copies, dd-style streams, the sync-method probe and metadata rates. Each
//! produces iolab's ordinary test records, so statistics, the store, reports and warnings
//! treat them like any other run.

pub mod block;
pub mod dbench;
pub mod fsync;

pub mod common;
pub mod copy;
pub mod filecheck;
pub mod metadata;
pub mod streams;
