//! The progress bar: current test and pass, live MB/s, and the ETA of the whole run.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use iolab_engine::PassObserver;
use iolab_measure::MB;

pub struct Progress {
    bar: ProgressBar,
    /// Put before every pass's label (`run 2/5 `, for `--repeat`).
    tag: String,
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
            ProgressStyle::with_template("{prefix:<36} [{bar:24}] {msg:>14}  ETA {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Progress {
            bar,
            tag: String::new(),
        }
    }

    /// Puts `tag` before every pass's label.
    pub fn set_tag(&mut self, tag: String) {
        self.tag = tag;
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
        self.bar.set_prefix(format!("{}{label}", self.tag));
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
