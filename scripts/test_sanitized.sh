#!/usr/bin/env bash
# scripts/test_sanitized.sh: the whole test suite again, built with AddressSanitizer and UBSan
# (build-asan/, shared with the fuzzers: scripts/sanitized_tree.sh), so memory errors and undefined
# behaviour fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitized_tree.sh
configure_sanitized_tree
cmake --build build-asan -j "${OOMTRIAGE_JOBS:-2}" --target oomtriage oomtriage_tests
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
ctest --test-dir build-asan --output-on-failure -j "${OOMTRIAGE_JOBS:-2}" -E "\\.deb installs|^torture"
# The torture test loads both cores itself (fast writers, logrotate, kill -9, a receiver outage)
# and waits a bounded time for every incident: beside other daemon tests under ASan it measures
# the machine (it failed so twice in CI runs on 2 cores), so it runs alone.
ctest --test-dir build-asan --output-on-failure -R "^torture"
