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
cargo test --workspace --no-fail-fast || FAILED+=("cargo test --workspace")
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
