#!/bin/sh
# What the emulated disk itself costs: 4 KiB random reads through a zero-latency model
# (model = "fixed", one lane, then 64 lanes) at QD1 and QD32, beside the same reads on a
# plain direct-I/O loop device over a file on the same filesystem. The difference at QD1 is
# the FUSE round trip the model adds to every request; the QD32 figures are the most IOPS
# the model can serve here. Uses target/release/iolab when built. Root, /dev/fuse.
# Usage: bench/emudisk-overhead.sh [SECONDS]
set -eu
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build -q
bin=$PWD/target/debug/iolab
[ -x target/release/iolab ] && bin=$PWD/target/release/iolab
dir=$(mktemp -d /var/tmp/iolab-emu-bench.XXXXXX)
lo_plain=""; lo_emu=""; pid=""
stop_emu() {
    [ -n "$lo_emu" ] && losetup -d "$lo_emu" || true
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    lo_emu=""; pid=""
}
cleanup() {
    stop_emu
    [ -n "$lo_plain" ] && losetup -d "$lo_plain" || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
truncate -s 256M "$dir/plain.img" "$dir/backing.img"
mkdir "$dir/mnt"
lo_plain=$(losetup -f --show --direct-io=on "$dir/plain.img")
measure() { # NAME DEVICE
    for qd in 1 32; do
        printf '%s QD%s: ' "$1" "$qd"
        dev=$2
        "$bin" run custom --rw randread --bs 4k --iodepth "$qd" --target "$dev" --size 128MiB \
            --duration "${secs}s" --runs 1 --warmup 0 --ramp 0 --allow-destroy-device \
            --no-store --quiet --json - 2>/dev/null |
            python3 -c 'import json,sys; p=json.load(sys.stdin)["tests"][0]["passes"][0]; l=p["lat_us"]; print("%.0f IOPS, mean %.1f us, p50 %.1f us, p99 %.1f us" % (p["iops"], l["mean"], l["p50"], l["p99"]))'
    done
}
measure plain "$lo_plain"
for lanes in 1 64; do
    rm -f "$dir/stats.json"
    "$bin" emudisk serve --dir "$dir" --backing "$dir/backing.img" \
        --spec "{\"model\":\"fixed\",\"parallelism\":$lanes}" >"$dir/log" 2>&1 &
    pid=$!
    while [ ! -e "$dir/ready" ]; do sleep 0.05; done
    lo_emu=$(losetup -f --show --direct-io=on "$dir/mnt/disk.img")
    measure "emulated, $lanes lane(s)," "$lo_emu"
    "$bin" emudisk ctl "$dir" stats |
        python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print("  the model served", c["reads"], "reads")'
    stop_emu
done
