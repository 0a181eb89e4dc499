#!/usr/bin/env bash
# RATE_CLIFF and RATE_DECLINE on real runs (docs/benchmarks.md#cliffs quotes them):
#
#   (a) false positives on a plain loop device: RUNS runs of a short cdm (8 tests, 2 passes
#       of 1 s each) on a direct-I/O loop device over an image on a tmpfs (no cache below
#       it, so every RATE_CLIFF is a false positive);
#   (b) false positives on a throttled one: the same with the loop device capped at
#       20 MiB/s each way by a blkio cgroup (v1);
#   (d) the same on a direct-I/O loop device over a file on the disk /var/tmp is on: on
#       this VM the host's cache and other programs' I/O are beneath it, so a RATE_CLIFF
#       there may be true (reported, not counted as false);
#   (c) ground truth: `run sustained` on an emulated SSD with a 256 MiB fast cache (64 MiB/s
#       while it lasts, 16 MiB/s after, recovering at 64 MiB/s once idle 50 ms), SSD_RUNS
#       times, with a 2 s pause: the burst, its bytes, the sustained rate and the recovery
#       time against the model's.
#   (e) --precondition on the same emulated SSD: a 3 s pass of 64K QD32 writes over 640 MiB
#       after the cache recovered (no preconditioning: the pass runs on the fast cache),
#       then with --precondition 1x (the region written first: the pass runs after the
#       cliff), and again with a 500 ms ramp (what the model regained while the pass was
#       being set up after preconditioning is written before the measured part); not in
#       the default PARTS.
#   (f) false positives of RATE_DECLINE, which judges 3 s of series or more (cdm's 2 x 1 s
#       passes are too short for it): RUNS runs of one 4 s pass of 4K QD8 random writes on
#       (a)'s device; not in the default PARTS.
#   (g) a scheduling hiccup on purpose: (f)'s pass with `stress-ng --cpu 2` started 2.5 s
#       after the run (about 2 s into the pass) for 3 s, on (a)'s device, whose I/O is
#       CPU-bound (a tmpfs beneath): the rate falls for want of CPU, which RATE_CLIFF must
#       not read as a cache; not in the default PARTS.
#   (h) --steady-state: on (b)'s throttled device (attained in the first window, at the
#       cap) and on (c)'s emulated SSD after the cache recovered (attained only after the
#       cliff, at the rate after it); not in the default PARTS.
#
# Prints, per part, how many runs raised RATE_CLIFF (and STALLED_INTERVALS), with the
# messages (KEEP=DIR: each such run's JSON document is copied there, with its per-interval
# cpu_wait_ms and steal_ms). Usage: bench/cliffs.sh   RUNS (default 20), SSD_RUNS (default 3), PARTS
# (default "a b c"). Root (loop devices, cgroups, /dev/fuse); uses target/release/iolab when
# built, else target/debug/iolab (IOLAB overrides). Everything it creates is removed on
# exit, error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
SSD_RUNS=${SSD_RUNS:-3}
PARTS=${PARTS:-a b c d}
part() { [[ " $PARTS " == *" $1 "* ]]; }
IOLAB=${IOLAB:-}
if [ -z "$IOLAB" ]; then
  IOLAB=$PWD/target/debug/iolab
  [ -x target/release/iolab ] && IOLAB=$PWD/target/release/iolab
fi
[ -x "$IOLAB" ] || { echo "cliffs: build iolab first ($IOLAB missing)" >&2; exit 2; }

