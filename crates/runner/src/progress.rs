//! The progress bar: the plan before the first pass, then the current test (`test k of
//! n`) and pass, live MB/s, and the ETA of the whole run.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use iolab_engine::PassObserver;
use iolab_measure::MB;

pub struct Progress {
    bar: ProgressBar,
    /// Put before every pass's label (`run 2/5 `, for `--repeat`).
    tag: String,
    /// Put after the tag: where the run is in its plan (`test 3 of 8 `).
    step: std::cell::RefCell<String>,
}

impl Progress {
    /// A bar over `total` of planned time; hidden when `quiet` or stderr is not a terminal.
    pub fn new(total: Duration, quiet: bool) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(total.as_millis() as u64),
            if quiet {
                ProgressDrawTarget::hidden()
            } else {
                ProgressDrawTarget::stderr()
            },
        );
        bar.set_style(
            // The bar takes what the terminal has left.
            ProgressStyle::with_template("{prefix:<44} {msg:>12} ETA {eta:>3} [{wide_bar}]")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Progress {
            bar,
            tag: String::new(),
            step: Default::default(),
        }
    }

    /// Puts `tag` before every pass's label.
    pub fn set_tag(&mut self, tag: String) {
        self.tag = tag;
    }

    /// Puts `step` (`test 3 of 8 `) before the following passes' labels.
    pub fn set_step(&self, step: String) {
        *self.step.borrow_mut() = step;
    }

    /// Sets the planned time the bar (and its ETA) measures.
    pub fn set_total(&self, total: Duration) {
        self.bar.set_length(total.as_millis() as u64);
    }

    pub fn println(&self, line: &str) {
        self.bar.println(line);
    }

    /// Observer for one pass that started at `base` of the planned time.
    pub fn pass(&self, label: String, base: Duration, planned: Duration) -> PassProgress<'_> {
        self.bar
            .set_prefix(format!("{}{}{label}", self.tag, self.step.borrow()));
        self.bar.set_message("");
        self.bar.set_position(base.as_millis() as u64);
        PassProgress {
            bar: &self.bar,
            base,
            planned,
        }
    }

    /// Shows a preparation step with its own percentage.
    pub fn preparing(&self, done: u64, total: u64) {
        self.bar.set_prefix("preparing test file");
        self.bar
            .set_message(format!("{:.0}%", 100.0 * done as f64 / total.max(1) as f64));
        self.bar.tick();
    }

    /// Shows a workload phase and a detail (e.g. a count) without moving the bar.
    pub fn phase(&self, label: &str, detail: String) {
        self.bar.set_prefix(label.to_string());
        self.bar.set_message(detail);
        self.bar.tick();
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

pub struct PassProgress<'a> {
    bar: &'a ProgressBar,
    base: Duration,
    planned: Duration,
}

impl PassObserver for PassProgress<'_> {
    fn tick(&self, bytes: u64, elapsed: Duration) {
        let secs = elapsed.as_secs_f64().max(1e-3);
        self.bar
            .set_position((self.base + elapsed.min(self.planned)).as_millis() as u64);
        self.bar
            .set_message(format!("{:.1} MB/s", bytes as f64 / MB / secs));
    }
}

/// A duration as the progress line prints it: `800ms`, `5s`, `2m 40s`, `1h 5m`.
pub fn short_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 if s.is_multiple_of(60) => format!("{}m", s / 60),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ if (s % 3600) / 60 == 0 => format!("{}h", s / 3600),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations() {
        let d = Duration::from_millis;
        assert_eq!(short_duration(d(800)), "800ms");
        assert_eq!(short_duration(d(5_000)), "5s");
        assert_eq!(short_duration(d(160_000)), "2m 40s");
        assert_eq!(short_duration(d(120_000)), "2m");
        assert_eq!(short_duration(d(3_900_000)), "1h 5m");
        assert_eq!(short_duration(d(7_200_000)), "2h");
    }
}
