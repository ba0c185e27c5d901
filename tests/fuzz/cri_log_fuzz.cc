// tests/fuzz/cri_log_fuzz.cc: libFuzzer entry point for the CRI decoder and the analyzer behind
// it. The first byte picks the chunk size; halfway the decoder's state is saved and a new one
// restored from it must hand on the same bytes as the first would have.
// Run: build-asan/cri_log_fuzz -max_total_time=60 DIR
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "parsers/cri_log.h"
#include "parsers/log_analyzer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  oomtriage::parsers::CriDecoder decoder;
  oomtriage::parsers::LogAnalyzer analyzer;
  std::string whole;
  std::string content;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    content.clear();
    decoder.feed(bytes.substr(i, chunk), content);
    analyzer.feed(content);
    whole += content;
  }
  content.clear();
  decoder.finish(content);
  analyzer.feed(content);
  whole += content;
  (void)analyzer.finish();

  // Restored at the line end reached halfway, the rest decodes to the same content.
  oomtriage::parsers::CriDecoder first;
  std::string resumed;
  first.feed(bytes.substr(0, bytes.size() / 2), resumed);
  oomtriage::parsers::CriDecoder second;
  if (!second.restore(first.state(), first.raw_offset())) std::abort();
  second.feed(bytes.substr(first.raw_offset()), resumed);
  second.finish(resumed);
  if (resumed != whole) std::abort();
  return 0;
}
