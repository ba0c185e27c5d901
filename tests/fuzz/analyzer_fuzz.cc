// tests/fuzz/analyzer_fuzz.cc: libFuzzer entry point for the streaming analyzer. The first byte
// picks the chunk size, so the fuzzer also explores how records split across feed() calls.
// Build: scripts/fuzz.sh (it configures build-asan/, scripts/sanitized_tree.sh)
// Run:   build-asan/analyzer_fuzz -max_total_time=60 tests/testdata/logs
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "parsers/log_analyzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  oomtriage::parsers::LogAnalyzer analyzer;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    analyzer.feed(bytes.substr(i, chunk));
    if (i % (chunk * 8) == 0) (void)analyzer.take_events();
    if (i % (chunk * 4) == 0) (void)analyzer.live();  // the frame still waiting, parsed aside
  }
  (void)oomtriage::parsers::read_bar_vitals(bytes);
  (void)analyzer.finish();
  return 0;
}
