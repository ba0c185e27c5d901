#!/usr/bin/env bash
# bench/scan_vs_rg.sh: times `oomtriage scan` against `rg -c 'out of memory'` on the same
# AI Toolkit-style log (generated once into bench/out/), side by side in one run, and prints the
# ratio. Target (docs/design.md): ratio <= 1.0. Usage: bench/scan_vs_rg.sh [SIZE_MIB] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib="${1:-1024}"
runs="${2:-3}"
log="bench/out/aitk-${size_mib}m.log"
mkdir -p bench/out
if [[ ! -f $log ]]; then
  echo "generating $log ..."
  python3 bench/gen_aitk_log.py "$log" "$size_mib"
fi
command -v rg >/dev/null || { echo "rg not found: apt-get install ripgrep" >&2; exit 2; }
[[ -x build/oomtriage ]] || scripts/setup.sh
cat "$log" >/dev/null  # both runs read from the page cache

best() {  # best wall time in seconds of `runs` runs of "$@"
  local best_time=""
  for ((i = 0; i < runs; i++)); do
    local start end t
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    t=$(echo "$end - $start" | bc -l)
    if [[ -z $best_time ]] || (($(echo "$t < $best_time" | bc -l))); then best_time=$t; fi
  done
  echo "$best_time"
}

bytes=$(stat -c %s "$log")
rg_time=$(best rg -c 'out of memory' "$log")
scan_time=$(best ./build/oomtriage scan --json "$log")
printf '%-32s %10s %12s\n' "command (best of $runs)" "seconds" "MiB/s"
printf '%-32s %10.3f %12.0f\n' "rg -c 'out of memory'" "$rg_time" "$(echo "$bytes / 1048576 / $rg_time" | bc -l)"
printf '%-32s %10.3f %12.0f\n' "oomtriage scan --json" "$scan_time" "$(echo "$bytes / 1048576 / $scan_time" | bc -l)"
printf 'ratio scan/rg: %.2f  (file: %s, %d bytes)\n' "$(echo "$scan_time / $rg_time" | bc -l)" "$log" "$bytes"
