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
#       loop device over memory (/dev/shm, bench/lib.sh).
#   (d) A/A of a short cdm (64 MiB, three 200 ms passes a test): 2×CDM_PAIRS runs, each
#       disjoint pair compared with `iolab compare A B`; every test's MB/s counts, with the
#       old rule beside it, as in (a).
#
# VERBOSE=1 prints every comparison (p, change, each run's value).
# Usage: bench/aa.sh [DIR]   (DIR: where the A/A runs make their file; default a new
# directory under /var/tmp). PAIRS (default 60), TRIALS (default 20) and CDM_PAIRS
# (default 20) set the sizes; PARTS (default "a b c d") picks the parts.
# Needs python3; (c) needs root and /sys/fs/cgroup/blkio, and is skipped without them.
# Everything it creates is removed on exit, error or Ctrl-C.
set -euo pipefail

PAIRS=${PAIRS:-60}
TRIALS=${TRIALS:-20}
CDM_PAIRS=${CDM_PAIRS:-20}
PARTS=${PARTS:-a b c d}
part() { [[ " $PARTS " == *" $1 "* ]]; }
. "$(dirname "$0")/lib.sh"
bench_init aa
DIR=${1:-$WORK/dir}
mkdir -p "$DIR"

AA_RUN=(custom --rw randread --bs 4k --iodepth 4 --size 16MiB --runs 3 --duration 100ms
        --ramp 20ms --warmup 0)

# Welch's t-test on two lists of passes (the old rule) and the new verdicts, summarised.
STATS=$(cat <<'EOF'
import json, math, os, sys

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
if os.environ.get("VERBOSE"):
    for d in lines:
        print(f"  {d.get('test', '')}: {d['new']}, A {d['a_runs']}, B {d['b_runs']}")
sig = sum(1 for d in lines if d["new"]["significant"] is True)
tested = sum(1 for d in lines if d["new"]["significant"] is not None)
n = len(lines)
lo, hi = binom_ci(sig, n)
print(f"{kind}: {sig} of {n} called significant ({100*sig/n:.1f}%, 95% CI {100*lo:.1f}-{100*hi:.1f}%); {tested} tested")
def welch_log_p(a, b):
    return welch_p([math.log(x) for x in a], [math.log(x) for x in b])

both = [d for d in lines if len(d.get("a_runs", [])) >= 2 and len(d.get("b_runs", [])) >= 2]
if both and not kind.startswith("20 vs"):
    # The same runs with B's values scaled: the power of the rule (Welch on ln of the runs)
    # at this target's real run-to-run noise.
    for f in (1.2, 1.5, 2.0):
        hit = sum(1 for d in both if welch_log_p(d["a_runs"], [x * f for x in d["b_runs"]]) < 0.05)
        lo, hi = binom_ci(hit, len(both))
        print(f"{kind}, B's runs scaled by {f}: {hit} of {len(both)} called significant ({100*hit/len(both):.0f}%, 95% CI {100*lo:.0f}-{100*hi:.0f}%)")
if lines and lines[0].get("a_passes"):
    old = sum(1 for d in lines if welch_p(d["a_passes"], d["b_passes"]) < 0.05)
    lo, hi = binom_ci(old, n)
    print(f"{kind}, old rule (Welch on the two runs' passes): {old} of {n} ({100*old/n:.1f}%, 95% CI {100*lo:.1f}-{100*hi:.1f}%)")
EOF
)

# The MB/s cell of side B of each test of a comparison (the first test only unless
# ALL_TESTS is set), with the passes of both runs when their documents are given.
cell() {
  python3 -c '
import json, os, sys
doc = json.load(open(sys.argv[1]))
runs = [json.load(open(f)) for f in sys.argv[2:4]]
tests = doc["tests"] if os.environ.get("ALL_TESTS") else doc["tests"][:1]
for t in tests:
    c = t["metrics"]["mb_s"][1]
    a = t["metrics"]["mb_s"][0]
    out = {"test": t["name"], "new": {"significant": c["significant"], "p": c["p"], "change": c["change_pct"]},
           "a_runs": a["run_values"], "b_runs": c["run_values"]}
    for side, r in zip(("a_passes", "b_passes"), runs):
        out[side] = [p["mb_s"] for x in r["tests"] if x["name"] == t["name"] for p in x["passes"]]
    print(json.dumps(out))' "$@"
}

# Part (a) and (d): 2×$1 runs of the command that follows, compared in disjoint pairs.
pairs() {
  local n=$1 what=$2; shift 2
  local ids=() start
  start=$(date +%s)
  for _ in $(seq 1 $((2 * n))); do ids+=("$(run "$@" --target "$DIR")"); done
  echo "  $(( $(date +%s) - start )) s for $((2 * n)) runs"
  for ((k = 0; k < 2 * n; k += 2)); do
    local a=${ids[k]} b=${ids[k + 1]}
    "$IOLAB" compare "$a" "$b" --json --db "$DB" > "$WORK/c.json"
    "$IOLAB" show "$a" --json --db "$DB" > "$WORK/a.json"
    "$IOLAB" show "$b" --json --db "$DB" > "$WORK/b.json"
    cell "$WORK/c.json" "$WORK/a.json" "$WORK/b.json"
  done | python3 -c "$STATS" "$what"
}

if part a; then
  echo "(a) A/A, one run a side: $((2 * PAIRS)) runs of: iolab run ${AA_RUN[*]} --target $DIR"
  pairs "$PAIRS" "A/A 1 vs 1" "${AA_RUN[@]}"
fi

if part d; then
  CDM_RUN=(cdm --size 64MiB --runs 3 --duration 200ms --ramp 20ms --warmup 0)
  echo "(d) A/A of cdm, one run a side: $((2 * CDM_PAIRS)) runs of: iolab run ${CDM_RUN[*]} --target $DIR"
  ALL_TESTS=1 pairs "$CDM_PAIRS" "A/A cdm 1 vs 1, every test" "${CDM_RUN[@]}"
fi

if part b; then
echo "(b) A/A, three runs a side: $TRIALS trials of 3 + 3 runs, interleaved"
for t in $(seq 1 "$TRIALS"); do
  for _ in 1 2 3; do
    run "${AA_RUN[@]}" --target "$DIR" --label "aa$t-x" >/dev/null
    run "${AA_RUN[@]}" --target "$DIR" --label "aa$t-y" >/dev/null
  done
  "$IOLAB" compare --label "aa$t-x" --label "aa$t-y" --json --db "$DB" > "$WORK/c.json"
  cell "$WORK/c.json"
done | python3 -c "$STATS" "A/A 3 vs 3"
fi

part c || exit 0
need_blkio c || exit 0
echo "(c) power: $TRIALS trials of 3 runs at 20 MiB/s, 3 at 24 MiB/s, 3 more at 20 MiB/s"
memory_loop 64
for r in 20 24; do read_cgroup "$r"; done
thr_run
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
