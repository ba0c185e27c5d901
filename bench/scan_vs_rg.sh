#!/usr/bin/env bash
# bench/scan_vs_rg.sh: times `oomtriage scan --json` against `rg -c 'out of memory'` on two
# generated AI Toolkit-style logs of the same size, side by side, pairs run in turn, warm page
# cache: one whose bars are drawn by hand (gen_aitk_log.py) and one drawn by the real tqdm
# (gen_tqdm_log.py, needs Debian's python3-tqdm). rg maps a single file by default; `rg
# --no-mmap` is timed too and both ratios printed.
#
# Each log is timed with its page cache in two states, because what a mapping costs depends on
# them and varies by 7x (Linux 6.x with ext4's large folios):
# - "as written": the cache a program writing its log in small pieces leaves (a trainer; here a
#   copy made with 4 KiB writes). Its pages are 4 KiB folios: mapping the file costs a fault
#   every 16 pages, and rg's default mapped run is slow.
# - "read back": the log dropped from the cache (posix_fadvise DONTNEED) and read again by cat.
#   Readahead fills the cache with large folios, which map at a fraction of the cost.
# scan reads with pread(2) in both (see daemon/cli/part_reader.h).
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
drop_from_cache() {  # the file's clean pages leave the page cache (no root needed)
  sync "$1"
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
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
  same=$(./build/read_chunks --compare "$log" | tail -1)
  bytes=$(stat -L -c %s "$log")
  for state in "as written" "read back"; do
    target="$log"
    if [[ $state == "as written" ]]; then
      target="bench/out/${kind}-${size_mib}m.as-written.log"
      dd if="$log" of="$target" bs=4k status=none
      drop_from_cache "$log"  # the cache holds one copy at a time
    else
      drop_from_cache "$log"
    fi
    cat "$target" >/dev/null  # both read from the page cache
    rg_times=() rg_read_times=() scan_times=()
    for ((i = 0; i < runs; i++)); do
      rg_times+=("$(seconds rg -c 'out of memory' "$target")")
      rg_read_times+=("$(seconds rg --no-mmap -c 'out of memory' "$target")")
      scan_times+=("$(seconds ./build/oomtriage scan --json "$target")")
    done
    [[ $target == "$log" ]] || rm -f "$target"
    rg_time=$(printf '%s\n' "${rg_times[@]}" | median)
    rg_read_time=$(printf '%s\n' "${rg_read_times[@]}" | median)
    scan_time=$(printf '%s\n' "${scan_times[@]}" | median)
    printf '%s, %s: rg %.3f s, rg --no-mmap %.3f s, scan %.3f s (%.0f MiB/s): ratio %.2f (%.2f to --no-mmap); %s\n' \
      "$kind" "$state" "$rg_time" "$rg_read_time" "$scan_time" \
      "$(echo "$bytes / 1048576 / $scan_time" | bc -l)" "$(echo "$scan_time / $rg_time" | bc -l)" \
      "$(echo "$scan_time / $rg_read_time" | bc -l)" "$same"
  done
done
