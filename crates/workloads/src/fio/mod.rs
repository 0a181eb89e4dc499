//! `iolab run fio JOBFILE`: an fio job file (read and mapped by `iolab_spec::fiojob`) run
//! on iolab's engine through the block pass loop, one test per fio job, the job file's text
//! kept in the run's notes. docs/fio.md says what each option becomes.

pub mod logs;
pub mod run;

pub use run::{plan_file, FioOptions};
