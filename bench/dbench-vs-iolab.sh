#!/usr/bin/env bash
# dbench itself against iolab's replay of the same loadfile: same directory, same client
# count, same time (and so the same warm-up, time/5), run alternately REPEATS times each.
# Prints every run's MB/s, the medians and the iolab/dbench ratio (target: within ±15%).
#
#   bench/dbench-vs-iolab.sh [DIR]
#
# DIR (default: a fresh directory under /var/tmp, removed at the end) must not already hold
# a clients/ directory. Settings from the environment:
#   CLIENTS=2  TIME=15  REPEATS=3  LOADFILE=/usr/share/dbench/client.txt
#   IOLAB_DBENCH_CMD  how to run iolab's replay; the script appends
#                     "--clients N --time T --loadfile F --target DIR --no-store --json -",
#                     e.g. IOLAB_DBENCH_CMD="target/release/iolab run dbench".
#                     Unset: the crate's example, via
#                     cargo run --release -p iolab-workloads --example dbench_replay
# Needs dbench (apt-get install dbench); python3 only with IOLAB_DBENCH_CMD (to read JSON).
set -euo pipefail

CLIENTS=${CLIENTS:-2}
TIME=${TIME:-15}
REPEATS=${REPEATS:-3}
LOADFILE=${LOADFILE:-/usr/share/dbench/client.txt}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "dbench-vs-iolab: $*" >&2; exit 2; }
command -v dbench >/dev/null || die "needs dbench (apt-get install dbench)"
[ -r "$LOADFILE" ] || die "loadfile $LOADFILE not readable (set LOADFILE=...)"
case $TIME in *[!0-9]*|"") die "TIME must be whole seconds (dbench's -t)";; esac
[ "$TIME" -ge 5 ] || die "TIME must be at least 5 s (dbench's warm-up is TIME/5 whole seconds)"

MADE_DIR=""
if [ $# -ge 1 ]; then
  DIR=$(cd "$1" && pwd)
else
  DIR=$(mktemp -d /var/tmp/iolab-dbench.XXXXXX)
  MADE_DIR=$DIR
fi
[ -e "$DIR/clients" ] && die "$DIR/clients already exists; remove it or pick another directory"
LOG=$(mktemp /tmp/dbench-vs-iolab.XXXXXX.log)

cleanup() {
  set +e
  trap - EXIT INT TERM
  # dbench 4.0 leaves its (empty) client directories behind; iolab removes its own.
  rm -rf "$DIR/clients"
  [ -n "$MADE_DIR" ] && rm -rf "$MADE_DIR"
}
trap cleanup EXIT INT TERM

if [ -z "${IOLAB_DBENCH_CMD:-}" ]; then
  echo "building the replay example (release)..."
  (cd "$ROOT" && cargo build --release -q -p iolab-workloads --example dbench_replay) \
    || die "cargo build of the dbench_replay example failed"
fi

# MB/s from output: dbench's and the example's closing "Throughput X MB/sec" line.
throughput_line() { awk '/^Throughput/ { v = $2 } END { if (v == "") exit 1; print v }'; }

# MB/s from iolab's JSON (iolab.run/1): the dbench result in the test's extra, else the
# test's headline.
throughput_json() {
  python3 -c '
import json, sys
test = json.load(sys.stdin)["tests"][0]
extra = test.get("extra") or {}
for v in (extra.get("throughput_mb_s"), extra.get("mb_s"), test["summary"]["mb_s"]):
    if isinstance(v, (int, float)):
        print(v)
        sys.exit(0)
sys.exit("no MB/s in the JSON")'
}

run_dbench() {
  dbench -D "$DIR" -t "$TIME" -c "$LOADFILE" "$CLIENTS" >"$LOG" 2>&1 \
    || { cat "$LOG" >&2; die "dbench failed"; }
  throughput_line <"$LOG" || { cat "$LOG" >&2; die "no Throughput line from dbench"; }
  rm -rf "$DIR/clients"
}

run_iolab() {
  if [ -n "${IOLAB_DBENCH_CMD:-}" ]; then
    # shellcheck disable=SC2086 # the command is meant to be split into words
    $IOLAB_DBENCH_CMD --clients "$CLIENTS" --time "$TIME" --loadfile "$LOADFILE" \
      --target "$DIR" --no-store --json - >"$LOG" 2>/dev/null \
      || { cat "$LOG" >&2; die "iolab failed: $IOLAB_DBENCH_CMD"; }
    throughput_json <"$LOG" || { cat "$LOG" >&2; die "no MB/s in iolab's JSON"; }
  else
    (cd "$ROOT" && cargo run --release -q -p iolab-workloads --example dbench_replay -- \
      "$DIR" "$CLIENTS" "$TIME" "$LOADFILE") >"$LOG" 2>/dev/null \
      || { cat "$LOG" >&2; die "the dbench_replay example failed"; }
    throughput_line <"$LOG" || { cat "$LOG" >&2; die "no Throughput line from the replay"; }
  fi
  [ ! -e "$DIR/clients" ] || die "iolab left $DIR/clients behind"
}

# Each run starts with no dirty pages from the one before.
settle() { sync; sleep 2; }

echo "dbench vs iolab replay: $CLIENTS clients, ${TIME}s (+$((TIME / 5))s warm-up), $REPEATS runs each"
echo "loadfile $LOADFILE, directory $DIR ($(df -PT "$DIR" | awk 'NR==2 { print $2 }'))"
D=()
I=()
for r in $(seq "$REPEATS"); do
  settle
  d=$(run_dbench)
  D+=("$d")
  printf 'run %d  dbench %10.2f MB/s\n' "$r" "$d"
  settle
  i=$(run_iolab)
  I+=("$i")
  printf 'run %d  iolab  %10.2f MB/s\n' "$r" "$i"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
MD=$(median "${D[@]}")
MI=$(median "${I[@]}")
awk -v d="$MD" -v i="$MI" 'BEGIN {
  r = i / d
  printf "median  dbench %10.2f MB/s  iolab %10.2f MB/s  ratio iolab/dbench %.3f  %s\n",
    d, i, r, (r >= 0.85 && r <= 1.15) ? "(within ±15%)" : "(OUTSIDE ±15%)"
}'
