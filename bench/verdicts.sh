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
#   (d) A study of four throttled loop devices (26, 26, 22 and 20 MiB/s, 128 KiB reads):
#       `--until-decided` from `repeats = 1`, twice (the second invocation has the
#       first's runs as the configurations' spread), then the fixed schedule with
#       `repeats = FIXED_REPEATS` in a new study; the ranks, the verdicts of adjacent pairs
#       and the wall time of each.
#   (e) `iolab ab` (root): AB_TRIALS times, `iolab ab` of the throttled workload of (c) on
#       two loop devices over memory read at 20 and 24 MiB/s by one cgroup (A/B), and on
#       the 20 MiB/s device against itself (A/A): the verdict, the pairs it took, the time.
#
# Usage: bench/verdicts.sh [DIR]. CDM_PAIRS (default 12), TRIALS (default 20),
# FIXED_REPEATS (default 3), AB_TRIALS (default 10), PARTS (default "a b c d e"). IOLAB: the binary (default the
# release build). Needs python3; (c) and (d) need root and /sys/fs/cgroup/blkio.
# Everything it creates is removed on exit, error or Ctrl-C (bench/lib.sh).
set -euo pipefail

CDM_PAIRS=${CDM_PAIRS:-12}
TRIALS=${TRIALS:-20}
FIXED_REPEATS=${FIXED_REPEATS:-3}
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
  echo "(d) a study of four throttled loop devices: 26, 26, 22, 20 MiB/s"
  study() {
    cat <<EOF
name = "race-$1"
repeats = $2
order = "interleaved"
[testbed]
kind = "loop"
size = "64MiB"
direct_io = true
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
duration = "500ms"
ramp = "200ms"
warmup = 0
EOF
  }
  # One repeat in the file: the first invocation needs a second round (no spread yet);
  # the same study again decides on what it needs, with the first's runs as the spread.
  study until 1 > "$WORK/until.toml"
  for inv in first again; do
    start=$(date +%s.%N)
    IOLAB_STATE_DIR=$WORK/state "$IOLAB" study "$WORK/until.toml" --db "$DB" --until-decided \
      --budget 20m > "$WORK/until.txt"
    end=$(date +%s.%N)
    echo "  --until-decided ($inv invocation): $(python3 -c "print(round($end - $start))") s"
    grep -E "^until decided|^  26|^  22|^  20|run\(s\) stored" "$WORK/until.txt" | sed 's/^/  | /'
    grep -E "^\| [0-9-]+ \|" "$WORK/until.txt" | sed 's/^/  | /' || true
  done
  study fixed "$FIXED_REPEATS" > "$WORK/fixed.toml"
  start=$(date +%s.%N)
  IOLAB_STATE_DIR=$WORK/state "$IOLAB" study "$WORK/fixed.toml" --db "$DB" > "$WORK/fixed.txt"
  end=$(date +%s.%N)
  echo "  fixed repeats = $FIXED_REPEATS: $(python3 -c "print(round($end - $start))") s"
  grep -E "run\(s\) stored|^\| [0-9-]+ \|" "$WORK/fixed.txt" | sed 's/^/  | /' || true
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
