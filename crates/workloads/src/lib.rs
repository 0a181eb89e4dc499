//! Workloads shaped like real jobs rather than synthetic block tests: dbench loadfile
//! replay, file copies, dd-style streams, the sync-method probe, metadata rates, the
//! verified-write workload (`verify`, `iolab run verify`) and the scrub test on redundant
//! testbeds (`scrub`). Each produces iolab's ordinary test records, so statistics, the
//! store, reports and warnings treat them like any other run. What their `--verify` writes
//! and checks (block format, small-file content, dbench's model, the tally) is
//! iolab-integrity's.

pub mod block;
pub mod dbench;
pub mod fsync;

pub mod common;
pub mod copy;
pub mod metadata;
pub mod scrub;
pub mod streams;
pub mod verify;
