#!/usr/bin/env bash
# scripts/demo.sh: the README's first command. Sets up and builds, then runs the main job on the
# bundled example training folder (AI Toolkit's layout: <job>/log.txt beside its config.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo
./build/oomtriage scan examples/training_folder/*/log.txt
