#!/usr/bin/env bash
# scripts/demo.sh: the README's first command. Sets up and builds, then runs the main job: the
# daemon with its SQLite store watches a fresh training folder while a bundled example log is
# written into it line by line like a live trainer; then `oomtriage report` tells that job's story.
# Then `oomtriage run --heal` supervises a (simulated) AI Toolkit job that needs two fixes to fit
# a 15 GiB GPU, and heals it unattended; `report` shows its attempts, alerts and config diff.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo

work=$(mktemp -d /tmp/oomtriage-demo-XXXXXX)
trap 'kill "${daemon_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/output/my_lora"
bin=./build/oomtriage

"$bin" --state-dir "$work/state" watch "$work/output" 2>"$work/daemon.log" &
daemon_pid=$!
sleep 0.5
cp examples/training_folder/my_lora/config.yaml "$work/output/my_lora/config.yaml"
echo "demo: writing examples/training_folder/my_lora/log.txt into $work/output/my_lora/log.txt ..."
python3 - "$work/output/my_lora/log.txt" <<'PY'
import sys, time
data = open("examples/training_folder/my_lora/log.txt", "rb").read()
with open(sys.argv[1], "ab") as out:
    for line in data.splitlines(keepends=True):
        out.write(line)
        out.flush()
        time.sleep(0.005)
PY
for _ in $(seq 50); do
  "$bin" --state-dir "$work/state" jobs --json | grep -q '"events": 1' && break
  sleep 0.1
done
echo "demo: what the daemon logged:"
cat "$work/daemon.log"
echo
"$bin" --state-dir "$work/state" jobs
echo
"$bin" --state-dir "$work/state" report my_lora
echo
# The same story as a page to look at (kept after the demo; open it in any browser).
"$bin" --state-dir "$work/state" report my_lora --html /tmp/oomtriage-demo-my_lora.html
kill -TERM "$daemon_pid"
wait "$daemon_pid" || true

echo
echo "demo: oomtriage run --heal on a job that fits a 15 GiB GPU only after two fixes"
echo "      (the fake AI Toolkit of tests/fake_trainers/ai_toolkit.py; its own output goes to train.log)"
mkdir -p "$work/heal"
cp examples/heal_job/job.yaml "$work/heal/job.yaml"
heal_state="$work/heal-state"
(
  cd "$work/heal"
  FAKE_VRAM_GIB=15 "$OLDPWD/$bin" --state-dir "$heal_state" run --heal --backoff 1 \
    --log train.log -- /usr/bin/python3 "$OLDPWD/tests/fake_trainers/ai_toolkit.py" job.yaml \
    2>&1 >/dev/null | grep '^oomtriage run'
)
echo
"$bin" --state-dir "$heal_state" --color never report heal_lora
