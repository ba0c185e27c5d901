// tests/fuzz/job_config_fuzz.cc: the job config reader on arbitrary bytes, as YAML, as JSON and
// as the process config printed in a log. It must return a view or an error, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "parsers/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using oomtriage::parsers::ConfigFormat;
  for (ConfigFormat format : {ConfigFormat::kYaml, ConfigFormat::kJson, ConfigFormat::kPrintedProcess}) {
    const auto load = oomtriage::parsers::parse_job_config(text, format, "fuzz");
    if (load.config) (void)load.config->all_resolutions();
  }
  return 0;
}
