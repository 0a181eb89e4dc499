//! `iolab ab CMD_A -- CMD_B`: both commands checked by `iolab run`'s registry before any
//! run; the alternating runs and the judging are iolab-study's (`iolab_study::ab`).

use iolab_runner::RunError;

use crate::args::AbArgs;

pub fn ab(args: AbArgs) -> Result<(), RunError> {
    let Some(cut) = args.command.iter().position(|a| a == "--") else {
        return Err(RunError::usage(
            "ab needs two commands: `iolab ab [OPTIONS] WORKLOAD [ARGS] -- WORKLOAD [ARGS]` \
             (no `--` between A's and B's command)",
        ));
    };
    // `run cdm ...` and `cdm ...` alike: the words after `iolab run`.
    let side = |v: &[String]| -> Vec<String> {
        let v = if v.first().is_some_and(|w| w == "run") {
            &v[1..]
        } else {
            v
        };
        v.to_vec()
    };
    let (a, b) = (side(&args.command[..cut]), side(&args.command[cut + 1..]));
    let reg = crate::run_cmd::registry();
    iolab_study::ab::check(&reg, "A", &a)?;
    iolab_study::ab::check(&reg, "B", &b)?;
    if args.label_a == args.label_b {
        return Err(RunError::usage(format!(
            "--label-a and --label-b are both '{}': each side needs its own label",
            args.label_a
        )));
    }
    let opts = iolab_study::ab::AbOptions {
        a,
        b,
        label_a: args.label_a,
        label_b: args.label_b,
        margin_pct: args.margin.unwrap_or(iolab_report::set::DEFAULT_MARGIN_PCT),
        budget: args.budget,
        max_runs: args.max_runs.unwrap_or(iolab_study::ab::DEFAULT_MAX_RUNS),
        db_given: args.db.db.is_some(),
        db: args.db.db.unwrap_or_else(iolab_store::default_db_path),
        json: args.json,
    };
    iolab_study::ab::execute(&opts)
}
