//! Data integrity: self-describing verified blocks (`block`), the verified-write workload
//! and its later verification (`verified`), the off-device intent/ack journal (`journal`),
//! and the scrub test on redundant testbeds (`scrub`).

pub use iolab_engine::block;
pub mod journal;
pub mod scrub;
pub mod verified;
