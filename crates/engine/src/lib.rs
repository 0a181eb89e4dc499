//! The engine: issues I/O for a job (io_uring or psync), prepares and removes test targets,
//! and turns one timed pass into a [`iolab_measure::PassRecord`].

pub mod safety;
