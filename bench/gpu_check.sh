#!/usr/bin/env bash
# bench/gpu_check.sh: the GPU memory timeline on a real GPU (docs/gpu-memory.md). A PyTorch loop
# under `oomtriage run` draws a training bar and grows its allocations step by step, with a
# larger preview every 10 steps, until CUDA runs out of memory. Then it prints what oomtriage
# stored and warned: `report` (the peak per phase and other processes), `jobs` (peak and
# headroom) and the near-OOM line `run` printed. What to look for: one "near OOM" warning before
# the crash, the preview as the peak phase, the peak within a few hundred MiB of the crash's
# "in use" figure.
# Needs an NVIDIA GPU with its driver (libnvidia-ml.so.1) and python3 with torch; exits 77 (skip)
# without them. Usage: bench/gpu_check.sh [STEP_MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
step_mib="${1:-512}"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || {
  echo "gpu_check: no CUDA GPU with PyTorch here: skipped" >&2
  exit 77
}
[[ -x build/oomtriage ]] || scripts/setup.sh
state="$(mktemp -d)"
trap 'rm -rf "$state"' EXIT
cat >"$state/grow.py" <<'PY'
import sys, time, torch
step_mib = int(sys.argv[1])
held, total = [], 1000
for step in range(1, total + 1):
    held.append(torch.empty(step_mib << 20, dtype=torch.uint8, device="cuda"))
    print(f"gpu_check: {100 * step // total:3d}%|          | {step}/{total} [00:01<00:10, 1.00it/s]", flush=True)
    time.sleep(1.5)  # the sampler looks once a second
    if step % 10 == 0:
        print(f"Sampling at step {step}", flush=True)
        preview = torch.empty(2 * step_mib << 20, dtype=torch.uint8, device="cuda")
        time.sleep(1.5)
        del preview
PY
set +e
build/oomtriage --state-dir "$state" run --job gpu_check --log "$state/gpu_check.log" -- \
  python3 "$state/grow.py" "$step_mib" 2>"$state/run.err"
code=$?
set -e
echo "== oomtriage run exited $code; its lines:"
grep '^oomtriage run' "$state/run.err" || true
echo "== report"
build/oomtriage --state-dir "$state" report gpu_check
echo "== jobs"
build/oomtriage --state-dir "$state" jobs
