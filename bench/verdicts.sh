#!/usr/bin/env bash
# The three verdicts of `iolab compare` and `iolab study --until-decided`, measured on real
# runs (docs/statistics.md quotes the figures).
#
#   (a) A/A of cdm: 2×CDM_PAIRS identical `cdm --size 64MiB --runs 3 --duration 200ms`
#       runs on a directory of the disk DIR is on, compared in disjoint pairs with
#       `iolab compare A B` (one run a side, tested against the noise of the other runs of
#       the command); counts the pairs with any line *different*, and the lines *same* and
#       *undecided*.
#   (b) The batch effect: 3 runs of a randread command while a `dd` loop writes the same
#       disk, then 3 runs with the disk quiet; `iolab compare --label loaded --label quiet`:
#       how many lines are *different*, and which confounds they name.
#   (c) Power (root, cgroup-v1 blkio): TRIALS times, 3 runs at 20 MiB/s, 3 at 24 MiB/s and
#       3 at 20.4 MiB/s, interleaved, on a loop device over memory (/dev/shm); 20 vs 24
#       should be *different*, 20 vs 20.4 with --margin 5 *same*.
#   (d) A study of four throttled loop devices (26, 26, 22 and 20 MiB/s, 128 KiB reads,
#       images under /var/tmp, or IMAGE_DIR), D_TRIALS times: `--until-decided` in a new
#       study, twice (the second invocation has the first's runs as the configurations'
#       spread), then the fixed schedule with each `repeats` of FIXED_REPEATS in new
#       studies; the wall time, rounds, where the race's time went, and whether the
#       report gave the answer (26a and 26b ranks 1-2 *same*, 22 rank 3, 20 rank 4);
#       with D_LOAD=1, while a dd loop writes the disk the images are on. Passes of
#       D_DURATION (500ms) after D_RAMP (200ms); the races with --budget D_BUDGET (10m).
#   (e) `iolab ab` (root): AB_TRIALS times, `iolab ab` of the throttled workload of (c) on
#       two loop devices over memory read at 20 and 24 MiB/s by one cgroup (A/B), and on
#       the 20 MiB/s device against itself (A/A): the verdict, the pairs it took, the time.
#
# Usage: bench/verdicts.sh [DIR]. CDM_PAIRS (default 12), TRIALS (default 20),
# FIXED_REPEATS (default "1 2 3"), D_TRIALS (default 3), IMAGE_DIR, D_LOAD, D_DURATION, D_RAMP,
# D_BUDGET, AB_TRIALS (default 10), PARTS (default "a b c d e"). IOLAB: the binary (default the
# release build). Needs python3; (c) and (d) need root and /sys/fs/cgroup/blkio.
# Everything it creates is removed on exit, error or Ctrl-C (bench/lib.sh).
set -euo pipefail

CDM_PAIRS=${CDM_PAIRS:-12}
TRIALS=${TRIALS:-20}
FIXED_REPEATS=${FIXED_REPEATS:-1 2 3}
D_TRIALS=${D_TRIALS:-3}
D_DURATION=${D_DURATION:-500ms}
D_RAMP=${D_RAMP:-200ms}
D_BUDGET=${D_BUDGET:-10m}
AB_TRIALS=${AB_TRIALS:-10}
PARTS=${PARTS:-a b c d e}
part() { [[ " $PARTS " == *" $1 "* ]]; }
. "$(dirname "$0")/lib.sh"
bench_init verdicts
DIR=${1:-$WORK/dir}
mkdir -p "$DIR"

# Every line of side B of a comparison document: test, metric, verdict, confounds.
LINES='
import json, sys
doc = json.load(open(sys.argv[1]))
for t in doc["tests"]:
    for m, cells in t["metrics"].items():
        c = cells[1]
        print(json.dumps({"test": t["name"], "metric": m, "verdict": c["verdict"],
                          "change": c["change_pct"], "ci": c["ratio_ci95"],
                          "runs_needed": c["runs_needed"],
                          "confounded_by": [x["code"] for x in (c["confounded_by"] or [])]}))
'

