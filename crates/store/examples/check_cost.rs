//! What the check before writing costs: `cargo run --release -p iolab-store --example
//! check_cost -- DB [RUNS]`. With RUNS, DB (holding at least one run, e.g. from `iolab run
//! cdm --db DB`) is first grown to RUNS runs by storing copies of its runs. Then it times
//! `Store::open` (the check and the open of a writer), `Store::open_read_only`, and a
//! listing, five times each; evict the file from the page cache before a run to see the
//! cold cost (`dd of=DB oflag=nocache conv=notrunc,fdatasync count=0` or vmtouch -e).

use std::path::PathBuf;
use std::time::Instant;

use iolab_store::{RunFilter, Store};

fn main() {
    let mut args = std::env::args().skip(1);
    let db = PathBuf::from(args.next().expect("usage: check_cost DB [RUNS]"));
    if let Some(n) = args.next() {
        let want: usize = n.parse().expect("RUNS is a number");
        let mut store = Store::open(&db).unwrap();
        let listed = store.list_runs(&RunFilter::default()).unwrap();
        assert!(!listed.is_empty(), "{} holds no run to copy", db.display());
        let templates: Vec<_> = listed
            .iter()
            .map(|l| store.load_run(l.id).unwrap())
            .collect();
        for i in listed.len()..want {
            let mut run = templates[i % templates.len()].clone();
            run.uuid = format!("{}-{i}", run.uuid);
            store.save_run(&run).unwrap();
        }
    }
    let size = std::fs::metadata(&db).unwrap().len();
    let runs = Store::open_read_only(&db)
        .unwrap()
        .list_runs(&RunFilter::default())
        .unwrap()
        .len();
    println!("{}: {runs} runs, {} MiB", db.display(), size >> 20);
    let time = |what: &str, f: &dyn Fn()| {
        let mut ms = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            f();
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let shown: Vec<String> = ms.iter().map(|m| format!("{m:.1}")).collect();
        println!("{what:40} {} ms", shown.join(" "));
    };
    time("Store::open (check before writing)", &|| {
        Store::open(&db).unwrap();
    });
    time("Store::open_read_only", &|| {
        Store::open_read_only(&db).unwrap();
    });
    time("list_runs (iolab results)", &|| {
        Store::open_read_only(&db)
            .unwrap()
            .list_runs(&RunFilter::default())
            .unwrap();
    });
}
