#!/usr/bin/env bash
# A/A and power of `iolab compare`, measured on real runs (docs/statistics.md quotes them).
#
#   (a) A/A, one run a side: 2×PAIRS identical runs of one command on a directory of the
#       disk DIR is on (real run-to-run noise); each disjoint pair is compared with
#       `iolab compare A B`, which tests it against the noise of the other runs of the
#       command. Also shown: what the rule iolab used before (Welch's t-test on the passes
#       of the two runs) would have called significant on the same pairs.
#   (b) A/A, three runs a side: TRIALS times, 3 + 3 identical runs under two labels,
#       interleaved, compared with `iolab compare --label A --label B` (Welch on the runs).
#   (c) Power (root, cgroup-v1 blkio): TRIALS times, three runs at 20 MiB/s and three at
#       24 MiB/s (and three more at 20 MiB/s: an A/A on the throttle), interleaved, on a
#       loop device with direct I/O over a fully written image.
#
# Usage: bench/aa.sh [DIR]   (DIR: where the A/A runs make their file; default a new
# directory under /var/tmp). PAIRS (default 60) and TRIALS (default 20) set the sizes.
# Needs python3; (c) needs root and /sys/fs/cgroup/blkio, and is skipped without them.
# Everything it creates is removed on exit, error or Ctrl-C.
set -euo pipefail

PAIRS=${PAIRS:-60}
TRIALS=${TRIALS:-20}
IOLAB=${IOLAB:-$(dirname "$0")/../target/release/iolab}

die() { echo "aa: $*" >&2; exit 2; }
command -v python3 >/dev/null || die "needs python3"
[ -x "$IOLAB" ] || die "build iolab first: cargo build --release ($IOLAB missing)"

WORK=$(mktemp -d /var/tmp/iolab-aa.XXXXXX)
DIR=${1:-$WORK/dir}
mkdir -p "$DIR"
DB=$WORK/aa.db
LOOP=""
CGROUPS=()
cleanup() {
  set +e
  trap - EXIT INT TERM
  for cg in "${CGROUPS[@]}"; do rmdir "$cg" 2>/dev/null; done
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

AA_RUN=(custom --rw randread --bs 4k --iodepth 4 --size 16MiB --runs 3 --duration 100ms
        --ramp 20ms --warmup 0)

# Runs `iolab run ...` and prints the stored run's id.
run() {
  "$IOLAB" run "$@" --db "$DB" --quiet | sed -n 's/^stored as run \([0-9]*\).*/\1/p'
}

# Welch's t-test on two lists of passes (the old rule) and the new verdicts, summarised.
STATS=$(cat <<'EOF'
import json, math, sys

def betacf(a, b, x):
    # Continued fraction of the regularised incomplete beta (modified Lentz).
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h

def betainc(a, b, x):
    if x <= 0: return 0.0
    if x >= 1: return 1.0
    lf = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lf) * betacf(a, b, x) / a
    return 1.0 - math.exp(lf) * betacf(b, a, 1 - x) / b

def welch_p(a, b):
    na, nb = len(a), len(b)
    ma, mb = sum(a) / na, sum(b) / nb
    va = sum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = sum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    if va + vb == 0:
        return 1.0 if ma == mb else 0.0
    t = (mb - ma) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (na - 1) + vb * vb / (nb - 1))
    return betainc(df / 2, 0.5, df / (df + t * t))

def binom_ci(k, n):
    # Wilson 95% interval of a proportion.
    z = 1.959964
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, c - h), min(1.0, c + h)

kind = sys.argv[1]
lines = [json.loads(l) for l in sys.stdin if l.strip()]
sig = sum(1 for d in lines if d["new"]["significant"] is True)
tested = sum(1 for d in lines if d["new"]["significant"] is not None)
n = len(lines)
lo, hi = binom_ci(sig, n)
print(f"{kind}: {sig} of {n} called significant ({100*sig/n:.1f}%, 95% CI {100*lo:.1f}-{100*hi:.1f}%); {tested} tested")
if lines and "a_passes" in lines[0]:
    old = sum(1 for d in lines if welch_p(d["a_passes"], d["b_passes"]) < 0.05)
    lo, hi = binom_ci(old, n)
    print(f"{kind}, old rule (Welch on the two runs' passes): {old} of {n} ({100*old/n:.1f}%, 95% CI {100*lo:.1f}-{100*hi:.1f}%)")
EOF
)