if part a; then
  CDM_RUN=(cdm --size 64MiB --runs 3 --duration 200ms)
  echo "(a) A/A of cdm: $((2 * CDM_PAIRS)) runs of: iolab run ${CDM_RUN[*]} --target $DIR"
  ids=()
  start=$(date +%s)
  for _ in $(seq 1 $((2 * CDM_PAIRS))); do ids+=("$(run "${CDM_RUN[@]}" --target "$DIR")"); done
  echo "  $(( $(date +%s) - start )) s for $((2 * CDM_PAIRS)) runs"
  flagged=0
  : > "$WORK/aa-lines"
  for ((k = 0; k < 2 * CDM_PAIRS; k += 2)); do
    "$IOLAB" compare "${ids[k]}" "${ids[k + 1]}" --json --db "$DB" > "$WORK/c.json"
    python3 -c "$LINES" "$WORK/c.json" > "$WORK/l"
    cat "$WORK/l" >> "$WORK/aa-lines"
    if grep -q '"verdict": "different"' "$WORK/l"; then
      flagged=$((flagged + 1))
      echo "  pair ${ids[k]} vs ${ids[k + 1]}: $(grep '"different"' "$WORK/l" | tr '\n' ' ')"
    fi
  done
  echo "  pairs with any line different: $(wilson "$flagged" "$CDM_PAIRS")"
  python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for l in lines:
    by[l["verdict"]] = by.get(l["verdict"], 0) + 1
