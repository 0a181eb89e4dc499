#!/bin/sh
# The diskchecker experiment on the emulated disk, at 50 cut points: `iolab run verify
# --journal` on a raw emulated disk (write-back cache, flushes honoured) is cut by a
# simulated power loss at 50 points chosen by the journal's size, half of them tearing the
# oldest unflushed write; `iolab verify --journal` must find no lost acknowledged write at
# any of them. The test suite runs the same test with 8 cut points. Root, /dev/fuse.
set -eu
cd "$(dirname "$0")/.."
IOLAB_EMU_CUTS=${IOLAB_EMU_CUTS:-50} IOLAB_REQUIRE_DEVICE_TESTS=1 \
    cargo test -p iolab --test emudisk -- --nocapture --exact \
    power_loss_loses_no_acknowledged_write_when_flushes_are_honoured
