#!/usr/bin/env bash
# iolab's engine against fio on the machine's real disk: a grid of O_DIRECT cases on one
# file under /var/tmp (block size 4k / 128k / 1m x queue depth 1 / 32 x numjobs 1 / 2 x
# read / write; 4k is random, 128k and 1m sequential), plus the three cases of
# bench/engine-vs-fio.sh: "cached" (buffered 4K randread QD32 on the file held in memory;
# "cached-8m" the same over its first 8 MiB, which the CPU's last-level cache holds),
# "loop-tmpfs" (O_DIRECT 4K randread QD32 on a direct-I/O loop device over a tmpfs image) and
# "psync-cached" (4K randread QD1 with the psync engine on the cached file). Every case
# alternates the tools N times and prints:
#   - the median IOPS and MB/s of each tool;
#   - the ratio iolab/fio (geometric mean of the alternated pairs) with its 95% interval
#     (t on the pairs' log ratios);
#   - block requests and merges per I/O, from /proc/diskstats of the file's disk around
#     each run (I/Os counted as the bytes the disk moved / bs, so a tool's ramp or drain
#     does not matter; other I/O on the disk adds to both tools alike);
#   - CPU per I/O: what the tool measured itself (iolab's pass, fio's job threads), the
#     whole process (wait4's rusage, set-up included), and the whole machine (/proc/stat's
#     busy time around the run: interrupts and kernel threads included, which land on
#     whichever thread runs), each divided by the I/Os the tool counted.
#
# Settings (environment): N=8 (alternations per case), RUNTIME=2 (seconds per run),
# SIZE=1024 (MiB of the test file), CASES (a space-separated subset of case names, e.g.
# "4k-qd32-j1-read cached"), TOOLS="iolab fio fio-default" (fio-default: fio's defaults
# for the case: no batching, no registered buffers/file; iolab-base: a second iolab binary,
# IOLAB_BASE, for before/after), IOLAB (the binary; default
# target/release/iolab), DIR (where the file goes; default a new directory under /var/tmp).
# Needs root (it reads /proc/diskstats of the real disk, drops the file's pages, mounts a
# tmpfs and attaches a loop device), fio and python3. Its file, the tmpfs and the loop
# device are removed on exit, error or Ctrl-C.
set -euo pipefail

N=${N:-8}
RUNTIME=${RUNTIME:-2}
SIZE=${SIZE:-1024}
TOOLS=${TOOLS:-iolab fio fio-default}
CASES=${CASES:-}
IOLAB=${IOLAB:-$(dirname "$0")/../target/release/iolab}

die() { echo "engine-grid: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root"
command -v fio >/dev/null || die "needs fio (apt-get install fio)"
command -v python3 >/dev/null || die "needs python3"
[ -x "$IOLAB" ] || die "build iolab first: cargo build --release ($IOLAB missing)"
case "$N$RUNTIME$SIZE" in *[!0-9]*) die "N, RUNTIME and SIZE are whole numbers";; esac
[ "$N" -ge 2 ] || die "N must be at least 2 (the interval needs pairs)"

WORK=$(mktemp -d "${DIR:-/var/tmp}/iolab-grid.XXXXXX")
LOOP=""
cleanup() {
  set +e
  trap - EXIT INT TERM
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  # A detached loop device lets go of its image a moment later.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    mountpoint -q "$WORK/tmpfs" || break
    umount "$WORK/tmpfs" 2>/dev/null || sleep 0.5
  done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
FILE=$WORK/grid.dat
dd if=/dev/urandom of="$FILE" bs=1M count="$SIZE" oflag=direct status=none
case " ${CASES:- loop-tmpfs } " in
*" loop-tmpfs "*)
  mkdir "$WORK/tmpfs"
  mount -t tmpfs -o size=$((SIZE + 64))m tmpfs "$WORK/tmpfs"
  dd if=/dev/urandom of="$WORK/tmpfs/img" bs=1M count="$SIZE" status=none
  LOOP=$(losetup -f --show --direct-io=on "$WORK/tmpfs/img")
  ;;
esac
export LOOP

cat >"$WORK/grid.py" <<'PY'
import json, math, os, statistics, subprocess, sys, time

iolab, path, n, runtime, size_mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tools = os.environ.get("TOOLS", "iolab fio fio-default").split()
only = os.environ.get("CASES", "").split()
if "iolab" not in tools or len(tools) < 2:
    raise SystemExit("TOOLS must hold iolab and at least one of fio, fio-default")

