#!/usr/bin/env bash
# tests/check_test_names.sh BINARY: every doctest case can be run by its ctest name. ctest takes
# the names from doctest_discover_tests, and CMake cuts a name at ';' (its list separator): the
# cut name matches no test case, so that test ran nothing and passed. A name with ';' fails here.
set -euo pipefail
bad=$("$1" -ltc --no-version | grep -F ';' || true)
if [[ -n "$bad" ]]; then
  echo "test case names with ';' (ctest would run nothing under them):"
  echo "$bad"
  exit 1
fi
count=$("$1" -ltc --no-version | grep -vc -e '^\[doctest\]' -e '^=*$')
echo "$count test case names, none with ';'"
