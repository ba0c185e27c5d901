#!/usr/bin/env bash
# bench/scan_vs_rg.sh: times `oomtriage scan --json` against `rg -c 'out of memory'` on two
# generated AI Toolkit-style logs of the same size, side by side, pairs run in turn, warm page
# cache: one whose bars are drawn by hand (gen_aitk_log.py) and one drawn by the real tqdm
# (gen_tqdm_log.py, needs Debian's python3-tqdm). rg maps a single file by default; in some VMs a
# page fault costs more than a copy, so `rg --no-mmap` is timed too and both ratios printed.
# Prints the medians and checks that scan's reader gives the JSON the slow path gives
# (build/read_chunks).
# Target (docs/design.md): ratio <= 1.0. Usage: bench/scan_vs_rg.sh [SIZE_MIB] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib="${1:-1024}"
runs="${2:-5}"
mkdir -p bench/out
command -v rg >/dev/null || { echo "rg not found: apt-get install ripgrep" >&2; exit 2; }
[[ -x build/oomtriage && -x build/read_chunks ]] || scripts/setup.sh

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
seconds() {  # wall seconds of "$@"
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

for kind in aitk tqdm; do
  log="bench/out/${kind}-${size_mib}m.log"
  if [[ ! -f $log ]]; then
    echo "generating $log ..." >&2
    if [[ $kind == aitk ]]; then
      python3 bench/gen_aitk_log.py "$log" "$size_mib"
    else
      /usr/bin/python3 bench/gen_tqdm_log.py "$log" "$size_mib" ||
        { echo "skipped: the tqdm log needs python3-tqdm" >&2; continue; }
    fi
  fi
  cat "$log" >/dev/null  # both read from the page cache
  rg_times=() rg_read_times=() scan_times=()
  for ((i = 0; i < runs; i++)); do
    rg_times+=("$(seconds rg -c 'out of memory' "$log")")
    rg_read_times+=("$(seconds rg --no-mmap -c 'out of memory' "$log")")
    scan_times+=("$(seconds ./build/oomtriage scan --json "$log")")
  done
  rg_time=$(printf '%s\n' "${rg_times[@]}" | median)
  rg_read_time=$(printf '%s\n' "${rg_read_times[@]}" | median)
  scan_time=$(printf '%s\n' "${scan_times[@]}" | median)
  same=$(./build/read_chunks --compare "$log" | tail -1)
  bytes=$(stat -L -c %s "$log")
  printf '%s: rg %.3f s, rg --no-mmap %.3f s, scan %.3f s (%.0f MiB/s): ratio %.2f (%.2f to --no-mmap); %s\n' \
    "$kind" "$rg_time" "$rg_read_time" "$scan_time" "$(echo "$bytes / 1048576 / $scan_time" | bc -l)" \
    "$(echo "$scan_time / $rg_time" | bc -l)" "$(echo "$scan_time / $rg_read_time" | bc -l)" "$same"
done