st = os.stat(path)
dev = open("/sys/dev/block/%d:%d/uevent" % (os.major(st.st_dev), os.minor(st.st_dev))).read()
disk = [l.split("=", 1)[1] for l in dev.splitlines() if l.startswith("DEVNAME=")][0]
loop = os.environ.get("LOOP", "")

def diskstats(disk):
    for l in open("/proc/diskstats"):
        f = l.split()
        if f[2] == disk:
            # reads, reads merged, sectors read, writes, writes merged, sectors written
            return [int(f[3]), int(f[4]), int(f[5]), int(f[7]), int(f[8]), int(f[9])]
    raise SystemExit("no %s in /proc/diskstats" % disk)

def busy_seconds():
    # All CPUs' user, nice, system, irq and softirq time: the tool, its interrupts, kernel
    # threads working for it, and whatever else ran (not idle, iowait or steal; guest time
    # is inside user already).
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")

def drop_cache():
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

def cache_file():
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass

def cases():
    out = []
    for bs in ("4k", "128k", "1m"):
        for qd in (1, 32):
            for nj in (1, 2):
                for rw in ("read", "write"):
                    r = ("rand" + rw) if bs == "4k" else rw
                    out.append(("%s-qd%d-j%d-%s" % (bs, qd, nj, rw), bs, qd, nj, r, True))
    out.append(("cached", "4k", 32, 1, "randread", False))
    # The same on the file's first 8 MiB, which stays in the CPU's last-level cache: the
    # kernel's copy no longer waits on memory, so what is left is each tool's own work.
    out.append(("cached-8m", "4k", 32, 1, "randread", False))
    out.append(("loop-tmpfs", "4k", 32, 1, "randread", True))
    out.append(("psync-cached", "4k", 1, 1, "randread", False))
    return [c for c in out if not only or c[0] in only]

BS = {"4k": 4096, "128k": 131072, "1m": 1 << 20}

def region_mib(name):
    return 8 if name == "cached-8m" else size_mib

def target(name):
    """(path, disk whose /proc/diskstats counts the case's requests, engine)."""
    if name == "loop-tmpfs":
        return loop, os.path.basename(loop), "io_uring"
    if name == "psync-cached":
        return path, disk, "psync"
    return path, disk, "io_uring"

def command(tool, bs, qd, nj, rw, direct, region, where, engine):
    if tool in ("iolab", "iolab-base"):
        binary = iolab if tool == "iolab" else os.environ["IOLAB_BASE"]
        c = [binary, "run", "custom", "--rw", rw, "--bs", bs, "--iodepth", str(qd),
             "--numjobs", str(nj), "--target", where, "--size", "%dMiB" % region,
             "--duration", "%ds" % runtime, "--runs", "1", "--warmup", "0", "--ramp", "0",
             "--engine", engine, "--no-store", "--quiet", "--json", "-"]
        if "write" in rw:
            c.append("--allow-overwrite-file")
        return c + ([] if direct else ["--buffered"])
    c = ["fio", "--name=grid", "--filename=" + where, "--rw=" + rw, "--bs=" + bs,
         "--size=%dm" % region, "--time_based", "--runtime=%d" % runtime,
         "--ioengine=" + engine, "--iodepth=%d" % qd, "--numjobs=%d" % nj, "--group_reporting",
         "--direct=%d" % direct, "--output-format=json", "--randrepeat=0", "--norandommap"]
    if not direct:
        c.append("--invalidate=0")
    # fio's best settings are io_uring's; psync has none, so there both runs are its defaults.
    if tool == "fio" and engine == "io_uring":
        c += ["--iodepth_batch_submit=%d" % qd, "--iodepth_batch_complete_max=%d" % qd,
              "--fixedbufs", "--registerfiles"]
    return c

