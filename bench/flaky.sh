#!/usr/bin/env bash
# Which tests fail on a busy (or quiet) machine: runs the whole suite N times, each on a
# fresh clone of this repository's HEAD, and prints every test's failures over the N runs.
#
#   bench/flaky.sh [-n N] [--load] [--keep-going]
#
#   -n N     number of suite runs (default 5)
#   --load   a CPU and disk hog runs beside every suite: `stress-ng --cpu 2 --hdd 1`
#            (Debian's stress-ng; refused without it), started before the clone's build
#            and stopped after its last test
#   LOG_DIR  where each run's full output is kept (default: a new /var/tmp/flaky-logs.*)
#
# Each run is `.ci/run` on the clone (fmt, clippy, every test binary with --no-fail-fast,
# the mpi feature's tests); as root it sets IOLAB_REQUIRE_DEVICE_TESTS=1 as CI does, so a
# skip that CI forbids counts as a failure. The clones share one cargo target directory
# under LOG_DIR, so crates.io dependencies are built once; the workspace itself is built
# again from each clone. The clone, the stress-ng processes and the target directory are
# removed on exit, error or Ctrl-C; the logs are kept.
#
# Output: one line per run (exit status, minutes, failed tests), then a table of every test
# that failed at least once: failures/N, the test binary and the test's name. A test binary
# that crashed without naming a test (a signal, a link error) is listed as BINARY::<binary>.
set -euo pipefail

RUNS=5
LOAD=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS=${2:?-n needs a number}; shift 2 ;;
    --load) LOAD=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "flaky: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$RUNS" in ''|*[!0-9]*|0) echo "flaky: -n wants a positive number, not '$RUNS'" >&2; exit 2 ;; esac

REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ "$LOAD" = 1 ] && ! command -v stress-ng >/dev/null; then
  echo "flaky: --load needs stress-ng (apt-get install stress-ng)" >&2
  exit 2
fi

# Not named iolab-*: `iolab cleanup` treats directories of that name as iolab's own, and
# the suite's trust tests would see the clone inside one. World-searchable, like a checkout
# in a home directory: tests run steps as a second user (nobody) under the clone.
LOG_DIR=${LOG_DIR:-$(mktemp -d /var/tmp/flaky-logs.XXXXXX)}
mkdir -p "$LOG_DIR"
WORK=$(mktemp -d /var/tmp/flaky-work.XXXXXX)
chmod 0755 "$WORK"
HOG_PID=
stop_hog() {
  if [ -n "$HOG_PID" ]; then
    kill -TERM -- "-$HOG_PID" 2>/dev/null || true
    wait "$HOG_PID" 2>/dev/null || true
    HOG_PID=
  fi
}
cleanup() {
  stop_hog
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "flaky: $RUNS runs of the suite on fresh clones of $(git -C "$REPO" rev-parse --short HEAD)$([ "$LOAD" = 1 ] && echo ', beside stress-ng --cpu 2 --hdd 1'); logs in $LOG_DIR"
export CARGO_TARGET_DIR="$WORK/target"
for i in $(seq 1 "$RUNS"); do
  clone="$WORK/clone"
  rm -rf "$clone"
  git clone -q "$REPO" "$clone"
  if [ "$LOAD" = 1 ]; then
    # Its own process group, so the hog's workers stop with it.
    (cd "$WORK" && exec setsid stress-ng --cpu 2 --hdd 1 --hdd-bytes 512M --temp-path "$WORK" --quiet) &
    HOG_PID=$!
  fi
  log="$LOG_DIR/run-$i.log"
  start=$(date +%s)
  set +e
  "$clone/.ci/run" >"$log" 2>&1
  rc=$?
  set -e
  stop_hog
  took=$(( $(date +%s) - start ))
  failed=$(python3 "$REPO/bench/flaky-parse.py" "$log" | tr '\n' ' ')
  # The machine's load over the run: the 15-minute load average at its end (the suite's
  # own processes included).
  load=$(cut -d' ' -f3 /proc/loadavg)
  printf 'run %d: exit %d in %d min %02d s, load average %s; failed: %s\n' "$i" "$rc" \
    $((took / 60)) $((took % 60)) "$load" "${failed:-none}"
done

echo
echo "failures per test over $RUNS runs:"
python3 "$REPO/bench/flaky-parse.py" --table "$RUNS" "$LOG_DIR"/run-*.log