WORK=$(mktemp -d /var/tmp/iolab-cliffs.XXXXXX)
export IOLAB_STATE_DIR=$WORK/state
mkdir -m 700 "$IOLAB_STATE_DIR"
LOOPS=()
CG=""
TMPFS=""
EMU_PID=""
cleanup() {
  set +e
  trap - EXIT INT TERM
  for lo in "${LOOPS[@]}"; do losetup -d "$lo"; done
  [ -n "$EMU_PID" ] && kill "$EMU_PID" && wait "$EMU_PID"
  [ -n "$CG" ] && rmdir "$CG"
  [ -n "$TMPFS" ] && umount "$TMPFS"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

CDM=(cdm --size 64MiB --runs 2 --duration 1s --warmup 0 --allow-destroy-device --no-store
     --quiet --json -)

# Runs `iolab run ARGS` (in cgroup $1 unless it is "-") and prints its warnings' codes and
# messages, one a line; the run is stored in $DB (for without_cpu).
DB=$WORK/runs.db
warnings() {
  local cg=$1; shift
  local a args=()
  for a in "$@"; do [ "$a" = --no-store ] || args+=("$a"); done
  local cmd=("$IOLAB" run "${args[@]}" --db "$DB")
  if [ "$cg" != "-" ]; then
    cmd=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "${cmd[@]}")
  fi
  "${cmd[@]}" 2>/dev/null >"$WORK/run.json" || true
  python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for w in d["warnings"]:
    print(w["code"], (w.get("test") or "") + ":", w["message"])' "$WORK/run.json"
}

# How many of the runs stored in $DB since run $1 the rule before the CPU record would have
# called a cliff: the same runs with each pass's cpu_wait_ms and steal_ms removed (as a run
# stored before them reads), judged again by `show --series --json`.
without_cpu() {
  local from=$1 copy=$WORK/nocpu.db n=0 id
  rm -f "$copy"
  sqlite3 "$DB" ".backup '$copy'"
  sqlite3 "$copy" "UPDATE passes SET timeseries_json =
    json_remove(timeseries_json, '\$.cpu_wait_ms', '\$.steal_ms', '\$.others_cpu_ms',
    '\$.idle_cpu_ms')"
  for id in $(sqlite3 "$copy" "SELECT id FROM runs WHERE id > $from"); do
    if "$IOLAB" show "$id" --series --json --db "$copy" 2>/dev/null |
      python3 -c 'import json,sys
sys.exit(0 if any(t.get("cliff") for t in json.load(sys.stdin)["tests"]) else 1)'; then
      n=$((n + 1))
    fi
  done
  echo "$n"
}

# The last run's id in $DB (0 before the first).
last_id() { [ -e "$DB" ] && sqlite3 "$DB" "SELECT COALESCE(MAX(id), 0) FROM runs" || echo 0; }

# RUNS runs of the short cdm on DEVICE (in cgroup CG or "-"): how many raised each code.
false_positives() {
  local name=$1 dev=$2 cg=$3 cliffs=0 stalls=0 declines=0 i out from
  from=$(last_id)
  for i in $(seq "$RUNS"); do
    hog=""
    if [ -n "${HOG:-}" ]; then
      (sleep 2.5 && exec timeout 3 stress-ng --cpu 2 --quiet) &
      hog=$!
    fi
    out=$(warnings "$cg" "${CDM[@]}" --target "$dev")
    if [ -n "$hog" ]; then wait "$hog" || true; fi
    if grep -q '^RATE_CLIFF' <<<"$out"; then
      cliffs=$((cliffs + 1))
      if [ -n "${KEEP:-}" ]; then cp "$WORK/run.json" "$KEEP/cliff-$(date +%s)-$i.json"; fi
      grep '^RATE_CLIFF' <<<"$out" | sed 's/^/    /'
    fi
    if grep -q '^RATE_DECLINE' <<<"$out"; then
      declines=$((declines + 1))
      grep '^RATE_DECLINE' <<<"$out" | sed 's/^/    /'
    fi
    grep -q '^STALLED_INTERVALS' <<<"$out" && stalls=$((stalls + 1))
  done
  echo "$name: RATE_CLIFF in $cliffs of $RUNS runs, RATE_DECLINE in $declines, STALLED_INTERVALS in $stalls;" \
    "a cliff by the rule without its CPU check in $(without_cpu "$from")"
}

if part a || part b || part f || part g || part h; then
  TMPFS=$WORK/tmpfs
  mkdir "$TMPFS"
  mount -t tmpfs -o size=80m tmpfs "$TMPFS"
  dd if=/dev/zero of="$TMPFS/disk.img" bs=1M count=72 status=none
  lo=$(losetup -f --show --direct-io=on "$TMPFS/disk.img")
  LOOPS+=("$lo")
