//! Workloads shaped like real jobs rather than synthetic block tests: dbench loadfile
//! replay, file copies, dd-style streams, the sync-method probe, metadata rates, the
//! verified-write workload (`verify`, `iolab run verify`), the scrub test on redundant
//! testbeds (`scrub`) and the record/replay of an application's own I/O (`replay`). Each
//! produces iolab's ordinary test records, so statistics, the store, reports and warnings
//! treat them like any other run. What their `--verify` writes and checks (block format,
//! small-file content, dbench's model, the tally) is iolab-integrity's.

pub mod block;
pub mod dbench;
pub mod fsync;

mod beneath;
pub mod common;
pub mod copy;
pub mod crosscheck;
pub mod fio;
pub mod metadata;
pub mod replay;
pub mod scrub;
pub mod streams;
pub mod sustained;
pub mod verify;

/// Every workload `iolab run` knows, in the order `iolab run --help` lists them: the block
/// presets, then the workloads shaped like real jobs. Adding a workload is one line here.
pub static WORKLOADS: &[&dyn iolab_runner::Workload] = &[
    &block::WORKLOAD,
    &fsync::run::WORKLOAD,
    &dbench::run::WORKLOAD,
    &copy::run::WORKLOAD,
    &streams::run::WORKLOAD,
    &metadata::run::WORKLOAD,
    &verify::run::WORKLOAD,
    &scrub::run::WORKLOAD,
    &fio::run::WORKLOAD,
    &replay::run::WORKLOAD,
    &sustained::run::WORKLOAD,
];

/// The registry `iolab run` and `iolab study` parse workloads with.
pub fn registry() -> iolab_runner::Registry {
    iolab_runner::Registry {
        workloads: WORKLOADS,
        default: block::default_name,
    }
}
