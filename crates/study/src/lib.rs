//! Studies: the study file (configurations, a cartesian `[matrix]`, workloads, repeats,
//! order), its validation with `FILE:LINE: KEY: message` errors, and the order of the runs.
//!
//! A study file is parsed by [`parse`] into a [`Study`]: every configuration has its final
//! label and a validated [`iolab_testbed::TestbedSpec`] (the study's `[testbed]` merged with
//! the configuration's own `testbed` table and its matrix values); every workload has the
//! `iolab run` arguments it stands for, checked by a caller-supplied validator (the CLI
//! parses them with `iolab run`'s workload registry). [`schedule`] gives the order in which
//! configurations are built and measured; [`run::execute`] builds each one (iolab-testbed),
//! runs the workloads as child `iolab run`s and prints the comparison (iolab-report). The
//! file format is described in `docs/studies.md`.
//!
//! Modules: `ab` (`iolab ab`: two `iolab run` commands alternated until their comparison
//! is decided), `check` (a workload's options through `iolab run`'s registry), `file` (the TOML shape, spans and errors), `matrix` (merging tables and the
//! cartesian expansion), `schedule` (interleaved or grouped order), `plan` (`--dry-run`
//! and `--list-testbeds`), `run` (building, running, tearing down, comparing).

pub mod ab;
mod check;
mod error;
mod file;
mod matrix;
pub mod plan;
pub mod run;
mod schedule;

pub use check::check_workload;
pub use error::StudyError;
pub use file::{parse, Config, Order, Study, Workload, WorkloadProblem, RESERVED_OPTIONS};
pub use matrix::{expand, merge_tables, set_dotted, value_text};
pub use schedule::{rotated, schedule, Step};