fi

if part a; then
  false_positives "(a) plain loop device (over tmpfs)" "$lo" -
fi

if part f; then
  saved=("${CDM[@]}")
  CDM=(custom --rw randwrite --bs 4k --iodepth 8 --size 64MiB --runs 1 --duration 4s
       --warmup 0 --allow-destroy-device --no-store --quiet --json -)
  false_positives "(f) plain loop device (over tmpfs), one 4 s pass of 4K QD8 random writes" "$lo" -
  CDM=("${saved[@]}")
fi

if part g; then
  saved=("${CDM[@]}")
  CDM=(custom --rw randwrite --bs 4k --iodepth 8 --size 64MiB --runs 1 --duration 4s
       --warmup 0 --allow-destroy-device --no-store --quiet --json -)
  HOG=1 false_positives "(g) as (f), with a CPU hog started about 2 s into the pass" "$lo" -
  CDM=("${saved[@]}")
fi

# `iolab run ARGS --steady-state` (in cgroup $1 unless "-"): its rounds' MB/s, whether and
# in which round the window held, its mean, and RATE_CLIFF's message if raised.
steady() {
  local cg=$1; shift
  local cmd=("$IOLAB" run "$@" --steady-state --warmup 0 --allow-destroy-device --no-store
             --quiet --json -)
  if [ "$cg" != "-" ]; then
    cmd=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "${cmd[@]}")
  fi
  "${cmd[@]}" 2>/dev/null | python3 -c 'import json,sys
d=json.load(sys.stdin); t=d["tests"][0]; s=t["extra"]["steady_state"]
# The rounds: stretches of the one pass'"'"'s 100 ms series ("|" before the window).
p=t["passes"][0]; b=p["timeseries"]["bytes"]; per=round(s["round_s"]*10)
sk=round(s["skip_s"]*10); n=min(int(p["seconds"]*10+1e-6), len(b))
r=["%.1f" % (sum(b[i:i+per])/1e6/s["round_s"]) for i in range(sk, n-per+1, per)]
if s["round"]: r.insert(s["round"]-1, "|")
print("    rounds %s (pass %.1f MB/s)" % (" ".join(r), p["mb_s"]))
print("    attained %s in round %s of %s (window of %s): mean %.2f MB/s, range %.3f, excursion %.3f" % (
    s["attained"], s["round"], s["rounds"], s["window_rounds"], s["window_mean_mb_s"] or 0,
    s["window_range"] or 0, s["window_excursion"] or 0))
for w in d["warnings"]:
    if w["code"] == "RATE_CLIFF": print("    RATE_CLIFF:", w["message"])'
}

if part b || part h; then
  CG=/sys/fs/cgroup/blkio/iolab-cliffs-$$
  mkdir "$CG"
  majmin=$(lsblk -dno MAJ:MIN "$lo" | tr -d ' ')
  echo "$majmin $((20 << 20))" > "$CG/blkio.throttle.read_bps_device"
  echo "$majmin $((20 << 20))" > "$CG/blkio.throttle.write_bps_device"
fi
if part b; then
  false_positives "(b) loop device throttled to 20 MiB/s" "$lo" "$CG"
fi
if part h; then
  echo "(h) --steady-state (snia, 1 s rounds) on (b)'s device, 20 MiB/s (20.97 MB/s) reads:"
  for i in $(seq "$SSD_RUNS"); do
    steady "$CG" custom --rw read --bs 128k --iodepth 4 --duration 1s --target "$lo"
  done
fi

if part d; then
  truncate -s 128M "$WORK/plain.img"
  lo=$(losetup -f --show --direct-io=on "$WORK/plain.img")
  LOOPS+=("$lo")
  false_positives "(d) loop device over a file on /var/tmp's disk" "$lo" -
fi