# The MB/s cell of side B of a comparison, with the passes of both runs when asked.
cell() {
  python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
c = doc["tests"][0]["metrics"]["mb_s"][1]
out = {"new": {"significant": c["significant"], "p": c["p"], "change": c["change_pct"]}}
if len(sys.argv) > 2:
    for side, f in (("a_passes", sys.argv[2]), ("b_passes", sys.argv[3])):
        out[side] = [p["mb_s"] for p in json.load(open(f))["tests"][0]["passes"]]
print(json.dumps(out))' "$@"
}

echo "(a) A/A, one run a side: $((2 * PAIRS)) runs of: iolab run ${AA_RUN[*]} --target $DIR"
ids=()
start=$(date +%s)
for _ in $(seq 1 $((2 * PAIRS))); do ids+=("$(run "${AA_RUN[@]}" --target "$DIR")"); done
echo "  $(( $(date +%s) - start )) s for $((2 * PAIRS)) runs"
for ((k = 0; k < 2 * PAIRS; k += 2)); do
  a=${ids[k]} b=${ids[k + 1]}
  "$IOLAB" compare "$a" "$b" --json --db "$DB" > "$WORK/c.json"
  "$IOLAB" show "$a" --json --db "$DB" > "$WORK/a.json"
  "$IOLAB" show "$b" --json --db "$DB" > "$WORK/b.json"
  cell "$WORK/c.json" "$WORK/a.json" "$WORK/b.json"
done | python3 -c "$STATS" "A/A 1 vs 1"

echo "(b) A/A, three runs a side: $TRIALS trials of 3 + 3 runs, interleaved"
for t in $(seq 1 "$TRIALS"); do
  for _ in 1 2 3; do
    run "${AA_RUN[@]}" --target "$DIR" --label "aa$t-x" >/dev/null
    run "${AA_RUN[@]}" --target "$DIR" --label "aa$t-y" >/dev/null
  done
  "$IOLAB" compare --label "aa$t-x" --label "aa$t-y" --json --db "$DB" > "$WORK/c.json"
  cell "$WORK/c.json"
done | python3 -c "$STATS" "A/A 3 vs 3"

if [ "$(id -u)" != 0 ] || [ ! -e /sys/fs/cgroup/blkio/cgroup.procs ]; then
  echo "(c) skipped: needs root and a cgroup-v1 blkio hierarchy"
  exit 0
fi
echo "(c) power: $TRIALS trials of 3 runs at 20 MiB/s, 3 at 24 MiB/s, 3 more at 20 MiB/s"
IMG=$WORK/disk.img
dd if=/dev/zero of="$IMG" bs=1M count=64 status=none conv=fsync
LOOP=$(losetup -f --show --direct-io=on "$IMG")
MAJMIN=$(cat "/sys/block/$(basename "$LOOP")/dev")
for r in 20 24; do
  cg=/sys/fs/cgroup/blkio/iolab-aa-$r-$$
  mkdir "$cg"
  CGROUPS+=("$cg")
  echo "$MAJMIN $((r * 1048576))" > "$cg/blkio.throttle.read_bps_device"
done
THR_RUN=(custom --rw read --bs 128k --iodepth 4 --size 32MiB --runs 3 --duration 200ms
         --ramp 50ms --warmup 0 --target "$LOOP" --allow-destroy-device)
throttled() {
  local r=$1; shift
  sh -c 'echo $$ > "$1" && shift && exec "$@"' sh "/sys/fs/cgroup/blkio/iolab-aa-$r-$$/cgroup.procs" \
    "$IOLAB" run "$@" --db "$DB" --quiet > /dev/null
}
for t in $(seq 1 "$TRIALS"); do
  for _ in 1 2 3; do
    throttled 20 "${THR_RUN[@]}" --label "p$t-20"
    throttled 24 "${THR_RUN[@]}" --label "p$t-24"
    throttled 20 "${THR_RUN[@]}" --label "p$t-20b"
  done
  "$IOLAB" compare --label "p$t-20" --label "p$t-24" --json --db "$DB" > "$WORK/c.json"
  cell "$WORK/c.json" >> "$WORK/power"
  "$IOLAB" compare --label "p$t-20" --label "p$t-20b" --json --db "$DB" > "$WORK/c.json"
  cell "$WORK/c.json" >> "$WORK/aa-throttle"
done
python3 -c "$STATS" "20 vs 24 MiB/s, 3 vs 3 (power)" < "$WORK/power"
python3 -c "$STATS" "20 vs 20 MiB/s, 3 vs 3 (A/A)" < "$WORK/aa-throttle"
