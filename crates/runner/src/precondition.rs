//! `--precondition none|SIZE|2x`: before the first test, the region written with 128 KiB
//! sequential writes of incompressible (random) data, SNIA's workload-independent
//! preconditioning (2x: twice the region), so that a device's caches and mapping tables
//! are in the state sustained writing leaves them in. Preconditioning writes, so it takes a
//! target the run may write (a read-only run's target included: the same safety rules as a
//! writing test), and is refused with `--verify` and in MPI runs.

use std::time::{Duration, Instant};

use iolab_engine::pass::run_pass;
use iolab_engine::target::Target;
use iolab_spec::{format_bytes, DataPattern, JobSpec, Rw, TestSpec, MAX_DURATION};

use crate::{RunContext, RunError, UsageError};

/// SNIA PTS's preconditioning block size.
pub const BLOCK: u64 = 128 << 10;
/// Writes in flight.
pub const DEPTH: u32 = 8;

/// How much to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// This many bytes (rounded up to whole 128 KiB blocks).
    Bytes(u64),
    /// This many times the region.
    Times(u32),
}

impl Precondition {
    /// `none` (no preconditioning), a size (`4GiB`) or `Nx` (N times the region, 1..=10).
    pub fn parse(text: &str) -> Result<Option<Precondition>, UsageError> {
        let t = text.trim();
        let bad =
            |why: String| UsageError::option("precondition", format!("--precondition {t}: {why}"));
        if t.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        if let Some(n) = t.strip_suffix(['x', 'X']) {
            return match n.parse::<u32>() {
                Ok(n @ 1..=10) => Ok(Some(Precondition::Times(n))),
                _ => Err(bad("expected none, a size, or 1x..10x the region".into())),
            };
        }
        match iolab_spec::parse_size("precondition", t) {
            Ok(0) => Err(bad("a size above 0 (or none)".into())),
            Ok(b) => Ok(Some(Precondition::Bytes(b))),
            Err(e) => Err(bad(format!("{} (expected none, a size, or 2x)", e.reason))),
        }
    }

    /// The bytes to write on a region of `region` bytes.
    pub fn bytes(self, region: u64) -> u64 {
        let b = match self {
            Precondition::Bytes(b) => b,
            Precondition::Times(n) => region.saturating_mul(n as u64),
        };
        b.div_ceil(BLOCK).saturating_mul(BLOCK)
    }

    /// How the option said it.
    pub fn text(self) -> String {
        match self {
            Precondition::Bytes(b) => format_bytes(b),
            Precondition::Times(n) => format!("{n}x"),
        }
    }
}

/// What preconditioning did: `extra.precondition` of every test after it.
pub use iolab_measure::extra::Precondition as Done;

/// Writes the region as `pc` says, before the first test; `None` when stopped.
pub fn run(
    pc: Precondition,
    target: &Target,
    settings: &iolab_spec::RunSettings,
    ctx: &mut RunContext,
) -> Result<Option<Done>, RunError> {
    let region = target.info.size;
    let bytes = pc.bytes(region);
    let mut job = JobSpec::new(Rw::Write, BLOCK.min(region), DEPTH, 1);
    job.io_limit = Some(bytes);
    let spec = TestSpec {
        name: "precondition".into(),
        group: "precondition".into(),
        job,
    };
    let mut s = settings.clone();
    s.data = DataPattern::Random;
    s.ramp = Duration::ZERO;
    let stop = std::sync::Arc::clone(&ctx.stop);
    let t0 = Instant::now();
    let out = {
        let obs = ctx.progress.pass(
            format!("precondition {}", format_bytes(bytes)),
            Duration::ZERO,
            Duration::ZERO,
        );
        run_pass(target, &spec, &s, 0, MAX_DURATION, &stop, &obs, None)
            .map_err(crate::block::target_error)?
    };
    if out.interrupted {
        return Ok(None);
    }
    if let Some(e) = out.record.errors.first() {
        return Err(RunError::Failed(format!(
            "--precondition: writing the region failed at offset {}: {}",
            e.offset, e.message
        )));
    }
    let written = out.record.write.as_ref().map_or(0, |w| w.bytes);
    let seconds = t0.elapsed().as_secs_f64();
    let done = Done {
        asked: pc.text(),
        bytes: written,
        region_bytes: region,
        block_bytes: spec.job.bs,
        seconds,
        mb_s: written as f64 / iolab_measure::MB / seconds.max(1e-9),
    };
    ctx.note(format!(
        "preconditioned ({}): wrote {} ({:.2}x the {} region) with {} sequential writes of \
         random data in {:.1} s ({:.1} MB/s) before the first test",
        done.asked,
        format_bytes(written),
        written as f64 / region.max(1) as f64,
        format_bytes(region),
        format_bytes(spec.job.bs),
        seconds,
        done.mb_s
    ));
    Ok(Some(done))
}

/// `--precondition` where it cannot apply: with `--verify`, or in an MPI run.
pub fn refuse(verify: bool, mpi: bool) -> Result<(), RunError> {
    let why = if verify {
        "--precondition writes unstamped data over the region --verify checks; give one of them"
    } else if mpi {
        "--precondition is not made in an MPI run (each rank would write the region)"
    } else {
        return Ok(());
    };
    Err(RunError::Usage(UsageError::option("precondition", why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_multiples_parse() {
        assert_eq!(Precondition::parse("none").unwrap(), None);
        assert_eq!(
            Precondition::parse("2x").unwrap(),
            Some(Precondition::Times(2))
        );
        assert_eq!(
            Precondition::parse("1MiB").unwrap(),
            Some(Precondition::Bytes(1 << 20))
        );
        for bad in ["0", "0x", "11x", "lots", "-1x"] {
            let e = Precondition::parse(bad).unwrap_err().to_string();
            assert!(e.contains("precondition"), "{bad}: {e}");
        }
        assert_eq!(Precondition::Times(2).bytes(3 << 20), 6 << 20);
        assert_eq!(Precondition::Bytes(1).bytes(1 << 30), BLOCK);
    }
}
