#!/usr/bin/env bash
# What iolab itself costs the user, against fio on the same jobs (issue 17):
#   mem      peak memory (max RSS from wait4, /usr/bin/time -f %M) of
#              - the default run: `iolab run` in an empty directory (cdm) against fio on the
#                job file `iolab export-fio cdm` writes (DEFAULT=1; about 2 minutes each);
#              - a 64-job run: 4K randread QD32 x 64 jobs on one file, against fio --thread
#                (one process, like iolab; without it fio forks 64 processes and max RSS
#                only shows the largest);
#   start    the time from exec (sched:sched_process_exec) to the first io_uring_enter
#            that submits I/O (perf record on the two tracepoints: nothing stops the
#            process, unlike strace), for 4K randread QD32 on an existing 1 GiB file;
#   verify   CPU microseconds per 4K write, buffered randwrite QD32 on a tmpfs file, with
#            and without verification: iolab --verify (per-write stamp + crc32c) against
#            fio verify=crc32c do_verify=0 (the header and checksum, no read-back).
# Every measurement alternates the tools N times (default 5) and prints the median and
# range. Settings: N, WHAT ("mem start verify"), DEFAULT=1 (also the default cdm run),
# IOLAB (the binary). Needs root (mounts a tmpfs), fio, perf, python3 and /usr/bin/time.
# Everything is made under one directory in /var/tmp and removed on exit.
set -euo pipefail

N=${N:-5}
WHAT=${WHAT:-mem start verify}
DEFAULT=${DEFAULT:-0}
IOLAB=$(realpath "${IOLAB:-$(dirname "$0")/../target/release/iolab}")

