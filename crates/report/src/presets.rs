//! `iolab presets`: every preset with its defaults and tests, and the other workloads, laid
//! out at the report's width.

use iolab_spec::{expand_preset, format_bytes, JobSpec, Rw, PRESETS};

/// The widest line `presets` prints: the report's width (the terminal's, or 100 in a pipe)
/// less a margin of two.
fn presets_width() -> usize {
    crate::style::width() - 2
}

/// `text` word-wrapped to [`presets_width`] columns, every line indented by two spaces.
fn indented(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(" ");
    for word in text.split_whitespace() {
        if line.chars().count() + word.chars().count() + 1 > presets_width() {
            out.push_str(&line);
            out.push('\n');
            line = String::from(" ");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The presets with their defaults and tests, then `workloads` (name, summary) that are
/// not presets.
pub fn text(workloads: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for p in PRESETS {
        out.push_str(&format!("{}\n", p.name));
        out.push_str(&indented(p.summary));
        let d = &p.defaults;
        let passes = if d.adaptive {
            format!(
                "{} or more measured passes of {} s, until each test's 95% CI is within ±3% \
                 (adaptive, within a budget; --runs N for exactly N)",
                d.runs,
                d.duration.as_secs_f64()
            )
        } else {
            format!(
                "{} measured pass(es) of {} s",
                d.runs,
                d.duration.as_secs_f64()
            )
        };
        out.push_str(&indented(&format!(
            "defaults: size {}, {passes}, {} warm-up pass(es); headline = median of the \
             passes (--score best: the best pass, as CrystalDiskMark shows)",
            format_bytes(d.size),
            d.warmup_passes
        )));
        let example = JobSpec::new(Rw::RandRead, 4096, 1, 1);
        let tests = expand_preset(p.name, Some(&example), false, p.defaults.size)
            .expect("built-in presets expand");
        if !p.shaped_by_options {
            let mut line = String::from("  tests:");
            for t in &tests {
                let item = format!(
                    " {} ({} bs={} iodepth={} numjobs={});",
                    t.name,
                    t.job.rw,
                    iolab_spec::format_size_short(t.job.bs),
                    t.job.iodepth,
                    t.job.numjobs
                );
                if line.chars().count() + item.chars().count() > presets_width() {
                    out.push_str(&line);
                    out.push('\n');
                    line = String::from("        ");
                }
                line.push_str(&item);
            }
            out.push_str(&line);
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str("Options: --mix adds CrystalDiskMark's 70/30 read/write mix test to cdm rows.\n");
    out.push_str("\nWorkloads (iolab run NAME --target DIR; see docs/workloads.md):\n");
    // The presets are listed above.
    for (name, summary) in workloads
        .iter()
        .filter(|(n, _)| iolab_spec::preset_info(n).is_none())
    {
        out.push_str(&format!("{name}\n"));
        out.push_str(&indented(summary));
    }
    out
}
