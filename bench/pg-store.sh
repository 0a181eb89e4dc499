#!/usr/bin/env bash
# The PostgreSQL store under many writers, and `iolab push` at scale (docs/store.md quotes
# the figures):
#
#   (a) WRITERS processes, each `iolab run ... --repeat RUNS` into one PostgreSQL database
#       at once: every run must be stored once (count, distinct uuids, none incomplete).
#   (b) PUSH runs stored in a local SQLite file (`--repeat PUSH`, each run real but tiny),
#       pushed with `iolab push --all --to URL` twice: the database must then hold PUSH
#       runs; the time of each push is printed.
#
# Usage: bench/pg-store.sh [URL]   With a postgresql:// URL the runs go to that database
# (it must be empty; part (b) uses a second database, URL with "_push" appended to its
# name, which must exist and be empty too). Without one, a throwaway server is started in a
# temporary directory (Debian's postgresql package: initdb and pg_ctl, as uid 65534 when
# run as root, on a unix socket only) and removed on exit.
# WRITERS (default 8), RUNS (default 50) and PUSH (default 1000) set the sizes; PARTS
# (default "a b") picks the parts; IOLAB is the binary (default: target/release/iolab, else
# target/debug/iolab).
set -euo pipefail
cd "$(dirname "$0")/.."

WRITERS=${WRITERS:-8}
RUNS=${RUNS:-50}
PUSH=${PUSH:-1000}
PARTS=${PARTS:-a b}
IOLAB=${IOLAB:-$(ls target/release/iolab 2>/dev/null || echo target/debug/iolab)}
[ -x "$IOLAB" ] || { echo "no iolab binary at $IOLAB (cargo build first)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/iolab-pg-bench.XXXXXX)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
as_pg() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
cleanup() {
  if [ -d "$WORK/data" ]; then as_pg "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf -- "$WORK"
}
trap cleanup EXIT INT TERM

if [ $# -ge 1 ]; then
  URL=$1
  PUSH_URL="${URL%%\?*}_push"
  [ "$URL" = "${URL%%\?*}" ] || PUSH_URL="$PUSH_URL?${URL#*\?}"
else
  [ -n "$PGBIN" ] || { echo "PostgreSQL is not installed (Debian: postgresql)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] && chown 65534:65534 "$WORK"
  chmod 0700 "$WORK"
  as_pg "$PGBIN/initdb" -D "$WORK/data" -U iolab --auth=trust -N >/dev/null
  as_pg "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/log" -w \
    -o "-c listen_addresses='' -k $WORK -c max_connections=100" start >/dev/null
  "$PGBIN/createdb" -h "$WORK" -U iolab bench
  "$PGBIN/createdb" -h "$WORK" -U iolab bench_push
  HOST=$(printf %s "$WORK" | sed 's|/|%2F|g')
  URL="postgresql://iolab@$HOST/bench"
  PUSH_URL="postgresql://iolab@$HOST/bench_push"
fi
TARGET="$WORK/target"
mkdir -p "$TARGET"
# Passes of 500 ms in (a) and 300 ms in (b): on a busy machine a 100 ms pass can be starved
# of its first I/O, and a run with no I/O fails (and ends its --repeat).
RUN=(run custom --rw read --bs 64k --size 1MiB --runs 1 --warmup 0 --quiet --target "$TARGET")

count() { # URL -> "runs distinct-uuids incomplete"
  "$IOLAB" results --db "$1" --json | python3 -c '
import json, sys
runs = json.load(sys.stdin)
print(len(runs), len({r["id"] for r in runs}), sum(1 for r in runs if not r["complete"]))'
}

if [[ " $PARTS " == *" a "* ]]; then
echo "== (a) $WRITERS writers x $RUNS runs into one PostgreSQL database"
start=$(date +%s.%N)
pids=()
for w in $(seq 1 "$WRITERS"); do
  "$IOLAB" "${RUN[@]}" --duration 500ms --repeat "$RUNS" --label "writer$w" --db "$URL" >/dev/null &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
end=$(date +%s.%N)
read -r n distinct incomplete < <(count "$URL")
printf 'stored %s runs (%s distinct ids, %s incomplete) of %s expected in %.1f s; writers failed: %s\n' \
  "$n" "$distinct" "$incomplete" "$((WRITERS * RUNS))" "$(echo "$end - $start" | bc)" "$fail"
for w in $(seq 1 "$WRITERS"); do
  k=$("$IOLAB" results --db "$URL" --label "writer$w" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [ "$k" = "$RUNS" ] || echo "writer$w: $k runs stored, not $RUNS"
done

fi

if [[ " $PARTS " == *" b "* ]]; then
echo "== (b) push of $PUSH local runs, twice"
LOCAL="$WORK/local.db"
"$IOLAB" "${RUN[@]}" --duration 300ms --repeat "$PUSH" --label pushed --db "$LOCAL" >/dev/null
for i in 1 2; do
  start=$(date +%s.%N)
  "$IOLAB" push --all --db "$LOCAL" --to "$PUSH_URL"
  end=$(date +%s.%N)
  printf 'push %s: %.1f s\n' "$i" "$(echo "$end - $start" | bc)"
done
read -r n distinct incomplete < <(count "$PUSH_URL")
echo "the shared database holds $n runs ($distinct distinct ids) after two pushes of $PUSH"
fi
