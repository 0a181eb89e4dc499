#!/usr/bin/env bash
# What MPI coordination costs (docs/mpi.md). The same workload, 128 KiB O_DIRECT reads at
# QD4, 5 passes of 5 s, on a loop device throttled to 20 MiB/s (blkio, cgroup v1), run
#   (a) as one process without MPI, (b) as 1 rank under mpirun, (c) as 2 ranks, each on its
#   own device with its own 20 MiB/s throttle,
# REPEATS times each. Prints each one's MB/s (median over runs), the 1-rank rate against no
# MPI, the 2-rank aggregate against 2x the 1-rank rate (target: within 3%), and the
# coordination each rank measured itself (env.mpi.passes[].ranks[].coord_s: the time it
# spent in exchanges between one pass and the next, the barrier included) as a share of a
# pass (target: at most 1%). mpirun runs with --bind-to none: its default binding puts a
# rank on one CPU, and on a busy machine that CPU's load delays the rank's I/O.
# Needs root (loop devices, mounts, cgroups), mpirun, mkfs.ext4, python3 and an iolab built
# with `--features mpi` (IOLAB=, default target/release/iolab). Everything it sets up is
# torn down on exit, error or Ctrl-C.
set -euo pipefail

DURATION=${DURATION:-5}
REPEATS=${REPEATS:-3}
IOLAB=${IOLAB:-$(dirname "$0")/../target/release/iolab}
BPS=$((20 * 1024 * 1024))

die() { echo "mpi-overhead: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (loop devices, mounts, blkio cgroups)"
command -v mpirun >/dev/null || die "needs mpirun (apt-get install openmpi-bin libopenmpi-dev)"
command -v mkfs.ext4 >/dev/null || die "needs mkfs.ext4"
command -v python3 >/dev/null || die "needs python3"
[ -x "$IOLAB" ] || die "build iolab first: cargo build --release --features mpi ($IOLAB missing)"
[ -f /sys/fs/cgroup/blkio/cgroup.procs ] || die "needs a cgroup-v1 blkio hierarchy"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
IOLAB=$(realpath "$IOLAB")
ldd "$IOLAB" | grep -q libmpi || die "$IOLAB is built without MPI: cargo build --release --features mpi"

WORK=$(mktemp -d /var/tmp/iolab-mpi-bench.XXXXXX)
LOOPS=()
CGS=()
cleanup() {
  set +e
  trap - EXIT INT TERM
  wait
  for i in 0 1; do
    for _ in 1 2 3 4 5; do mountpoint -q "$WORK/m$i" && ! umount "$WORK/m$i" 2>/dev/null && sleep 1; done
  done
  for l in "${LOOPS[@]}"; do losetup -d "$l"; done
  for c in "${CGS[@]}"; do rmdir "$c"; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

for i in 0 1; do
  truncate -s 256M "$WORK/d$i.img"
  l=$(losetup -f --show --direct-io=on "$WORK/d$i.img")
  LOOPS+=("$l")
  mkfs.ext4 -q -F "$l"
  mkdir -p "$WORK/m$i"
  mount "$l" "$WORK/m$i"
  mkdir "$WORK/m$i/t"
  cg=/sys/fs/cgroup/blkio/iolab-mpi-bench-$$-$i
  mkdir "$cg"
  CGS+=("$cg")
  echo "$(cat /sys/block/$(basename "$l")/dev) $BPS" > "$cg/blkio.throttle.read_bps_device"
done

# One run in MODE (plain | rank1 | rank2): rank R (and the plain process) runs in cgroup R
# on device R; its JSON document is kept as MODE-I.json.
cat >"$WORK/rank.sh" <<EOF
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-0}
echo \$\$ > ${CGS[0]%-0}-\$r/cgroup.procs
exec "$IOLAB" run custom --rw read --bs 128k --iodepth 4 --size 32m --duration ${DURATION}s \\
  --ramp 500ms --runs 5 --target $WORK/m\$r/t --db $WORK/r.db --quiet --json $WORK/out.json
EOF
chmod +x "$WORK/rank.sh"
one() {
  case $1 in
    plain) "$WORK/rank.sh" >/dev/null ;;
    rank1) mpirun --bind-to none -np 1 "$WORK/rank.sh" >/dev/null ;;
    rank2) mpirun --bind-to none --oversubscribe -np 2 "$WORK/rank.sh" >/dev/null ;;
  esac
  cp "$WORK/out.json" "$WORK/$1-$2.json"
}
for i in $(seq 1 "$REPEATS"); do
  for mode in plain rank1 rank2; do one "$mode" "$i"; done
done

python3 - "$WORK" "$REPEATS" "$DURATION" <<'PY'
import json, statistics, sys
work, repeats, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
docs = {m: [json.load(open(f"{work}/{m}-{i}.json")) for i in range(1, repeats + 1)]
        for m in ("plain", "rank1", "rank2")}
mbs = {m: statistics.median(d["tests"][0]["summary"]["mb_s"] for d in ds)
       for m, ds in docs.items()}
print(f"{'mode':<7} {'MB/s':>8} {'coord/pass ms (median, max)':>30} {'% of a pass':>12}")
for m, ds in docs.items():
    coord = [max(r["coord_s"] for r in p["ranks"])
             for d in ds if m != "plain" for p in d["env"]["mpi"]["passes"]]
    if coord:
        med, top = statistics.median(coord), max(coord)
        c, pct = f"{med * 1e3:.3f}, {top * 1e3:.3f}", f"{med / dur * 100:.4f}%"
    else:
        c, pct = "-", "-"
    print(f"{m:<7} {mbs[m]:>8.3f} {c:>30} {pct:>12}")
r = mbs["rank1"] / mbs["plain"]
print(f"1 rank / no MPI: {r:.4f} ({(r - 1) * 100:+.2f}%)")
s = mbs["rank2"] / mbs["rank1"]
print(f"2 ranks on 2 devices / 1 rank: {s:.4f}x (2x within 3%: {abs(s / 2 - 1) <= 0.03})")
PY
