//! `iolab run sustained`: writes until the rate is steady after any cliff (a cache that
//! filled), then again after an idle pause, and reports the burst rate and bytes, the
//! sustained rate and how long the cache takes to recover. The rounds are the block pass
//! loop's (`iolab_runner::block` with `iolab_runner::sustained`'s rule); `run.rs` holds
//! the options and the plan.

pub mod run;
