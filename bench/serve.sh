#!/usr/bin/env bash
# `iolab serve` on a store of N runs (default 10,000): how long its pages take to answer
# (docs/serve.md quotes the figures). One real short cdm run is made, copied N times into a
# new store through the store's write path (crates/serve/examples/fill_store.rs: 500
# labels of N/500 runs, 8 hosts, a year of start times), and served on a free loopback
# port; each page is asked REQS times (default 20) with curl, one request at a time, and
# its median and slowest time printed as a Markdown table.
#
# Usage: bench/serve.sh   (N, REQS; STORE=DB serves a store made before, of N runs,
# instead of making one; IOLAB and FILL name the binaries, by default the
# release builds in target/, built when missing). The store is made under /dev/shm when it
# exists (fsync-free, so that the 10,000 runs take seconds to store), else /var/tmp; all
# of it is removed on exit, error or Ctrl-C. Needs curl.
set -euo pipefail

N=${N:-10000}
REQS=${REQS:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
IOLAB=${IOLAB:-$TARGET/release/iolab}
FILL=${FILL:-$TARGET/release/examples/fill_store}

die() { echo "serve bench: $*" >&2; exit 2; }
command -v curl >/dev/null || die "needs curl"
if [ ! -x "$IOLAB" ]; then (cd "$ROOT" && cargo build --release -q -p iolab) || die "build failed"; fi
if [ ! -x "$FILL" ]; then
  (cd "$ROOT" && cargo build --release -q -p iolab-serve --example fill_store) || die "build failed"
fi

BASE=/var/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && BASE=/dev/shm
WORK=$(mktemp -d "$BASE/iolab-serve-bench.XXXXXX")
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir "$WORK/t"
export XDG_DATA_HOME=$WORK HOME=$WORK IOLAB_STATE_DIR=$WORK/state

DB=${STORE:-$WORK/r.db}
if [ -z "${STORE:-}" ]; then
  echo "one real run (cdm, 8 MiB, 2 passes of 150 ms a test)..."
  "$IOLAB" run cdm --size 8MiB --runs 2 --duration 150ms --warmup 0 --target "$WORK/t" \
    --db "$WORK/src.db" --quiet >/dev/null
  echo "storing $N copies..."
  t0=$(date +%s.%N)
  "$FILL" "$WORK/src.db" 1 "$DB" "$N" 2>/dev/null
  t1=$(date +%s.%N)
  printf "stored %d runs in %.1f s (%s MiB)\n" "$N" "$(echo "$t1 - $t0" | bc)" \
    "$(( $(stat -c %s "$DB") / 1048576 ))"
fi

"$IOLAB" serve --db "$DB" --listen 127.0.0.1:0 >"$WORK/serve.out" 2>/dev/null &
SERVER=$!
for _ in $(seq 1 200); do grep -q '^open http' "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[0-9.:]*' "$WORK/serve.out") || die "serve did not start"

# The median and the slowest of REQS answers of one page (ms), each checked to be 200.
measure() {
  local path=$1 times=() code t
  for _ in $(seq 1 "$REQS"); do
    read -r code t < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$URL$path")
    [ "$code" = 200 ] || die "$path answered $code"
    times+=("$t")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v p="$path" '
    { v[NR] = $1 * 1000 }
    END { printf "| `%s` | %.0f | %.0f |\n", p, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR] }'
}

A=$((N / 2)); B=$((N / 2 + 1))
echo
echo "$N runs, $REQS requests a page, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg):"
echo
echo "| page | median ms | slowest ms |"
echo "|:--|--:|--:|"
measure "/runs"
measure "/runs?page=$(( (N / 50 + 1) / 2 ))"
measure "/runs?label=bench-7"
measure "/runs?host=host-3&from=2025-03-01&to=2025-03-31"
measure "/compare?run=$A&run=$B"
measure "/compare?label=bench-1&label=bench-2"
measure "/run/$A"
measure "/history?run=$A"
measure "/history"
measure "/studies"
