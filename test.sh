#!/usr/bin/env bash
# The whole iolab test suite. As root it first installs the Debian packages the tests use
# (retrying while another process holds the apt lock); tests never install anything. A test
# that needs root or a missing tool skips and says why; with IOLAB_REQUIRE_DEVICE_TESTS=1
# (.ci/run sets it as root) such a skip fails the test. Every skip is listed at the end.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES="fio fio-examples dbench e2fsprogs xfsprogs btrfs-progs util-linux python3 chromium strace sqlite3 git"
# The `mpi` feature's build (rsmpi: an MPI implementation and libclang) and its tests
# (mpirun; `ip` and `unshare` for the simulated hosts).
PACKAGES="$PACKAGES libopenmpi-dev openmpi-bin libclang-dev iproute2"
# The PostgreSQL store's tests (a throwaway server per test binary: initdb and pg_ctl).
PACKAGES="$PACKAGES postgresql"
# The PostgreSQL store's TLS (native-tls: OpenSSL) and its tests' self-signed certificate.
PACKAGES="$PACKAGES libssl-dev pkg-config openssl"
# `iolab serve` in a real browser: chromedriver (WebDriver) for the chromium above.
PACKAGES="$PACKAGES chromium-driver"

apt_install() {
  local missing=()
  for p in $PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "test.sh: installing ${missing[*]}"
  for attempt in $(seq 1 30); do
    if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 install -y -q "${missing[@]}"; then
      return 0
    fi
    # A stale package index or a held lock: refresh and retry.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 update -q || true
    echo "test.sh: apt-get failed (attempt $attempt), retrying in 10 s"
    sleep 10
  done
  echo "test.sh: could not install ${missing[*]}; tests needing them will skip (fail under IOLAB_REQUIRE_DEVICE_TESTS=1)" >&2
}

# zfs-fuse is optional (the zfs testbeds, studies and scrub tests skip without it). Its
# package may start a daemon; zfs-fuse allows one per machine and a testbed never shares
# one it did not start, so a running daemon is stopped.
zfs_fuse() {
  if ! dpkg -s zfs-fuse >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q zfs-fuse \
      || { echo "test.sh: zfs-fuse not installed; zfs tests will skip" >&2; return 0; }
  fi
  if pgrep -x zfs-fuse >/dev/null 2>&1; then
    echo "test.sh: stopping the zfs-fuse daemon the package started"
    service zfs-fuse stop >/dev/null 2>&1 || pkill -x zfs-fuse || true
    for _ in $(seq 1 30); do
      pgrep -x zfs-fuse >/dev/null 2>&1 || break
      sleep 0.5
    done
  fi
}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt_install
  zfs_fuse
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
IOLAB_SKIP_LOG="$(pwd)/target/skipped.txt"
export IOLAB_SKIP_LOG
mkdir -p target && : > "$IOLAB_SKIP_LOG"
# The workspace's test binaries as cargo builds them, one a line: package, kind (lib, bin,
# test), target name, package directory, source path (relative to it) and executable.
test_binaries() {
  cargo test --workspace --no-run --message-format=json-render-diagnostics | python3 -c '
import json, os, sys
rows = []
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    t = m["target"]
    d = os.path.dirname(m["manifest_path"])
    # path+file:///DIR#NAME@VERSION, or path+file:///DIR/NAME#VERSION.
    where, _, spec = m["package_id"].rpartition("#")
    pkg = spec.split("@")[0] if "@" in spec else where.rstrip("/").split("/")[-1]
    kind = t["kind"][0]
    rows.append(((pkg, {"lib": 0, "bin": 1}.get(kind, 2), t["name"]),
                 [pkg, kind, t["name"], d, os.path.relpath(t["src_path"], d), m["executable"]]))
for _, r in sorted(rows):
    print("\t".join(r))
'
}

