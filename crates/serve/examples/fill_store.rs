//! bench/serve.sh's store: `fill_store SRC_DB RUN_ID DEST_DB N` stores N copies of run
//! RUN_ID of SRC_DB into DEST_DB through the store's own write path (`Store::save_run`),
//! each with a new uuid, one of 500 labels (`bench-K`, 20 runs each at N = 10,000), one of
//! 8 hosts (`host-K`), a start time spread over a year, and its throughput scaled by a
//! few percent so that compares and histories have something to judge.

use iolab_store::Store;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: fill_store SRC_DB RUN_ID DEST_DB N");
        std::process::exit(2);
    }
    let (Ok(id), Ok(n)) = (args[2].parse::<i64>(), args[4].parse::<usize>()) else {
        eprintln!("fill_store: RUN_ID and N must be numbers");
        std::process::exit(2);
    };
    let src = Store::open_read_only(args[1].as_ref()).unwrap_or_else(|e| fail(e));
    let base = src.load_run(id).unwrap_or_else(|e| fail(e));
    drop(src);
    let mut dest = Store::open(args[3].as_ref()).unwrap_or_else(|e| fail(e));
    let start = std::time::Instant::now();
    for i in 0..n {
        let mut r = base.clone();
        r.id = None;
        r.uuid = uuid::Uuid::new_v4().to_string();
        r.label = Some(format!("bench-{}", i % 500));
        if let Some(env) = r.env.as_object_mut() {
            env.insert("hostname".into(), format!("host-{}", i % 8).into());
        }
        r.started_at = format!(
            "2025-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            1 + (i * 12 / n.max(1)) % 12,
            1 + (i % 28),
            (i / 28) % 24,
            (i / 7) % 60,
            i % 60
        );
        // 0.95 to 1.05, the same for every pass of the copy.
        let f = 0.95 + (i * 7919 % 101) as f64 / 1000.0;
        for t in &mut r.tests {
            for p in &mut t.passes {
                p.mb_s *= f;
                p.iops *= f;
            }
            t.summary.mb_s *= f;
            t.summary.iops *= f;
            for m in [&mut t.summary.stats_mb_s, &mut t.summary.stats_iops] {
                for v in [&mut m.median, &mut m.mean, &mut m.min, &mut m.max] {
                    *v *= f;
                }
                m.stddev *= f;
                m.ci_low *= f;
                m.ci_high *= f;
            }
        }
        dest.save_run(&r).unwrap_or_else(|e| fail(e));
        if (i + 1) % 1000 == 0 {
            eprintln!(
                "fill_store: {} runs, {:.1} s",
                i + 1,
                start.elapsed().as_secs_f64()
            );
        }
    }
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("fill_store: {e}");
    std::process::exit(1);
}
