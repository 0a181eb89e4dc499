# Shared by bench/aa.sh and bench/verdicts.sh (sourced, not run): the binary, a work
# directory removed on exit, error or Ctrl-C, runs retried on a busy machine, loop devices
# over memory under blkio read throttles, and Wilson intervals.
#
#   bench_init NAME   IOLAB (default the release build), WORK (a new directory under
#                     /var/tmp), DB, the cleanup trap; `die` prefixes NAME.
#   run ARGS...       `iolab run ARGS --db $DB --quiet`, tried three times; prints the id.
#   need_blkio PART   false (with a line saying why) without root and cgroup-v1 blkio.
#   memory_loop MIB   LOOP: a direct-I/O loop device over an image of MIB MiB on the
#                     /dev/shm tmpfs, so no disk writer beside the bench slows its backing
#                     file and a throttle is its only limit; MAJMIN its numbers (each call
#                     makes another; all are removed at the end).
#   read_cgroup RATE  a blkio cgroup reading $LOOP at RATE MiB/s (fractions allowed).
#   throttled RATE ARGS...  `iolab run ARGS --db $DB --quiet` inside that cgroup.
#   wilson K N        "K of N (P%, 95% CI L-H%)".

die() { echo "$BENCH: $*" >&2; exit 2; }

bench_init() {
  BENCH=$1
  command -v python3 >/dev/null || die "needs python3"
  IOLAB=${IOLAB:-$(dirname "$0")/../target/release/iolab}
  [ -x "$IOLAB" ] || die "build iolab first: cargo build --release ($IOLAB missing)"
  IOLAB=$(readlink -f "$IOLAB")
  WORK=$(mktemp -d "/var/tmp/iolab-$BENCH.XXXXXX")
  STAMP=$(basename "$WORK")
  DB=$WORK/$BENCH.db
  LOOP=""
  LOOPS=()
  SHMS=()
  LOADER=""
  CGROUPS=()
  trap bench_cleanup EXIT
  # A signal ends the script after cleaning up (a trap alone would carry on).
  trap 'bench_cleanup; exit 130' INT TERM
}

bench_cleanup() {
  set +e
  trap - EXIT INT TERM
  [ -n "$LOADER" ] && kill "$LOADER" 2>/dev/null && wait "$LOADER" 2>/dev/null
  for cg in "${CGROUPS[@]}"; do rmdir "$cg" 2>/dev/null; done
  for lo in "${LOOPS[@]}"; do
    for _ in 1 2 3 4 5; do losetup -d "$lo" 2>/dev/null && break; sleep 1; done
  done
  for d in "${SHMS[@]}"; do rm -rf "$d"; done
  rm -rf "$WORK"
}

# A run that fails is tried again (twice, 10 s apart): on a shared machine another
# program's tests may switch io_uring off for a moment.
run() {
  local out
  for try in 1 2 3; do
    if out=$("$IOLAB" run "$@" --db "$DB" --quiet); then
      sed -n 's/^stored as run \([0-9]*\).*/\1/p' <<< "$out"
      return 0
    fi
    echo "$BENCH: run failed (try $try), again in 10 s" >&2
    sleep 10
  done
  die "iolab run $* failed 3 times"
}

need_blkio() {
  if [ "$(id -u)" != 0 ] || [ ! -e /sys/fs/cgroup/blkio/cgroup.procs ]; then
    echo "($1) skipped: needs root and a cgroup-v1 blkio hierarchy"
    return 1
  fi
}

memory_loop() {
  local shm
  shm=$(mktemp -d /dev/shm/iolab-bench.XXXXXX)
  SHMS+=("$shm")
  dd if=/dev/zero of="$shm/disk.img" bs=1M count="$1" status=none conv=fsync
  LOOP=$(losetup -f --show --direct-io=on "$shm/disk.img")
  LOOPS+=("$LOOP")
  MAJMIN=$(cat "/sys/block/$(basename "$LOOP")/dev")
}

read_cgroup() {
  local cg=/sys/fs/cgroup/blkio/iolab-$BENCH-$1-$STAMP
  mkdir "$cg"
  CGROUPS+=("$cg")
  echo "$MAJMIN $(python3 -c "print(round($1 * 1048576))")" > "$cg/blkio.throttle.read_bps_device"
}

throttled() {
  local r=$1; shift
  for try in 1 2 3; do
    sh -c 'echo $$ > "$1" && shift && exec "$@"' sh \
      "/sys/fs/cgroup/blkio/iolab-$BENCH-$r-$STAMP/cgroup.procs" \
      "$IOLAB" run "$@" --db "$DB" --quiet > /dev/null && return 0
    echo "$BENCH: run failed (try $try), again in 10 s" >&2
    sleep 10
  done
  die "iolab run $* failed 3 times"
}

wilson() {
  python3 -c '
import math, sys
k, n = int(sys.argv[1]), int(sys.argv[2])
z = 1.959964; p = k / n
c = (p + z*z/(2*n)) / (1 + z*z/n); h = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n)) / (1 + z*z/n)
print(f"{k} of {n} ({100*p:.0f}%, 95% CI {100*max(0,c-h):.0f}-{100*min(1,c+h):.0f}%)")' "$1" "$2"
}

# The throttled workload of the power parts: 128 KiB sequential reads, queue depth 4,
# three 500 ms passes after a 200 ms ramp, on $LOOP.
thr_run() {
  THR_RUN=(custom --rw read --bs 128k --iodepth 4 --size 32MiB --runs 3 --duration 500ms
           --ramp 200ms --warmup 0 --target "$LOOP" --allow-destroy-device)
}
