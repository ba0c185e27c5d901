// tests/fuzz/preflight_fuzz.cc: the pre-flight check on arbitrary bytes, read both as a spec
// (JSON, `check --spec`) and as an AI Toolkit config (`check CONFIG`): the memory model, the
// verdict and the fixes must answer or refuse, never crash, overflow or hang.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "parsers/job_config.h"
#include "triage/memory_model.h"
#include "triage/memory_spec.h"
#include "triage/preflight.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace oomtriage;
  // As `check --spec` reads it: within the limits of parsers/bounded_document.h.
  if (const auto doc = parsers::parse_json(text, "fuzz")) {
    if (const auto spec = triage::parse_memory_spec(*doc, "fuzz")) {
      const auto estimate = triage::estimate_memory(*spec, {1.1, 3, "fuzz"});
      (void)triage::judge(estimate, triage::usable_bytes(24ull << 30));
      (void)triage::preflight_spec(*spec, triage::usable_bytes(16ull << 30));
    }
  }
  if (const auto config = parsers::parse_job_config(text, parsers::ConfigFormat::kYaml, "fuzz")) {
    for (const uint64_t card : {8ull << 30, 24ull << 30}) {
      (void)triage::preflight_config(*config, triage::usable_bytes(card));
    }
  }
  return 0;
}
