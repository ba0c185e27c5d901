#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets with clang (ASan + UBSan + LeakSanitizer) and runs
# each for FUZZ_SECONDS (default 60) on seed corpora from the project's fixtures. Any crash, leak
# or timeout fails the script and leaves the input under build-asan/findings/ (turn it into a
# regression test). Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-60}}"
source scripts/sanitized_tree.sh
configure_sanitized_tree
ninja -C build-asan -j "${OOMTRIAGE_JOBS:-2}" analyzer_fuzz cri_log_fuzz job_config_fuzz \
  config_patch_fuzz daemon_config_fuzz preflight_fuzz bounded_document_fuzz native_config_fuzz

work=$(mktemp -d /tmp/oomtriage-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p build-asan/findings
seed() {  # seed TARGET FILES...
  local dir="$work/$1"
  mkdir -p "$dir"
  shift
  for f in "$@"; do [[ -f $f ]] && cp "$f" "$dir/"; done
  return 0
}
seed analyzer tests/testdata/logs/*.log ../shared/corpus/real-logs/*.log
seed job_config examples/training_folder/*/config.yaml ../shared/configs/ai-toolkit/*.yaml \
  tests/testdata/configs/*
seed config_patch examples/training_folder/*/config.yaml ../shared/configs/ai-toolkit/*.yaml \
  tests/testdata/configs/*
seed daemon_config systemd/oomtriage.yaml
seed bounded_document examples/training_folder/*/config.yaml tests/testdata/configs/* \
  systemd/oomtriage.yaml
seed native_config tests/testdata/configs/*.toml tests/testdata/configs/*.json
# kohya's config and, after a NUL byte, the dataset config it names (native_config_fuzz.cc).
for f in tests/testdata/configs/kohya_*.toml; do
  [[ -f $f ]] && { cat "$f"; printf '\0'; cat tests/testdata/configs/kohya_dataset.toml; } \
    >"$work/native_config/$(basename "$f").pair" 2>/dev/null || true
done
# The hostile documents of docs/reliability.md ("Files a user controls"), each refused with one
# line: a million nested JSON arrays in config.process[0] (2 MB; libFuzzer reads the first
# -max_len bytes of a seed, still far too deep), YAML nested deep in flow and block style, a
# billion laughs, a TOML header of 100,000 dotted segments and deep TOML arrays, brackets inside
# strings (not nesting).
hostile="$work/hostile"
mkdir -p "$hostile"
python3 - "$hostile" <<'PY'
import sys
d = sys.argv[1]
def put(name, text):
    with open(f"{d}/{name}", "w") as f:
        f.write(text)
n = 1000000
put("deep.json", '{"job": "extension", "config": {"name": "deep", "process": [' + "[" * n + "]" * n
    + "]}}\n")
put("deep_flow.yaml", "config:\n  process:\n    - " + "[" * 100000 + "]" * 100000 + "\n")
put("deep_block.yaml", "config:\n" + "".join(" " * (2 * i + 2) + "k:\n" for i in range(200)))
laughs = "lol0: &lol0 [" + ", ".join(["lol"] * 10) + "]\n"
for level in range(1, 10):
    laughs += f"lol{level}: &lol{level} [" + ", ".join([f"*lol{level - 1}"] * 10) + "]\n"
put("laughs.yaml", laughs + "config:\n  process:\n    - train: *lol9\n")
put("laughs_daemon.yaml", laughs + "watch:\n  - logs: *lol9\n")
put("deep.toml", "train_batch_size = 1\n[" + ".".join(["a"] * 100000) + "]\nx = 1\n")
put("deep_array.toml", "x = " + "[" * 300 + "]" * 300 + "\n")
put("strings.json", '{"a": "' + "[" * 1000 + '\\"' + "{" * 1000 + '"}\n')
put("spec.json", '{"model_family": ' + "[" * 100000 + "]" * 100000 + "}\n")
PY
for target in bounded_document native_config job_config config_patch daemon_config preflight; do
  seed "$target" "$hostile"/*
done
seed preflight examples/training_folder/*/config.yaml ../shared/configs/ai-toolkit/*.yaml
# Specs as `check --spec` takes them.
head -n 40 ../shared/data/vram/dev.jsonl 2>/dev/null | python3 -c '
import json, sys
for i, line in enumerate(sys.stdin):
    open(sys.argv[1] + f"/spec{i}.json", "w").write(json.dumps(json.loads(line)["spec"]))
' "$work/preflight" 2>/dev/null || true
printf '%s' '{"model_family": "flux1-dev", "resolution": [1024, 1024], "batch_size": 2}' \
  >"$work/preflight/flux.json"
seed cri_log tests/testdata/logs/aitk_sampling_oom_step500.log
# A container log as containerd writes it: P fragments of stderr, F lines of stdout between.
printf '%s\n' "2026-11-30T10:15:00.000000001Z stderr P \rmy_lora:  16%|#  | 500/3000 [00:20<12:00, 1." \
  "2026-11-30T10:15:00.000000002Z stdout F Saving at step 500" \
  "2026-11-30T10:15:00.000000003Z stderr P 40s/it]\rGenerating Samples" \
  "2026-11-30T10:15:00.000000004Z stderr F torch.OutOfMemoryError: CUDA out of memory. Tried to" \
  "2026-11-30T10:15:00.000000005Z stderr F:x allocate 1.50 GiB." >"$work/cri_log/seed.log"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# One fuzzer per core: each is single-threaded, so on 2 cores two run at once.
fuzz_one() {  # fuzz_one TARGET: runs it, prints its summary; non-zero on a finding
  local target=$1
  if ! ./build-asan/${target}_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix=build-asan/findings/${target}- "$work/$target" \
      >"$work/$target.log" 2>&1; then
    echo "fuzz: ${target}_fuzz FAILED" >&2
    tail -n 40 "$work/$target.log" >&2
    return 1
  fi
  grep -E "^Done [0-9]+ runs" "$work/$target.log" | sed "s/^/fuzz: ${target}_fuzz: /"
}
status=0
running=()
for target in analyzer cri_log job_config config_patch daemon_config preflight bounded_document \
  native_config; do
  echo "fuzz: ${target}_fuzz for ${seconds}s"
  fuzz_one "$target" &
  running+=($!)
  if ((${#running[@]} >= ${OOMTRIAGE_JOBS:-2})); then
    wait "${running[0]}" || status=1
    running=("${running[@]:1}")
  fi
done
for pid in "${running[@]}"; do wait "$pid" || status=1; done
exit $status