die() { echo "overheads: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (mounts a tmpfs)"
for t in fio perf python3 bc /usr/bin/time; do command -v "$t" >/dev/null || die "needs $t"; done
[ -x "$IOLAB" ] || die "build iolab first: cargo build --release"

WORK=$(mktemp -d /var/tmp/iolab-overheads.XXXXXX)
cd "$WORK"   # fio writes state files into the working directory
SHM=$WORK/shm
cleanup() {
  set +e
  trap - EXIT INT TERM
  for _ in 1 2 3; do mountpoint -q "$SHM" && ! umount "$SHM" 2>/dev/null && sleep 1; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
export XDG_DATA_HOME=$WORK/xdg   # the default run stores here, not in the user's database
FILE=$WORK/read.dat
dd if=/dev/urandom of="$FILE" bs=1M count=1024 oflag=direct status=none

stats() { # label values...: median [min, max]
  python3 - "$@" <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[2:]]
print("  %-40s median %10.2f  [%.2f, %.2f]  n=%d" % (sys.argv[1], statistics.median(v), min(v), max(v), len(v)))
PY
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
rss_kb() { /usr/bin/time -f %M -o "$WORK/time.out" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; die "failed: $*"; }; cat "$WORK/time.out"; }

echo "overheads: iolab $("$IOLAB" --version | awk '{print $2}'), $(fio --version), kernel $(uname -r), $(nproc) CPUs, N=$N, load $(load)"

READ_IOLAB=(run custom --rw randread --bs 4k --iodepth 32 --target "$FILE" --size 1GiB
  --duration 2s --runs 1 --warmup 0 --ramp 0 --no-store --quiet)
READ_FIO=(--name=r --filename="$FILE" --rw=randread --bs=4k --iodepth=32 --size=1g
  --ioengine=io_uring --direct=1 --time_based --runtime=2 --iodepth_batch_submit=32
  --iodepth_batch_complete_max=32 --fixedbufs --registerfiles --norandommap --randrepeat=0
  --output=/dev/null)

if [[ " $WHAT " == *" mem "* ]]; then
  echo "peak memory (max RSS, MiB); load before: $(load)"
  for jobs in 1 64; do
    a=() b=()
    for i in $(seq "$N"); do
      a+=("$(rss_kb "$IOLAB" "${READ_IOLAB[@]}" --numjobs "$jobs")")
      b+=("$(rss_kb fio "${READ_FIO[@]}" --numjobs="$jobs" --thread --group_reporting)")
    done
    stats "iolab 4K randread QD32 x $jobs jobs" $(printf '%s/1024\n' "${a[@]}" | bc -l)
    stats "fio --thread, same x $jobs jobs" $(printf '%s/1024\n' "${b[@]}" | bc -l)
  done
  if [ "$DEFAULT" = 1 ]; then
    mkdir -p "$WORK/cdm"
    (cd "$WORK/cdm" && "$IOLAB" export-fio cdm >"$WORK/cdm.fio")
    a=$(cd "$WORK/cdm" && rss_kb "$IOLAB" run)
    rm -f "$WORK"/cdm/*.dat
    b=$(rss_kb fio "$WORK/cdm.fio" --output=/dev/null)
    rm -f "$WORK"/cdm/*.dat
    stats "iolab run (default cdm, 1 run)" "$(echo "$a/1024" | bc -l)"
    stats "fio export-fio cdm (1 run)" "$(echo "$b/1024" | bc -l)"
  fi
  echo "  load after: $(load)"
fi

if [[ " $WHAT " == *" start "* ]]; then
  echo "time from exec to the first I/O submitted (ms; perf tracepoints); load before: $(load)"
  first() { # tool args...: sched_process_exec to the first io_uring_enter that submits
    perf record -q -o "$WORK/perf.data" -e sched:sched_process_exec \
      -e syscalls:sys_enter_io_uring_enter -- "$@" >/dev/null 2>"$WORK/err" ||
      { cat "$WORK/err" >&2; die "failed: $*"; }
    perf script -i "$WORK/perf.data" -F time,event,trace 2>/dev/null | python3 -c '
import re, sys
t0 = first = None
for line in sys.stdin:  # read to the end: perf script must not die of a closed pipe
    t = float(line.split(":")[0])
    if t0 is None and "sched_process_exec" in line:
        t0 = t
    m = re.search(r"to_submit: (0x[0-9a-f]+)", line)
    if first is None and t0 is not None and m and int(m.group(1), 16) > 0:
        first = t
print("%.2f" % ((first - t0) * 1000))'
  }
  a=() b=()
  for i in $(seq "$N"); do
    a+=("$(first "$IOLAB" "${READ_IOLAB[@]}")")
    b+=("$(first fio "${READ_FIO[@]}")")
  done
  stats "iolab 4K randread QD32 (existing file)" "${a[@]}"
  stats "fio, same job" "${b[@]}"
  echo "  load after: $(load)"
fi

if [[ " $WHAT " == *" verify "* ]]; then
  echo "CPU us per 4K write, buffered randwrite QD32 on tmpfs (iolab's pass, fio's whole process); load before: $(load)"
  mkdir -p "$SHM"
  mount -t tmpfs -o size=600m tmpfs "$SHM"
  W=$SHM/w.dat
  export W
  dd if=/dev/urandom of="$W" bs=1M count=256 status=none
  iolab_w() {
    "$IOLAB" run custom --rw randwrite --bs 4k --iodepth 32 --target "$W" --size 256MiB \
      --duration 2s --runs 1 --warmup 0 --ramp 0 --buffered --allow-overwrite-file \
      --no-store --quiet --json - "$@" 2>/dev/null |
      python3 -c 'import json,sys; p=json.load(sys.stdin)["tests"][0]["passes"][0]; print("%.3f" % p["cpu"]["cpu_us_per_io"])'
  }
  # fio's usr_cpu/sys_cpu are its job thread's only; buffered writes on tmpfs are handed
  # to io_uring's io-wq workers (iou-wrk threads of the process), so fio is measured as a
  # whole process (wait4's rusage over the writes it counted; its set-up is included).
  # iolab's pass figure is process-wide already (the read-back of --verify is not in it).
  fio_w() {
    python3 - "$@" <<'PY'
import json, os, subprocess, sys
cmd = ["fio", "--name=w", "--filename=" + os.environ["W"], "--rw=randwrite", "--bs=4k",
       "--iodepth=32", "--size=256m", "--ioengine=io_uring", "--direct=0", "--invalidate=0",
       "--time_based", "--runtime=2", "--iodepth_batch_submit=32",
       "--iodepth_batch_complete_max=32", "--fixedbufs", "--registerfiles", "--norandommap",
       "--randrepeat=0", "--output-format=json"] + sys.argv[1:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
out = p.stdout.read()
_, status, ru = os.wait4(p.pid, 0)
assert status == 0, "fio failed"
ios = json.loads(out)["jobs"][0]["write"]["total_ios"]
print("%.3f" % ((ru.ru_utime + ru.ru_stime) * 1e6 / max(ios, 1)))
PY
  }
  a=() av=() b=() bv=()
  for i in $(seq "$N"); do
    a+=("$(iolab_w)"); b+=("$(fio_w)")
    av+=("$(iolab_w --verify)"); bv+=("$(fio_w --verify=crc32c --do_verify=0 --verify_state_save=0)")
  done
  stats "iolab plain (16-byte stamps per 4K)" "${a[@]}"
  stats "iolab --verify" "${av[@]}"
  stats "fio plain" "${b[@]}"
  stats "fio verify=crc32c do_verify=0" "${bv[@]}"
  echo "  load after: $(load)"
fi
