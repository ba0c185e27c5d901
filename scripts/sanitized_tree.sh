#!/usr/bin/env bash
# scripts/sanitized_tree.sh: sourced by fuzz.sh and test_sanitized.sh. One build tree, build-asan/,
# serves both: clang with ASan, UBSan and libFuzzer's coverage hooks, with line tables only
# (enough for a symbolized stack); the libraries at -O1, for the fuzzers' speed, the test files at
# -O0 (tests/CMakeLists.txt). Sharing it means CI compiles the sources under sanitizers once, not
# twice. Measured on one test file (tests/daemon/alerts_test.cc): 12 s at -O0, 31 s at -O1, 20 s
# with g++ -O0 -g as before; a library file costs about the same at -O0 and -O1.
configure_sanitized_tree() {
  command -v clang++ >/dev/null || {
    echo "$0: clang++ is not installed (apt-get install clang libclang-rt-14-dev)" >&2
    exit 2
  }
  # A tree from before the two were shared (g++, no fuzzing hooks) is configured again.
  if [[ -f build-asan/CMakeCache.txt ]] && ! grep -q '^OOMTRIAGE_FUZZ:BOOL=ON' build-asan/CMakeCache.txt; then
    rm -rf build-asan
  fi
  if [[ ! -f build-asan/build.ninja ]]; then
    cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DOOMTRIAGE_FUZZ=ON \
      -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" >/dev/null
  fi
}