need = sorted(l["runs_needed"] for l in lines if l["runs_needed"])
med = need[len(need) // 2] if need else None
print(f"  lines: {len(lines)}; " + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
      + (f"; runs a side needed by undecided lines: median {med}" if med else ""))' "$WORK/aa-lines"
  # What a person sees: the compare of the first pair, as printed.
  "$IOLAB" compare "${ids[0]}" "${ids[1]}" --db "$DB" > "$WORK/screen.txt"
  echo "  the terminal compare of one pair: $(wc -l < "$WORK/screen.txt") lines, widest \
$(awk '{ if (length($0) > w) w = length($0) } END { print w }' "$WORK/screen.txt") columns"
  # Two labels of three runs each: the screen a label compare shows.
  for l in x y x y x y; do run "${CDM_RUN[@]}" --target "$DIR" --label "cdm-$l" > /dev/null; done
  "$IOLAB" compare --label cdm-x --label cdm-y --db "$DB" > "$WORK/screen2.txt"
  echo "  the terminal compare of two cdm labels (3 runs each): $(wc -l < "$WORK/screen2.txt") \
lines, widest $(awk '{ if (length($0) > w) w = length($0) } END { print w }' "$WORK/screen2.txt") columns"
  cat "$WORK/screen2.txt"
fi

if part b; then
  B_RUN=(custom --rw randread --bs 4k --iodepth 4 --size 64MiB --runs 3 --duration 300ms
         --target "$DIR")
  echo "(b) batch effect: 3 runs of iolab run ${B_RUN[*]} under a dd write loop, then 3 quiet"
  ( while :; do dd if=/dev/zero of="$WORK/load" bs=1M count=256 oflag=direct status=none; done ) &
  LOADER=$!
  sleep 2
  for _ in 1 2 3; do run "${B_RUN[@]}" --label loaded > /dev/null; done
  kill "$LOADER"; wait "$LOADER" 2>/dev/null || true; LOADER=""
  rm -f "$WORK/load"
  sleep 5
  for _ in 1 2 3; do run "${B_RUN[@]}" --label quiet > /dev/null; done
  "$IOLAB" compare --label loaded --label quiet --json --db "$DB" > "$WORK/c.json"
  python3 -c "$LINES" "$WORK/c.json" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
diff = [l for l in lines if l["verdict"] == "different"]
clean = [l for l in diff if not l["confounded_by"]]
print(f"  lines: {len(lines)}; different: {len(diff)}, of which clean (no confound): {len(clean)}")
for l in diff:
    m, ch, cb = l["metric"], l["change"], l["confounded_by"]
    print(f"    {m}: {ch:+.1f}%, confounded by {cb}")'
  "$IOLAB" compare --label loaded --label quiet --db "$DB" | sed 's/^/  | /'
fi

if part c && need_blkio c; then
  echo "(c) power: $TRIALS trials of 3 runs at 20, 24 and 20.4 MiB/s, interleaved"
  memory_loop 64
  for r in 20 24 20.4; do read_cgroup "$r"; done
  thr_run
  step=0; same=0
  for t in $(seq 1 "$TRIALS"); do
    for _ in 1 2 3; do
      throttled 20 "${THR_RUN[@]}" --label "p$t-20"
      throttled 24 "${THR_RUN[@]}" --label "p$t-24"
      throttled 20.4 "${THR_RUN[@]}" --label "p$t-20.4"
    done
    v=$("$IOLAB" compare --label "p$t-20" --label "p$t-24" --json --db "$DB" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tests"][0]["metrics"]["mb_s"][1]["verdict"])')
    [ "$v" = different ] && step=$((step + 1))
    w=$("$IOLAB" compare --label "p$t-20" --label "p$t-20.4" --margin 5 --json --db "$DB" |
        python3 -c 'import json,sys; t=json.load(sys.stdin)["tests"][0]["metrics"]["mb_s"]; c=t[1]; print(c["verdict"], round(c["change_pct"],2), c["ratio_ci95"], t[0]["run_values"], c["run_values"], c["evidence"].get("method"))')
    [ "${w%% *}" = same ] && same=$((same + 1))
    echo "  trial $t: 20 vs 24: $v; 20 vs 20.4 (--margin 5): $w"
  done
  echo "  20 vs 24 MiB/s different: $(wilson "$step" "$TRIALS")"
  echo "  20 vs 20.4 MiB/s same within ±5%: $(wilson "$same" "$TRIALS")"
fi

if part d && need_blkio d; then
  echo "(d) a study of four throttled loop devices: 26, 26, 22, 20 MiB/s, $D_TRIALS trials"
  # study NAME REPEATS: the study file (images in IMAGE_DIR when it is set).
  study() {
    cat <<EOF
name = "$1"
repeats = $2
order = "interleaved"
[testbed]
kind = "loop"
size = "64MiB"
direct_io = true
${IMAGE_DIR:+image_dir = \"$IMAGE_DIR\"}
[[config]]
label = "26a"
testbed = { throttle = { read_bps = "26MiB" } }
[[config]]
label = "26b"
testbed = { throttle = { read_bps = "26MiB" } }
[[config]]
label = "22"
testbed = { throttle = { read_bps = "22MiB" } }
[[config]]
label = "20"
testbed = { throttle = { read_bps = "20MiB" } }
[[workload]]
kind = "custom"
rw = "read"
bs = "128k"
iodepth = 4
size = "32MiB"
runs = 3
duration = "$D_DURATION"
ramp = "$D_RAMP"
warmup = 0
EOF
  }
  # The answer of a study's report: ok when 26a and 26b share ranks 1-2 as *same*, 22 is
  # rank 3 and 20 rank 4 (adjacent pairs same, different, different); else what it said.
  ANSWER='
import json, sys
d = json.load(sys.stdin)
ranks = {r["label"]: r["rank_text"] for r in d["score"]["ranked"]}
adj = [a["verdict"] for a in d["score"]["adjacent"]]
runs = {c["label"]: len(c["run_ids"]) for c in d["configurations"]}
ok = (ranks == {"26a": "1-2", "26b": "1-2", "22": "3", "20": "4"}
      and adj == ["same", "different", "different"])
print(("ok:" if ok else "NOT the answer:"), "ranks", " ".join(f"{k} {v}" for k, v in ranks.items()),
      "; pairs", ", ".join(adj), "; runs", " ".join(f"{k} {v}" for k, v in runs.items()))'
  # one NAME REPEATS WHAT [STUDY OPTIONS]: runs the study, prints its time and answer (and
  # for a race, its rounds and where its time went).
  one() {
    local name=$1 what=$3 start end
    study "${name%-again}" "$2" > "$WORK/$name.toml"
    shift 3
    start=$(date +%s.%N)
    IOLAB_STATE_DIR=$WORK/state "$IOLAB" study "$WORK/$name.toml" --db "$DB" "$@" \
      > "$WORK/$name.txt" 2> "$WORK/$name.err" || { cat "$WORK/$name.err"; die "study $name failed"; }
    end=$(date +%s.%N)
    echo "  $what: $(python3 -c "print(f'{$end - $start:.1f}')") s"
    grep -E "^until decided: [0-9]+ round|^until decided: round|not visited|^until decided: the time" \
      "$WORK/$name.txt" | sed 's/^/    | /' || true
    echo "    $("$IOLAB" report --study "${name%-again}" --db "$DB" --json - | python3 -c "$ANSWER")"
  }
  if [ -n "${D_LOAD:-}" ]; then
    # The images' disk kept busy, as other work on the machine would: a run then waits for
    # its image behind the writes now and then, and comes out off its cap.
    echo "  with a dd oflag=direct write loop on the disk of the images (/var/tmp)"
    ( while :; do dd if=/dev/zero of="$WORK/load" bs=1M count=256 oflag=direct status=none; done ) &
    LOADER=$!
  fi
  echo "  load average $(cut -d' ' -f1 /proc/loadavg)"
  for t in $(seq 1 "$D_TRIALS"); do
    # A new study each trial: the first invocation has no earlier runs as the spread.
    one "race-$t-until" 1 "trial $t --until-decided, first invocation" --until-decided \
      --budget "$D_BUDGET"
    one "race-$t-until-again" 1 "trial $t --until-decided, again (same store)" --until-decided \
      --budget "$D_BUDGET"
    for r in $FIXED_REPEATS; do
      one "race-$t-fixed$r" "$r" "trial $t fixed repeats = $r"
    done
  done
  echo "  load average $(cut -d' ' -f1 /proc/loadavg)"
  if [ -n "$LOADER" ]; then kill "$LOADER"; wait "$LOADER" 2>/dev/null || true; LOADER=""; fi
fi

if part e && need_blkio e; then
  echo "(e) iolab ab: $AB_TRIALS trials of 20 vs 24 MiB/s and of 20 vs 20 MiB/s"
  memory_loop 64; SLOW=$LOOP; SLOW_MM=$MAJMIN
  memory_loop 64; FAST=$LOOP; FAST_MM=$MAJMIN
  cg=/sys/fs/cgroup/blkio/iolab-$BENCH-ab-$STAMP
  mkdir "$cg"
  CGROUPS+=("$cg")
  echo "$SLOW_MM $((20 * 1048576))" > "$cg/blkio.throttle.read_bps_device"
  echo "$FAST_MM $((24 * 1048576))" > "$cg/blkio.throttle.read_bps_device"
  LOOP=$SLOW; thr_run; A_RUN=("${THR_RUN[@]}")
  LOOP=$FAST; thr_run; B_RUN=("${THR_RUN[@]}")
  ab() {
    sh -c 'echo $$ > "$1" && shift && exec "$@"' sh "$cg/cgroup.procs" \
      "$IOLAB" ab --db "$DB" --json - "$@" 2> /dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); c=d["tests"][0]["metrics"]["mb_s"][1]; a=d["ab"]
print(c["verdict"], len(a["run_ids"]["a"]), round(a["seconds"]))'
  }
  diff=0; same=0
  for t in $(seq 1 "$AB_TRIALS"); do
    v=$(ab --max-runs 6 --label-a "e$t-20" --label-b "e$t-24" "${A_RUN[@]}" -- "${B_RUN[@]}")
    [ "${v%% *}" = different ] && diff=$((diff + 1))
    w=$(ab --max-runs 6 --label-a "e$t-x" --label-b "e$t-y" "${A_RUN[@]}" -- "${A_RUN[@]}")
    [ "${w%% *}" = same ] && same=$((same + 1))
    echo "  trial $t: 20 vs 24: $v; 20 vs 20: $w   (verdict, runs a side, seconds)"
  done
  echo "  ab 20 vs 24 MiB/s different: $(wilson "$diff" "$AB_TRIALS")"
  echo "  ab 20 vs 20 MiB/s same: $(wilson "$same" "$AB_TRIALS")"
fi