# Runs one test binary as `cargo test` does (in its package directory), with cargo's
# header and, when it fails, cargo's rerun line (bench/flaky-parse.py reads both).
run_test_binary() {
  local pkg=$1 kind=$2 name=$3 dir=$4 src=$5 exe=$6 what
  local shown=${exe#"$PWD"/}
  if [ "$kind" = test ]; then
    echo "     Running $src ($shown)"
    what="--test $name"
  else
    echo "     Running unittests $src ($shown)"
    [ "$kind" = lib ] && what="--lib" || what="--bin $name"
  fi
  (cd "$dir" && "$exe") && return 0
  echo "error: test failed, to rerun pass \`-p $pkg $what\`"
  return 1
}

# Both lanes (see DEVICE_LANE below), then every crate's doc tests. Fails if any binary did.
run_lanes() {
  local list rc=0 lane_log="$TARGET_DIR/device-lane.log" lane_pid
  list=$(test_binaries) || return 1
  for b in $DEVICE_LANE; do
    if ! awk -F'\t' -v b="$b" '$2 == "test" && $1 "/" $3 == b { found = 1 } END { exit !found }' <<<"$list"; then
      echo "test.sh: DEVICE_LANE names $b, which is no test binary of the workspace" >&2
      return 1
    fi
  done
  set -m
  (
    lane_rc=0
    while IFS=$'\t' read -r pkg kind name dir src exe; do
      case " $DEVICE_LANE " in *" $pkg/$name "*) [ "$kind" = test ] || continue ;; *) continue ;; esac
      run_test_binary "$pkg" "$kind" "$name" "$dir" "$src" "$exe" || lane_rc=1
    done <<<"$list"
    exit $lane_rc
  ) </dev/null >"$lane_log" 2>&1 &
  lane_pid=$!
  set +m
  # Its own process group (set -m): stopped with the script, on any exit or signal.
  trap 'kill -TERM -- "-$lane_pid" 2>/dev/null' EXIT
  trap 'exit 130' INT TERM HUP
  while IFS=$'\t' read -r pkg kind name dir src exe; do
    if [ "$kind" = test ]; then
      case " $DEVICE_LANE " in *" $pkg/$name "*) continue ;; esac
    fi
    run_test_binary "$pkg" "$kind" "$name" "$dir" "$src" "$exe" || rc=1
  done <<<"$list"
  wait "$lane_pid" || rc=1
  trap - EXIT INT TERM HUP
  echo "test.sh: the device lane ($DEVICE_LANE), which ran beside the binaries above:"
  cat "$lane_log"
  cargo test --workspace --doc --no-fail-fast || rc=1
  return $rc
}

# --no-fail-fast: a failing test binary does not hide the ones after it; every step after
# this one still runs, and the script exits non-zero at the end if any of them failed.
FAILED=()
# A suite killed earlier (Ctrl-C, a CI timeout) may have left what its tests' commands
# recorded in their sandboxes' state directories (scratch directories under target/tmp):
# `iolab cleanup` removes it before this run starts.
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [ -x "$TARGET_DIR/debug/iolab" ] && [ -d "$TARGET_DIR/tmp" ]; then
  for d in "$TARGET_DIR"/tmp/.tmp*/; do
    [ -d "$d" ] && "$TARGET_DIR/debug/iolab" cleanup --state-dir "$d" >/dev/null 2>&1 || true
  done
fi
# Every test binary is built first (a compile error fails here, once), then run in two lanes.
# The binaries named in DEVICE_LANE spend most of their time waiting on throttled, emulated
# or slow devices and testbeds (aa: 44 s of wall for 15 s of CPU, emudisk 52 for 12,
# workloads' scrub 55 for 10, ground_truth 26 for 1; docs/testing.md, "Suite time"): they
# run one after another beside the other lane, which runs every other binary one after
# another. Device tests look only at devices of their own, whatever runs beside them. Every
# binary that builds zfs-fuse testbeds (one daemon a machine) is in this lane, so they never
# wait for each other. Its output is printed when both lanes are done, in one piece.
DEVICE_LANE="iolab/aa iolab/emudisk iolab/ground_truth iolab/truth iolab/scrub iolab/study \
  iolab-workloads/scrub iolab-testbed/testbeds iolab-env/capture"
run_lanes || FAILED+=("cargo test --workspace")
# The optional `mpi` feature (docs/mpi.md): the default build above has none of it. Its
# lint, the aggregation's unit tests and the real-mpirun tests.
if command -v mpirun >/dev/null && pkg-config --exists ompi-c 2>/dev/null; then
  # What the feature changes: the runner (its library, also as its unit tests, and its test
  # file pass_loop: name a new one here) and the binary with its mpi test; the binary's
  # other test files do not depend on the feature (linted above). Every step
  # names both packages: the same selection resolves the dependencies' features as the
  # workspace build did, so the crates below the runner that no MPI dependency changes
  # (sys, spec, measure, env, integrity, engine, stats, report) are not built again.
  MPI=(-p iolab-runner -p iolab --features iolab/mpi)
  { cargo clippy "${MPI[@]}" --lib --bins --test mpi --test pass_loop -- -D warnings \
      && cargo clippy "${MPI[@]}" --lib --profile test -- -D warnings; } \
    || FAILED+=("mpi clippy")
  # The runner's unit tests (its mpi:: aggregation among them) and the real-mpirun tests.
  cargo test "${MPI[@]}" --lib --test mpi --no-fail-fast || FAILED+=("mpi tests")
else
  echo "test.sh: no MPI (libopenmpi-dev, openmpi-bin): the mpi feature's tests did not run" \
    | tee -a "$IOLAB_SKIP_LOG"
  if [ "${IOLAB_REQUIRE_DEVICE_TESTS:-}" = 1 ]; then
    echo "test.sh: IOLAB_REQUIRE_DEVICE_TESTS=1: the mpi tests must run" >&2
    exit 1
  fi
fi
if [ -s "$IOLAB_SKIP_LOG" ]; then
  echo "test.sh: $(wc -l < "$IOLAB_SKIP_LOG") skips:"
  sed 's/^/  /' "$IOLAB_SKIP_LOG"
fi
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "test.sh: FAILED: ${FAILED[*]} (the failing tests are listed above each step's end)" >&2
  exit 1
fi
