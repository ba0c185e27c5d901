// tests/support/skip.h
//
// A test that cannot run says why and is reported as skipped, never as passed: under ctest
// (which sets OOMTRIAGE_SKIP_EXIT and treats that exit code as "skipped") the process ends with
// that code; run directly, the reason is printed and the test returns.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace oomtriage::testing {

inline void skip_test(const std::string& reason) {
  MESSAGE("skipped: " << reason);
  if (const char* code = std::getenv("OOMTRIAGE_SKIP_EXIT")) {
    std::fprintf(stderr, "skipped: %s\n", reason.c_str());
    std::fflush(nullptr);
    std::_Exit(std::atoi(code));
  }
}

// Whether `name` is a program on PATH: a test that needs one skips without it.
inline bool have_program(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace oomtriage::testing

// Ends the current test as skipped (the caller's `return` matters only outside ctest).
#define OOMTRIAGE_SKIP(reason)               \
  do {                                       \
    ::oomtriage::testing::skip_test(reason); \
    return;                                  \
  } while (false)
