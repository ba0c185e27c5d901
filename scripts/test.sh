#!/usr/bin/env bash
# scripts/test.sh: the README's second command. Sets up and builds, then runs every test through
# ctest. Tests read ../shared/corpus and ../shared/configs when present and skip them otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "${OOMTRIAGE_JOBS:-2}"