if part c || part e || part h; then
  dir=$WORK/emu
  mkdir -m 700 "$dir" "$dir/mnt"
  truncate -s 768M "$dir/backing.img"
  spec='{"model":"ssd","parallelism":4,"transfer_rate":"16MiB","fast_cache":"256MiB",
         "fast_write_latency":"0s","write_latency":"11.71875ms",
         "fast_cache_recovery":"64MiB"}'
  "$IOLAB" emudisk serve --dir "$dir" --backing "$dir/backing.img" --spec "$spec" \
    >"$dir/log" 2>&1 &
  EMU_PID=$!
  while [ ! -e "$dir/ready" ]; do sleep 0.05; done
  lo=$(losetup -f --show --direct-io=on "$dir/mnt/disk.img")
  LOOPS+=("$lo")
  echo "write back" > "/sys/block/$(basename "$lo")/queue/write_cache"
fi

if part c; then
  echo "(c) emulated SSD: 256 MiB fast cache at 64 MiB/s (67.1 MB/s), then 16 MiB/s (16.8 MB/s);"
  echo "    recovers 64 MiB/s once idle 50 ms: wholly in 4.05 s (model)"
  for i in $(seq "$SSD_RUNS"); do
    sleep 5 # the cache recovers wholly
    "$IOLAB" run sustained --rw write --bs 64k --iodepth 32 --target "$lo" --size 640MiB \
      --idle 2s --max-time 60s --allow-destroy-device --no-store --quiet --json - \
      2>/dev/null |
      python3 -c 'import json,sys
d=json.load(sys.stdin)
s=d["tests"][0]["extra"]["sustained"]; r=d["tests"][1]["extra"]["recovery"]
MiB=1<<20
def f(v, fmt): return "-" if v is None else fmt % v
print("    burst %s MB/s for %s MiB (%s s), sustained %s MB/s; after %.2f s idle %s MiB back, recovery %s s" % (
    f(s["burst_mb_s"], "%.1f"), f(s["burst_bytes"] and s["burst_bytes"]/MiB, "%.1f"),
    f(s["burst_seconds"], "%.2f"), f(s["sustained_mb_s"], "%.1f"), r["idle_s"],
    f(r["burst_bytes"] and r["burst_bytes"]/MiB, "%.1f"), f(r["recovery_s"], "%.2f")))'
  done
fi

if part e; then
  echo "(e) emulated SSD as in (c): one 3 s pass of 64K QD32 writes on 640 MiB"
  # The pass's first 0.5 s and the rest apart: the model recovers 64 MiB/s once idle
  # 50 ms, and the pass starts a moment after preconditioning ends (its set-up).
  for v in "none 0" "1x 0" "1x 500ms"; do
    read -r pre ramp <<<"$v"
    sleep 5 # the cache recovers wholly
    "$IOLAB" run custom --rw write --bs 64k --iodepth 32 --target "$lo" --size 640MiB \
      --runs 1 --duration 3s --ramp "$ramp" --warmup 0 --precondition "$pre" \
      --allow-destroy-device --no-store --quiet --json - 2>/dev/null |
      PRE="$pre --ramp $ramp" python3 -c 'import json,os,sys
d=json.load(sys.stdin)
t=d["tests"][0]; p=(t.get("extra") or {}).get("precondition"); ps=t["passes"][0]
b=ps["timeseries"]["bytes"]; MB=1e6
print("    --precondition %s: %.1f MB/s (first 0.5 s %.1f MB/s, the rest %.1f MB/s)%s" % (
    os.environ["PRE"], ps["mb_s"], sum(b[:5])/MB/0.5, sum(b[5:])/MB/(ps["seconds"]-0.5),
    "" if not p else "; preconditioning wrote %.0f MiB in %.1f s, %.1f MB/s" % (
        p["bytes"]/(1<<20), p["seconds"], p["mb_s"])))'
  done
fi

if part h; then
  # The rounds are stretches of one pass: the model never idles between two of them.
  for i in $(seq "$SSD_RUNS"); do
    echo "(h) --steady-state (snia, 1 s rounds) on (c)'s emulated SSD, 64K QD32 writes on" \
      "640 MiB (model after the cliff: 16.8 MB/s):"
    sleep 5 # the cache recovers wholly
    steady - custom --rw write --bs 64k --iodepth 32 --size 640MiB --duration 1s \
      --target "$lo"
  done
fi
