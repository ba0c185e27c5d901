#!/usr/bin/env bash
# bench/run_all.sh: every benchmark, one table. scan vs rg on two 1 GiB AI Toolkit logs (bars
# drawn by hand and by the real tqdm; each with its page cache as written and as read back), alert latency over 200 incidents while 1,000 other logs
# grow at 10 records/s, 1,000 watched logs at 10 and 1 records/s, and idle wake-ups per minute
# with nothing happening. Takes about 10 minutes (the first run also generates the logs).
# Usage: bench/run_all.sh [SCAN_MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-1024}"
[[ -x build/oomtriage ]] || scripts/setup.sh
command -v rg >/dev/null || apt-get install -y -qq ripgrep >/dev/null

scan=$(bash bench/scan_vs_rg.sh "$size" 5 | grep ratio)
alerts=$(python3 bench/alert_latency.py 200 1000 10)
# 60 s: two of the daemon's 30 s progress checkpoints in every window, not zero or one.
load10=$(python3 bench/daemon_load.py 1000 10 60 30 | sed -n 2p)
load1=$(python3 bench/daemon_load.py 1000 1 60 30 | sed -n 2p)

# Idle: a daemon with 100 quiet logs, its context switches over 60 s (each is a wake-up).
work=$(mktemp -d /tmp/oomtriage-idle-XXXXXX)
mkdir -p "$work/out"
for i in $(seq 100); do mkdir -p "$work/out/j$i"; echo "Running 1 job" > "$work/out/j$i/log.txt"; done
./build/oomtriage --state-dir "$work/state" watch "$work/out" 2>/dev/null &
pid=$!
sleep 3
before=$(awk '/ctxt_switches/ {s+=$2} END {print s}' /proc/$pid/status)
sleep 60
after=$(awk '/ctxt_switches/ {s+=$2} END {print s}' /proc/$pid/status)
kill $pid; wait $pid 2>/dev/null || true
rm -rf "$work"

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
printf '%-44s %s\n' "benchmark" "result"
label="scan vs rg -c 'out of memory' (${size} MiB)"
while IFS= read -r line; do
  printf '%-44s %s\n' "$label" "$line"
  label=""
done <<<"$scan"
printf '%-44s %s\n' "alert latency, 200 incidents under load" "$alerts"
printf '%-44s %s\n' "1,000 logs x 10 records/s" "$load10"
printf '%-44s %s\n' "1,000 logs x 1 record/s" "$load1"
printf '%-44s %s\n' "idle wake-ups, 100 quiet logs, 60 s" "$((after - before)) context switches"
