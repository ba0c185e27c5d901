#!/usr/bin/env bash
# scripts/setup.sh: installs the Debian 12 packages oomtriage builds with (only the missing ones),
# then configures and builds it in build/. Idempotent; the demo and test scripts call it first.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake g++ ninja-build pkg-config ccache python3 logrotate
  libre2-dev libfmt-dev nlohmann-json3-dev doctest-dev libyaml-cpp-dev libcli11-dev libssl-dev
  libsqlite3-dev libboost-dev libsystemd-dev prometheus-alertmanager prometheus curl openssl
  groff-base systemd dpkg python3-tqdm python3-yaml python3-rich python3-colorama ripgrep python3-torch
  libtomlplusplus-dev libcrypt-dev libpq-dev postgresql zlib1g-dev libpng-dev chromium poppler-utils zsh fish tmux
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_type="${OOMTRIAGE_BUILD_TYPE:-RelWithDebInfo}"
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
fi
cmake --build build -j "${OOMTRIAGE_JOBS:-2}"
