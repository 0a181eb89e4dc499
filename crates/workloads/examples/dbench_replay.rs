//! Replays a dbench loadfile without the iolab CLI and prints dbench-style output.
//!
//! `cargo run --release -p iolab-workloads --example dbench_replay -- DIR CLIENTS SECONDS LOADFILE`
//!
//! Progress goes to stderr; stdout gets the operation table and a last line
//! `Throughput X MB/sec N clients` (dbench's own closing line, which scripts parse).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iolab_workloads::dbench::{parse_loadfile, run, DbenchConfig, Phase};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: dbench_replay DIR CLIENTS SECONDS LOADFILE");
        return ExitCode::from(2);
    }
    let (Ok(clients), Ok(secs)) = (args[1].parse::<u32>(), args[2].parse::<f64>()) else {
        eprintln!("dbench_replay: CLIENTS must be a whole number and SECONDS a number");
        return ExitCode::from(2);
    };
    if !(secs > 0.0 && secs.is_finite()) {
        eprintln!("dbench_replay: SECONDS must be more than 0");
        return ExitCode::from(2);
    }
    let cfg = DbenchConfig::new(
        PathBuf::from(&args[0]),
        PathBuf::from(&args[3]),
        clients,
        Duration::from_secs_f64(secs),
    );
    let lf = match parse_loadfile(&cfg.loadfile) {
        Ok(lf) => lf,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let stop = AtomicBool::new(false);
    let res = run(&cfg, &lf, &stop, &mut |p| {
        let phase = match p.phase {
            Phase::Warmup => "warmup ",
            Phase::Measure => "execute",
        };
        eprintln!(
            "{:4}  {:>10} ops  {:7.2} MB/sec  {phase} {:3.0} sec",
            cfg.clients,
            p.ops,
            p.avg_mb_s,
            p.phase_elapsed.as_secs_f64()
        );
    });
    match res {
        Ok(r) => {
            println!();
            print!("{}", r.op_table());
            println!();
            for m in &r.mismatches {
                println!(
                    "mismatch: client {} line {} {} {} expected {} got {}",
                    m.client,
                    m.line,
                    m.op,
                    m.path.as_deref().unwrap_or(""),
                    m.expected,
                    m.got
                );
            }
            for n in &r.notes {
                println!("note: {n}");
            }
            println!(
                "Throughput {:.4} MB/sec  {} clients  {} status mismatches",
                r.mb_s, r.clients, r.status_mismatches
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
