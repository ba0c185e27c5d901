// daemon/common/human_units.cc
#include "daemon/common/human_units.h"

#include <fmt/format.h>

namespace oomtriage::daemon {

std::string format_bytes(uint64_t bytes) {
  if (bytes <= 1024) return fmt::format("{} bytes", bytes);
  const double value = static_cast<double>(bytes);
  if (bytes <= (1ull << 20)) return fmt::format("{:.2f} KiB", value / 1024.0);
  if (bytes <= (1ull << 30)) return fmt::format("{:.2f} MiB", value / 1048576.0);
  return fmt::format("{:.2f} GiB", value / 1073741824.0);
}

std::string step_text(std::optional<int64_t> step, std::optional<int64_t> total_steps) {
  if (!step) return "step unknown";
  if (total_steps) return fmt::format("step {}/{}", *step, *total_steps);
  return fmt::format("step {}", *step);
}

std::string duration_words(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return fmt::format("{} s", seconds);
  if (seconds < 3600) return fmt::format("{} min", seconds / 60);
  if (seconds < 86400) return fmt::format("{} h {:02} min", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{} d {} h", seconds / 86400, seconds % 86400 / 3600);
}

}  // namespace oomtriage::daemon