def run(tool, case):
    name, bs, qd, nj, rw, direct = case
    if not direct:
        # Again before every run: the machine's DAMON pageout scheme drops clean pages
        # idle for ~30 s, and a case of N rounds lasts longer than that.
        cache_file()
    where, counted, engine = target(name)
    d0 = diskstats(counted)
    b0 = busy_seconds()
    t0 = time.monotonic()
    p = subprocess.Popen(command(tool, bs, qd, nj, rw, direct, region_mib(name), where, engine),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    b1 = busy_seconds()
    d1 = diskstats(counted)
    if status != 0:
        raise SystemExit("%s failed on %s: %s" % (tool, name, err.decode(errors="replace")[-2000:]))
    j = json.loads(out)
    if tool.startswith("iolab"):
        ps = j["tests"][0]["passes"][0]
        iops = ps["iops"]
        ios = iops * ps["seconds"]
        tool_cpu = ps["cpu"]["cpu_us_per_io"]
    else:
        job = j["jobs"][0]
        k = "read" if "read" in rw else "write"
        iops = job[k]["iops"]
        ios = job[k]["total_ios"]
        secs = job["job_runtime"] / 1000.0
        tool_cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * secs * 1e6 / max(ios, 1)
    dd = [b - a for a, b in zip(d0, d1)]
    reads = "read" in rw
    req, merged, sectors = (dd[0], dd[1], dd[2]) if reads else (dd[3], dd[4], dd[5])
    disk_ios = sectors * 512 / BS[bs]
    # A cached read moves (almost) nothing on the disk: no per-I/O request figures then.
    on_disk = disk_ios >= ios / 2
    proc_cpu = (ru.ru_utime + ru.ru_stime) * 1e6
    return {
        "iops": iops,
        "req": req / disk_ios if on_disk else float("nan"),
        "merge": merged / disk_ios if on_disk else float("nan"),
        "cpu": tool_cpu,
        "pcpu": proc_cpu / max(ios, 1),
        "mcpu": (b1 - b0) * 1e6 / max(ios, 1),
        "wall": wall,
    }

T975 = [12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]

def interval(a, b):
    l = [math.log(x / y) for x, y in zip(a, b) if x > 0 and y > 0]
    m = statistics.mean(l)
    h = (T975[len(l) - 2] if len(l) - 1 <= len(T975) else 1.96) * statistics.stdev(l) / math.sqrt(len(l))
    return math.exp(m), math.exp(m - h), math.exp(m + h)

def med(rs, k):
    return statistics.median(r[k] for r in rs)

load = open("/proc/loadavg").read().split()[:3]
print("engine-grid: %s, iolab %s, kernel %s, %d CPUs, disk %s, file %d MiB, %ds x %d alternately, load %s"
      % (subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
         subprocess.run([iolab, "--version"], capture_output=True, text=True).stdout.split()[1],
         os.uname().release, os.cpu_count(), disk, size_mib, runtime, n, " ".join(load)))
rows = []
for case in cases():
    name, bs, qd, nj, rw, direct = case
    if direct:
        drop_cache()
    else:
        cache_file()
    res = {t: [] for t in tools}
    for i in range(n):
        for t in (tools if i % 2 == 0 else list(reversed(tools))):
            res[t].append(run(t, case))
    line = ["%-18s" % name]
    for t in tools:
        line.append("%s %9.0f IOPS %8.1f MB/s req/IO %.2f merges/IO %.2f CPU us/IO %.2f (process %.2f, machine %.2f)"
                    % (t, med(res[t], "iops"), med(res[t], "iops") * BS[bs] / 1e6, med(res[t], "req"),
                       med(res[t], "merge"), med(res[t], "cpu"), med(res[t], "pcpu"), med(res[t], "mcpu")))
    print(line[0])
    for l in line[1:]:
        print("    " + l)
    for t in tools:
        if t == "iolab":
            continue
        r, lo, hi = interval([x["iops"] for x in res["iolab"]], [x["iops"] for x in res[t]])
        print("    iolab/%s %.2f [%.2f, %.2f]; runs iolab %s; %s %s" % (
            t, r, lo, hi, " ".join("%.0f" % x["iops"] for x in res["iolab"]), t,
            " ".join("%.0f" % x["iops"] for x in res[t])))
        r, lo, hi = interval([x["pcpu"] for x in res["iolab"]], [x["pcpu"] for x in res[t]])
        print("    process CPU per I/O iolab/%s %.2f [%.2f, %.2f]" % (t, r, lo, hi))
        r, lo, hi = interval([x["mcpu"] for x in res["iolab"]], [x["mcpu"] for x in res[t]])
        print("    machine CPU per I/O iolab/%s %.2f [%.2f, %.2f]" % (t, r, lo, hi))
    sys.stdout.flush()
print("load after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
PY
python3 "$WORK/grid.py" "$IOLAB" "$FILE" "$N" "$RUNTIME" "$SIZE"
