#!/usr/bin/env bash
# iolab's engine against fio on the same work, alternately, 3 times each; prints medians,
# the iolab/fio IOPS ratio and CPU time per I/O for:
#   (a) buffered 4K randread QD32, io_uring, 1 GiB file on ext4 fully in the page cache
#       (fio with --invalidate=0 and its best batching/registration settings)
#   (b) O_DIRECT 4K randread QD32, io_uring, on a loop device (--direct-io=on) whose
#       backing file is on tmpfs
#   (c) psync 4K randread QD1 on the cached file of (a)
# Needs root (mount, losetup), fio, mkfs.ext4 and python3. Everything it sets up is torn
# down on exit, error or Ctrl-C.
set -euo pipefail

RUNTIME=${RUNTIME:-5}
REPEATS=${REPEATS:-3}
IOLAB=${IOLAB:-$(dirname "$0")/../target/release/iolab}

die() { echo "engine-vs-fio: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (mounts an ext4 image and a tmpfs, attaches a loop device)"
command -v fio >/dev/null || die "needs fio (apt-get install fio)"
command -v python3 >/dev/null || die "needs python3"
[ -x "$IOLAB" ] || die "build iolab first: cargo build --release ($IOLAB missing)"

WORK=$(mktemp -d /var/tmp/iolab-bench.XXXXXX)
EXT4_MNT=$WORK/ext4
TMPFS_MNT=$WORK/tmpfs
LOOP_EXT4=""
LOOP_DIO=""
cleanup() {
  set +e
  trap - EXIT INT TERM
  wait
  [ -n "$LOOP_DIO" ] && losetup -d "$LOOP_DIO"
  for _ in 1 2 3 4 5; do mountpoint -q "$EXT4_MNT" && ! umount "$EXT4_MNT" 2>/dev/null && sleep 1; done
  [ -n "$LOOP_EXT4" ] && losetup -d "$LOOP_EXT4"
  for _ in 1 2 3 4 5; do mountpoint -q "$TMPFS_MNT" && ! umount "$TMPFS_MNT" 2>/dev/null && sleep 1; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$EXT4_MNT" "$TMPFS_MNT"
truncate -s 2G "$WORK/ext4.img"
mkfs.ext4 -q -F "$WORK/ext4.img"
LOOP_EXT4=$(losetup -f --show "$WORK/ext4.img")
mount "$LOOP_EXT4" "$EXT4_MNT"
FILE=$EXT4_MNT/bench.dat
dd if=/dev/urandom of="$FILE" bs=1M count=1024 status=none
cat "$FILE" >/dev/null   # now fully in the page cache

mount -t tmpfs -o size=1200m tmpfs "$TMPFS_MNT"
dd if=/dev/urandom of="$TMPFS_MNT/backing.img" bs=1M count=1024 status=none
LOOP_DIO=$(losetup -f --show --direct-io=on "$TMPFS_MNT/backing.img")
[ "$(cat /sys/block/$(basename "$LOOP_DIO")/loop/dio)" = 1 ] || echo "note: loop direct I/O did not turn on"

# Small parsers, kept in files so the shell quoting stays simple.
cat >"$WORK/fio.py" <<'PY'
import json, sys
j = json.load(sys.stdin)["jobs"][0]
ios = j["read"]["total_ios"]
secs = j["job_runtime"] / 1000.0
cpu_us = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * secs * 1e6
print("%.0f %.3f" % (j["read"]["iops"], cpu_us / max(ios, 1)))
PY
cat >"$WORK/iolab.py" <<'PY'
import json, sys
p = json.load(sys.stdin)["tests"][0]["passes"][0]
print("%.0f %.3f" % (p["iops"], p["cpu"]["cpu_us_per_io"]))
PY
cat >"$WORK/report.py" <<'PY'
import statistics, sys
name = sys.argv[1]
rows = [l.split() for l in sys.stdin if l.strip()]
def med(tool, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == tool)
def runs(tool):
    return " ".join(r[1] for r in rows if r[0] == tool)
fi, ii, fc, ic = med("fio", 1), med("iolab", 1), med("fio", 2), med("iolab", 2)
print(name)
print("  fio   IOPS per run: " + runs("fio"))
print("  iolab IOPS per run: " + runs("iolab"))
print("  median IOPS  fio %10.0f  iolab %10.0f  ratio iolab/fio %.2f" % (fi, ii, ii / fi))
print("  CPU us/IO    fio %10.3f  iolab %10.3f  ratio iolab/fio %.2f" % (fc, ic, ic / fc))
PY

# Each runner prints "IOPS CPU_US_PER_IO".
fio_run() { # target extra-args...
  local target=$1; shift
  fio --name=bench --filename="$target" --rw=randread --bs=4k --size=1g --time_based \
      --runtime="$RUNTIME" --output-format=json "$@" | python3 "$WORK/fio.py"
}
iolab_run() { # target extra-args...
  local target=$1; shift
  "$IOLAB" run custom --rw randread --bs 4k --target "$target" --duration "${RUNTIME}s" \
      --runs 1 --warmup 0 --no-store --quiet --json - "$@" 2>/dev/null | python3 "$WORK/iolab.py"
}
report() { python3 "$WORK/report.py" "$1"; }

echo "engine-vs-fio: $(fio --version), iolab $("$IOLAB" --version | awk "{print \$2}"), kernel $(uname -r), $(nproc) CPUs, ${RUNTIME}s x ${REPEATS} alternately"

{
  for _ in $(seq "$REPEATS"); do
    echo "fio $(fio_run "$FILE" --ioengine=io_uring --iodepth=32 --iodepth_batch_submit=32 \
      --iodepth_batch_complete_max=32 --fixedbufs --registerfiles --direct=0 --invalidate=0)"
    echo "iolab $(iolab_run "$FILE" --iodepth 32 --buffered)"
  done
} | report "(a) buffered 4K randread QD32, io_uring, 1 GiB cached file on ext4"

{
  for _ in $(seq "$REPEATS"); do
    echo "fio $(fio_run "$LOOP_DIO" --ioengine=io_uring --iodepth=32 --iodepth_batch_submit=32 \
      --iodepth_batch_complete_max=32 --fixedbufs --registerfiles --direct=1)"
    echo "iolab $(iolab_run "$LOOP_DIO" --iodepth 32)"
  done
} | report "(b) O_DIRECT 4K randread QD32, io_uring, loop device (direct-io=on) on tmpfs"

cat "$FILE" >/dev/null   # back in the page cache, whatever (b) evicted
{
  for _ in $(seq "$REPEATS"); do
    echo "fio $(fio_run "$FILE" --ioengine=psync --iodepth=1 --direct=0 --invalidate=0)"
    echo "iolab $(iolab_run "$FILE" --engine psync --iodepth 1 --buffered)"
  done
} | report "(c) psync 4K randread QD1, 1 GiB cached file on ext4"
