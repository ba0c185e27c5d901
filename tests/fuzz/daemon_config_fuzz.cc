// tests/fuzz/daemon_config_fuzz.cc: the daemon's YAML config parser on arbitrary bytes: a config
// or a "file:line: reason" error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/common/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)oomtriage::daemon::parse_daemon_config(text, "fuzz.yaml");
  return 0;
}
